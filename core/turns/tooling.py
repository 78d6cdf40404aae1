"""What tools a turn is offered, and the turn's completer that runs them.

Invariants:
- a turn is offered the deployment's toolbox (the MCP servers', None without any) and,
  with `knowledge_tool`, when the knowledge base has documents (the turn's search found
  it not empty), its search (`core.turns.knowledge_tool`), joined with unique names
  (`core.turns.joined_tools`); with none of them, or `tools_max_calls` 0, the turn's
  completer is the engine's own and nothing changes;
- the final answer, a follow-up and (with `tools_in_rounds`) a clarifying round are
  offered the tools, the knowledge base's search only the answers (a round is given the
  turn's excerpts already, and a structured round that called no tool but wrote prose is
  asked again in its format: the search offered to every round would cost that second
  call whenever the model does not use it), never while the model's endpoint is known to lack them
  (`core.llm.tool_loop.ToolSupport`, learned once per process); client memory's calls
  never are (they do not go through here);
- one `ToolLoop` per turn: the turn's tool calls are counted across all its model calls,
  and what ran is the turn's `uses`, for its reply and its stored message.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.domain.consultation import Consultation
from core.domain.knowledge import KnowledgeSearch, Passage
from core.domain.ports import Completer
from core.domain.tools import OnToolStart, Toolbox, ToolSpec, ToolUse
from core.llm.tool_loop import ToolLimits, ToolLoop, ToolSupport
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.turns.joined_tools import JoinedToolbox
from core.turns.knowledge_tool import SERVER as KNOWLEDGE_SERVER
from core.turns.knowledge_tool import KnowledgeTool


class TurnTools:
    """One turn's tools: the completer its model calls go through, and what ran."""

    def __init__(
        self,
        completer: Completer,
        *,
        specs: Sequence[ToolSpec] = (),
        round_specs: Sequence[ToolSpec] = (),
        in_rounds: bool = False,
        support: ToolSupport | None = None,
        knowledge: KnowledgeTool | None = None,
    ) -> None:
        self.completer = completer
        self._specs = tuple(specs)
        self._round_specs = tuple(round_specs)
        self._in_rounds = in_rounds
        self._support = support
        self._knowledge = knowledge

    def offered(self, model: str, *, answering: bool) -> tuple[ToolSpec, ...]:
        """The tools a call of `model` is offered: an answer's (final, follow-up), or a
        round's (`answering` False) when rounds take them."""
        offered = self._specs if answering else self._round_specs if self._in_rounds else ()
        if not offered:
            return ()
        if self._support is not None and self._support.lacks(model):
            return ()
        return offered

    @property
    def uses(self) -> tuple[ToolUse, ...]:
        """The tool calls run so far this turn, in the order they ran."""
        return tuple(self.completer.uses) if isinstance(self.completer, ToolLoop) else ()

    def citable(self, kept: tuple[Passage, ...]) -> tuple[Passage, ...]:
        """The passages a reply's citations name: the request's (`kept`), and those the
        knowledge base's search as a tool labelled after them."""
        if self._knowledge is None:
            return kept
        every = self._knowledge.citable()
        return every if len(every) > len(kept) else kept


class Tooling:
    """The engine's tools: the deployment's toolbox, the knowledge base's search, the
    limits, and what the process learned of each endpoint."""

    def __init__(
        self,
        toolbox: Toolbox | None,
        config: EngineConfig,
        prompts: PromptLibrary,
        knowledge: KnowledgeSearch | None = None,
    ) -> None:
        self._toolbox = toolbox
        self._config = config
        self._prompts = prompts
        self._knowledge = knowledge
        self._limits = ToolLimits(config.tools_max_calls, config.tool_parallel)
        self.support = ToolSupport()

    def turn(
        self,
        completer: Completer,
        consultation: Consultation,
        passages: tuple[Passage, ...] | None,
        on_tool: OnToolStart | None,
    ) -> TurnTools:
        """The tools of a turn of `consultation` given `passages` (None: no knowledge base,
        an empty one, or its search failed), its model calls made through `completer`."""
        if self._limits.max_calls <= 0:
            return TurnTools(completer)
        toolboxes: list[Toolbox] = [self._toolbox] if self._toolbox is not None else []
        knowledge = None
        if self._knowledge is not None and passages is not None and self._config.knowledge_tool:
            knowledge = KnowledgeTool(
                self._knowledge,
                role=consultation.role or self._config.default_role,
                config=self._config,
                prompts=self._prompts,
                labelled=passages,
            )
            toolboxes.append(knowledge)
        if not toolboxes:
            return TurnTools(completer)
        joined = JoinedToolbox(toolboxes)
        specs = joined.specs()
        if not specs:
            return TurnTools(completer)
        loop = ToolLoop(
            completer,
            joined,
            limits=self._limits,
            support=self.support,
            answer_now=self._prompts.tools_answer_now,
            on_tool=on_tool,
        )
        return TurnTools(
            loop,
            specs=specs,
            round_specs=[spec for spec in specs if spec.server != KNOWLEDGE_SERVER],
            in_rounds=self._config.tools_in_rounds,
            support=self.support,
            knowledge=knowledge,
        )
