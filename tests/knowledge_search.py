"""A `KnowledgeSearch` over a list of passages: the port's fake for the engine's tests.

It finds the passages sharing a word with the query (three letters or more, any case),
best first in the list's order; a document tagged with a role
(`roles`) serves only that role. Every search is recorded (`searches`), and `failure`,
when set, is raised by each search instead, as a store that cannot be read would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.domain.knowledge import Passage

_WORD = re.compile(r"\w{3,}")


@dataclass(frozen=True, slots=True)
class Search:
    """One search as the engine asked it."""

    query: str
    role: str | None
    limit: int


@dataclass
class ListedKnowledge:
    passages: Sequence[Passage]
    roles: Mapping[int, str] = field(default_factory=dict)  # document id → its only role
    failure: Exception | None = None
    searches: list[Search] = field(default_factory=list)

    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage] | None:
        self.searches.append(Search(query, role, limit))
        if self.failure is not None:
            raise self.failure
        if not self.passages:
            return None  # an empty knowledge base, as the stores answer
        words = {w.lower() for w in _WORD.findall(query)}
        found = [
            passage
            for passage in self.passages
            if self.roles.get(passage.document_id, role) == role
            and words & {w.lower() for w in _WORD.findall(passage.text + " " + passage.title)}
        ]
        return found[:limit]


def passage(
    chunk_id: int,
    text: str,
    *,
    title: str = "Kettle manual",
    section: str = "",
    page: int | None = None,
    document_id: int | None = None,
) -> Passage:
    """A passage of document `document_id` (its chunk id when not given)."""
    return Passage(
        chunk_id=chunk_id,
        document_id=chunk_id if document_id is None else document_id,
        title=title,
        section=section,
        page=page,
        text=text,
        score=1.0,
    )
