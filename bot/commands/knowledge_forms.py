"""What an operator's /knowledge asks, read from the words of the command or the caption.

Invariant: only forms shaped exactly as documented ask anything, everything else is None
(the usage text, nothing read or changed):
- `/knowledge` or `/knowledge list`: the documents;
- `/knowledge remove N [M …]`: 1 to `MAX_IDS` document ids, each 1–18 ASCII digits (within
  both stores' 64-bit ids), repeats counted once;
- `/knowledge search [role=NAME] QUERY`: the passages a consultation would receive;
- a document's caption `/knowledge` or `/knowledge role=NAME`: add it.
A role name is 1–64 ASCII letters, digits, `_` or `-`; whether the deployment has it is
checked where it is used. Pure: no Telegram, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_IDS = 50
_ID = re.compile(r"[0-9]{1,18}")
_ROLE = re.compile(r"role=([A-Za-z0-9_-]{1,64})")
_AFTER_COMMAND = re.compile(r"\s*\S+\s*(.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ListDocuments:
    """The documents of the knowledge base."""


@dataclass(frozen=True, slots=True)
class RemoveDocuments:
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SearchPassages:
    query: str
    role: str | None  # None: the deployment's default role, as a consultation without one


@dataclass(frozen=True, slots=True)
class AddDocument:
    role: str | None  # None: the document serves every role


Asked = ListDocuments | RemoveDocuments | SearchPassages


def _arguments(text: str) -> str:
    """What follows the command word (`/knowledge` or `/knowledge@bot`)."""
    found = _AFTER_COMMAND.fullmatch(text)
    return found.group(1).strip() if found else ""


def command_asks(text: str) -> Asked | None:
    """What a `/knowledge …` text asks; None for any other form."""
    rest = _arguments(text)
    words = rest.split()
    if not words or (len(words) == 1 and words[0].lower() == "list"):
        return ListDocuments()
    action = words[0].lower()
    if action == "remove":
        given = words[1:]
        if not 1 <= len(given) <= MAX_IDS or not all(_ID.fullmatch(w) for w in given):
            return None
        ids = tuple(dict.fromkeys(int(word) for word in given))
        return None if 0 in ids else RemoveDocuments(ids)
    if action == "search":
        query = rest[len(words[0]) :].strip()
        role = None
        first = query.split(maxsplit=1)
        if first and (named := _ROLE.fullmatch(first[0])):
            role = named.group(1)
            query = first[1].strip() if len(first) > 1 else ""
        return SearchPassages(query, role) if query else None
    return None


def caption_asks(text: str) -> AddDocument | None:
    """What a document's `/knowledge …` caption asks; None for any other form."""
    words = _arguments(text).split()
    if not words:
        return AddDocument(None)
    if len(words) == 1 and (named := _ROLE.fullmatch(words[0])):
        return AddDocument(named.group(1))
    return None
