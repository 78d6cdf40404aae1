"""The knowledge-base excerpts a model call of a consultation is given: what is searched
for, how much of what is found is kept, and the system message's part holding it.

Invariants:
- the query is the consultation's original request and its latest user message (the open
  turn; once when they are one), document bodies by name only, at most
  `MAX_QUERY_CHARS`: a pasted document never becomes a search;
- `fit_passages` keeps passages best first while their text fits `max_chars` in all,
  stopping at the first that does not (passages stay whole); only a first passage longer
  than the budget by itself is cut, to its beginning;
- the part (`knowledge_reference`) labels the kept passages `K1`… in their order and is
  a `core.prompting.context.Reference`: the context window drops the last ones first.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from core.domain.attachments import without_document_bodies
from core.domain.consultation import Consultation
from core.domain.knowledge import Passage
from core.prompting.context import SEPARATOR, Reference
from core.prompting.prompts import PromptLibrary

MAX_QUERY_CHARS = 2000
"""The longest search: the request's start, then the latest message's start."""
CUT_MARK = " …"


def knowledge_query(consultation: Consultation) -> str:
    """What the turn's passages are searched by (see the module); the latest message gets
    up to half of `MAX_QUERY_CHARS`, the request the rest."""
    request = without_document_bodies(consultation.initial_request).strip()
    latest = SEPARATOR.join(m.text for m in consultation.open_turn)
    latest = without_document_bodies(latest).strip()
    if not latest or latest.startswith(request):  # the request's own round
        return (latest or request)[:MAX_QUERY_CHARS]
    latest = latest[: MAX_QUERY_CHARS // 2]
    room = MAX_QUERY_CHARS - len(latest) - len(SEPARATOR)
    return request[:room] + SEPARATOR + latest if request else latest


def fit_passages(passages: Sequence[Passage], max_chars: int) -> tuple[Passage, ...]:
    """The passages whose text fits `max_chars` in all (see the module)."""
    kept: list[Passage] = []
    left = max_chars
    for passage in passages:
        if len(passage.text) <= left:
            kept.append(passage)
            left -= len(passage.text)
        elif not kept and max_chars > len(CUT_MARK):
            return (dataclasses.replace(passage, text=_cut(passage.text, max_chars)),)
        else:
            break
    return tuple(kept)


def _cut(text: str, max_chars: int) -> str:
    """The beginning of `text` in `max_chars`, ended at a word where one ends near."""
    room = max_chars - len(CUT_MARK)
    head = text[:room]
    space = head.rfind(" ")
    if space > room * 3 // 4:
        head = head[:space]
    return head.rstrip() + CUT_MARK


def knowledge_reference(
    prompts: PromptLibrary, passages: Sequence[Passage], *, answering: bool
) -> Reference | None:
    """The system message's part for `passages` (None without any): an answer's
    instruction when `answering` (rely on them, cite them), else a round's."""
    if not passages:
        return None
    chosen = tuple(passages)
    return Reference(len(chosen), lambda n: prompts.knowledge(chosen[:n], answering=answering))
