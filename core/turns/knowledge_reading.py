"""The knowledge-base passages a turn reads: once per turn, for every model call of it.

Invariants:
- a turn asks the search for at most `knowledge_top_k` passages serving the
  consultation's role (its own, else the deployment's default), by the query of
  `core.prompting.excerpts.knowledge_query`, and keeps those that fit
  `knowledge_max_chars` (`core.prompting.excerpts.fit_passages`);
- an empty knowledge base is no knowledge base: the turn's calls are sent what they are
  sent without one (no reference section, no "the knowledge base has nothing on it");
- a search that fails (the store's error, or anything else but a cancellation) fails
  nothing: the turn's calls go on without excerpts (`None`, as with no knowledge base)
  and the failure is logged, one line per failed search.
"""

from __future__ import annotations

import logging

from core.domain.consultation import Consultation
from core.domain.knowledge import KnowledgeSearch, Passage
from core.prompting.excerpts import fit_passages, knowledge_query
from core.prompting.requests import EngineConfig

log = logging.getLogger(__name__)


class KnowledgeReader:
    """Reads a turn's passages from the deployment's `KnowledgeSearch`."""

    def __init__(self, search: KnowledgeSearch, config: EngineConfig) -> None:
        self._search = search
        self._config = config

    async def read(self, consultation: Consultation) -> tuple[Passage, ...] | None:
        """The passages for the consultation's open turn, best first; None when the
        search failed or the knowledge base is empty (see the module)."""
        query = knowledge_query(consultation)
        try:
            found = await self._search.search(
                query,
                role=consultation.role or self._config.default_role,
                limit=self._config.knowledge_top_k,
            )
        except Exception as exc:  # the turn goes on without excerpts, never fails for them
            log.warning(
                "knowledge base not read for consultation %s, answering without it: %s: %s",
                consultation.id,
                type(exc).__name__,
                exc,
            )
            return None
        if found is None:  # an empty knowledge base: the calls are as without one
            return None
        return fit_passages(found[: self._config.knowledge_top_k], self._config.knowledge_max_chars)
