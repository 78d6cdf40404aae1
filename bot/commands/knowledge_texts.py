"""What an operator reads of /knowledge: the documents, the passages a search finds, what
an upload did, each in the operator's language.

Invariants: every answer is one Telegram message: whole blocks (a document's line, a
passage) are kept while they fit, and the ones left out are counted ("…and 3 more"),
never cut through; a title or a passage's text is shown on one line, cut at a word, so
one long document cannot crowd out the rest. Texts only: no Telegram calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bot.commands.file_turns import excerpt, size_text
from bot.transport.render import TELEGRAM_LIMIT
from core.domain.errors import AttachmentProblem
from core.domain.knowledge import KnowledgeDocument, Passage, Stored
from i18n.translate import t
from media.knowledge_files import SUFFIXES, UPLOAD_SCHEME, Loaded, upload_source

TITLE_CHARS = 120
PASSAGE_CHARS = 500
KINDS = ", ".join(SUFFIXES)
"""The kinds of file the knowledge base reads, as the operator is told them."""


def utf16_length(text: str) -> int:
    """Telegram counts a message's length in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def fit(
    head: str,
    blocks: Sequence[str],
    more: Callable[[int], str],
    *,
    separator: str = "\n",
    limit: int = TELEGRAM_LIMIT,
) -> str:
    """`head` and as many of `blocks` as fit `limit` with room for `more(left out)`."""
    kept = [head]
    size = utf16_length(head)
    for index, block in enumerate(blocks):
        left = len(blocks) - index - 1
        tail = utf16_length(separator + more(left)) if left else 0
        grown = size + utf16_length(separator + block)
        if grown + tail > limit:
            kept.append(more(len(blocks) - index))
            break
        kept.append(block)
        size = grown
    return separator.join(kept)


def usage_text(language: str, max_bytes: int) -> str:
    return t(language, "knowledge_usage", kinds=KINDS, limit=size_text(max_bytes, language))


def one_line(text: str, limit: int) -> str:
    return excerpt(text, limit) if text.strip() else "—"


def added_at(document: KnowledgeDocument) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(document.added_at))


def documents_text(language: str, documents: Sequence[KnowledgeDocument]) -> str:
    """The documents, oldest first: id, title, role, passages, when added (UTC)."""
    lines = []
    for document in documents:
        values = {
            "id": document.id,
            "title": one_line(document.title, TITLE_CHARS),
            "passages": document.chunks,
            "added": added_at(document),
        }
        if document.role:
            lines.append(t(language, "knowledge_line_role", role=document.role, **values))
        else:
            lines.append(t(language, "knowledge_line", **values))
    head = t(language, "knowledge_listed", count=len(documents))
    return fit(head, lines, lambda left: t(language, "knowledge_more", count=left))


def passages_text(language: str, passages: Sequence[Passage]) -> str:
    """The passages as a consultation would receive them, labelled K1… best first, each
    with its place, page, document and score, and the start of its text."""
    blocks = []
    for number, passage in enumerate(passages, start=1):
        place = passage.place
        values = {
            "label": f"K{number}",
            "place": one_line(place, TITLE_CHARS),
            "id": passage.document_id,
            "score": f"{passage.score:.3f}",
        }
        if passage.page is not None:
            label = t(language, "knowledge_passage_page", page=passage.page, **values)
        else:
            label = t(language, "knowledge_passage", **values)
        blocks.append(label + "\n" + one_line(passage.text, PASSAGE_CHARS))
    head = t(language, "knowledge_found")
    more = lambda left: t(language, "knowledge_more", count=left)  # noqa: E731
    return fit(head, blocks, more, separator="\n\n")


def removed_text(language: str, asked: Sequence[int], removed: Sequence[int]) -> str:
    """Which of the ids were removed, and which named no document."""
    gone = [number for number in asked if number in removed]
    missing = [number for number in asked if number not in removed]
    lines = []
    if gone:
        lines.append(t(language, "knowledge_removed", ids=ids_text(gone)))
    if missing:
        lines.append(t(language, "knowledge_not_found", ids=ids_text(missing)))
    return "\n".join(lines)


def ids_text(ids: Sequence[int]) -> str:
    return ", ".join(f"#{number}" for number in ids)


def upload_name(name: str) -> str:
    """An uploaded file as the knowledge base names it: its base name, printable."""
    return upload_source(name).removeprefix(UPLOAD_SCHEME)


_REFUSALS = {
    AttachmentProblem.UNSUPPORTED: "knowledge_failed_unsupported",
    AttachmentProblem.UNREADABLE: "knowledge_failed_unreadable",
    AttachmentProblem.NO_TEXT: "knowledge_failed_no_text",
    AttachmentProblem.TOO_COSTLY: "knowledge_failed_too_costly",
}


def refused_text(
    language: str, name: str, problem: AttachmentProblem | None, reason: str, max_bytes: int
) -> str:
    """Why the file `name` was not added; a reason no message words is given as it came."""
    if problem is AttachmentProblem.TOO_LARGE:
        limit = size_text(max_bytes, language)
        return t(language, "knowledge_failed_too_large", name=name, limit=limit)
    if problem in _REFUSALS:
        return t(language, _REFUSALS[problem], name=name, kinds=KINDS)
    return t(language, "knowledge_failed", name=name, reason=reason)


def loaded_text(language: str, loaded: Loaded, max_bytes: int) -> str:
    """What loading an upload did: added, replaced, unchanged (with its id, title and
    passages, and whether only part of it was read), or why it failed."""
    name = loaded.source.removeprefix(UPLOAD_SCHEME)
    if loaded.problem or loaded.document is None:
        return refused_text(language, name, loaded.refusal, loaded.problem, max_bytes)
    document = loaded.document
    values = {
        "id": document.id,
        "title": one_line(document.title, TITLE_CHARS),
        "passages": document.chunks,
        "name": name,
    }
    key = {
        Stored.ADDED: "knowledge_added",
        Stored.REPLACED: "knowledge_replaced",
        Stored.UNCHANGED: "knowledge_unchanged",
    }[loaded.stored or Stored.ADDED]
    text = t(language, key, **values)
    if document.role:
        text += "\n" + t(language, "knowledge_for_role", role=document.role)
    if loaded.note:
        text += "\n" + t(language, "knowledge_partial")
    return text
