"""The knowledge base's search offered as a tool (`knowledge__search`), for one turn.

Invariants:
- it searches the same `KnowledgeSearch` the turn's automatic excerpts came from
  (`core.turns.knowledge_reading`), for the consultation's role, at most
  `knowledge_top_k` passages fitted to `knowledge_max_chars` (`core.prompting.excerpts`);
- its passages are labelled as the excerpts are: one the turn was given keeps its label,
  a new one gets the next after all labelled so far, so a citation `[K7]` names one
  passage in the whole turn (`citable`);
- a bad query (not a JSON object with a non-empty string `query`) and a failed search are
  results the model reads (`ToolUse.error`), never exceptions.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence

from core.domain.knowledge import KnowledgeSearch, Passage
from core.domain.tools import SEPARATOR, ToolCall, ToolFailure, ToolSpec, ToolUse
from core.prompting.excerpts import MAX_QUERY_CHARS, fit_passages
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig

log = logging.getLogger(__name__)

SERVER = "knowledge"
TOOL = "search"
NAME = f"{SERVER}{SEPARATOR}{TOOL}"
PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string", "maxLength": MAX_QUERY_CHARS}},
    "required": ["query"],
}


class KnowledgeTool:
    """A `core.domain.tools.Toolbox` of one tool for one turn (see the module)."""

    def __init__(
        self,
        search: KnowledgeSearch,
        *,
        role: str,
        config: EngineConfig,
        prompts: PromptLibrary,
        labelled: Sequence[Passage],
    ) -> None:
        """`labelled`: the turn's own passages, `K1`… in this order."""
        self._search = search
        self._role = role
        self._config = config
        self._prompts = prompts
        self._passages = list(labelled)
        self._spec = ToolSpec(NAME, SERVER, TOOL, prompts.knowledge_tool, PARAMETERS)

    def specs(self) -> Sequence[ToolSpec]:
        return (self._spec,)

    def citable(self) -> tuple[Passage, ...]:
        """Every passage labelled in the turn, `K1`… in this order."""
        return tuple(self._passages)

    async def call(self, call: ToolCall) -> ToolUse:
        started = time.monotonic()
        query = _query(call.arguments)
        if query is None:
            return self._use(call, started, error="invalid arguments: give a non-empty query")
        try:
            found = await self._search.search(
                query[:MAX_QUERY_CHARS], role=self._role, limit=self._config.knowledge_top_k
            )
        except Exception as exc:  # the model reads that it failed; the turn goes on
            log.warning("knowledge search as a tool failed: %s: %s", type(exc).__name__, exc)
            return self._use(call, started, error="the search failed", failure=ToolFailure.FAILED)
        kept = fit_passages((found or [])[: self._config.knowledge_top_k], self._max_chars)
        if not kept:
            return self._use(call, started, result="Nothing found in the knowledge base.")
        positions = [self._position(passage) for passage in kept]
        return self._use(call, started, result=self._prompts.knowledge_excerpts(kept, positions))

    @property
    def _max_chars(self) -> int:
        return self._config.knowledge_max_chars

    def _position(self, passage: Passage) -> int:
        """The passage's label number: its own when it was labelled, else the next."""
        for position, known in enumerate(self._passages, 1):
            if known == passage:
                return position
        self._passages.append(passage)
        return len(self._passages)

    def _use(
        self,
        call: ToolCall,
        started: float,
        *,
        result: str = "",
        error: str | None = None,
        failure: ToolFailure | None = None,
    ) -> ToolUse:
        if error is not None and failure is None:
            failure = ToolFailure.INVALID_ARGUMENTS
        return ToolUse(
            name=NAME,
            server=SERVER,
            tool=TOOL,
            arguments=call.arguments[:2000],
            result=result,
            error=error,
            failure=failure,
            ms=int((time.monotonic() - started) * 1000),
        )


def _query(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query.strip() if isinstance(query, str) and query.strip() else None
