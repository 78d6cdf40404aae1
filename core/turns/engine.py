"""The engine's parts, made once: `build_engine` composes the collaborators from the store,
the model, the prompts and the settings, and hands the edges an `Engine` naming each.

Invariants it keeps:
- one of each collaborator per engine, sharing one chat lock, one `RunningTurns` and one
  quota keeper: a reset (`lifecycle`) stops the turn `turns` runs, and a change of
  settings waits for it;
- with a knowledge base (`knowledge`), one `KnowledgeReader` serves the turns' answers
  and the follow-ups; without one nothing is searched;
- with tools (`toolbox`, and the knowledge base's search when it has documents), one
  `Tooling` offers them to the turns' answers, rounds and follow-ups, learning once per
  process which endpoints lack them; client memory's calls are never offered tools;
- every model call reserves its tokens in its turn's hold (`core.turns.quota_holds`) and
  a turn's call can be stopped (`core.turns.running`); client memory's calls are held but
  not stopped by a reset, as the memory belongs to a person, not to the chat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from core.domain.knowledge import KnowledgeSearch
from core.domain.llm_format import QuestionMode, StructuredFormats
from core.domain.ports import ChatLocks, Completer, ConsultationStore
from core.domain.quotas import Limit, QuotaConfig
from core.domain.tools import Toolbox
from core.domain.usage import Accounting
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.turns.answering import Answerer
from core.turns.blocks import Blocks
from core.turns.chat_settings import ChatSettingsKeeper
from core.turns.chosen_languages import ChosenLanguages
from core.turns.client_chats import ClientChats
from core.turns.figures import Figures
from core.turns.follow_ups import FollowUps
from core.turns.history import History
from core.turns.knowledge_reading import KnowledgeReader
from core.turns.lifecycle import Lifecycle
from core.turns.memories import Memories
from core.turns.quota_checks import Quotas
from core.turns.quota_holds import HoldingCompleter
from core.turns.running import RunningTurns, StoppableCompleter, TurnGate
from core.turns.service import ConsultationService
from core.turns.sessions import ApiSessions
from core.turns.tooling import Tooling
from core.turns.user_turns import UserTurns


@dataclass(frozen=True, slots=True)
class Engine:
    """What the bot, the HTTP API and the consoles ask of the engine, one collaborator each."""

    turns: ConsultationService  # a chat's turns: messages, final answers, follow-ups
    sessions: ApiSessions  # the HTTP API's sessions
    client_chats: ClientChats  # conversations a stateless chat app sends whole each time
    lifecycle: Lifecycle  # ending, deleting and moving a chat's consultations
    history: History  # a chat's past consultations
    settings: ChatSettingsKeeper  # a chat's settings
    figures: Figures  # usage and stats
    quotas: Quotas  # quota standings and admins' overrides
    blocks: Blocks  # blocked people
    languages: ChosenLanguages  # chosen interface languages
    memories: Memories  # client memory
    config: EngineConfig


def build_engine(
    store: ConsultationStore,
    completer: Completer,
    prompts: PromptLibrary,
    config: EngineConfig,
    *,
    locks: ChatLocks,
    clock: Callable[[], float] = time.time,
    accounting: Accounting | None = None,
    quotas: QuotaConfig | None = None,
    on_quota: Callable[[Limit], None] | None = None,
    knowledge: KnowledgeSearch | None = None,
    toolbox: Toolbox | None = None,
    scope: int = 0,
) -> Engine:
    """`locks` orders the calls for one chat key (`core.primitives.keyed_lock.KeyedLock`
    within one process); a key's lock is held for each whole turn. `accounting` prices
    each reply's usage (None: no prices, charged at 0). `quotas` are the limits checked
    before each turn's model call (None: none, but admins' overrides still apply);
    `on_quota` hears the limit of each turn refused. `knowledge` is the knowledge base
    every model call of a consultation reads (None: the deployment has none). `toolbox`:
    the tools the deployment offers its consultations (the MCP servers'; None: none).
    `scope` is the bot whose API sessions it keeps (`core.domain.api_keys`; 0: the
    deployment's own)."""
    accounting = accounting or Accounting()
    quota_keeper = Quotas(store, quotas or QuotaConfig(), clock, on_quota)
    languages = ChosenLanguages(store)
    running = RunningTurns()
    gate = TurnGate(locks, running)
    user_turns = UserTurns(store, config)
    held = HoldingCompleter(completer)
    stoppable = StoppableCompleter(held)
    # What the endpoint showed of structured replies, for rounds and memory alike.
    formats = StructuredFormats(QuestionMode(config.structured_questions))
    reader = KnowledgeReader(knowledge, config) if knowledge is not None else None
    tooling = Tooling(toolbox, config, prompts, knowledge)
    answerer = Answerer(
        store,
        stoppable,
        prompts,
        config,
        clock,
        accounting,
        formats,
        knowledge=reader,
        tooling=tooling,
        plan_models=quota_keeper.plan_models,
    )
    follow_ups = FollowUps(
        store,
        stoppable,
        prompts,
        config,
        clock,
        user_turns,
        accounting,
        knowledge=reader,
        tooling=tooling,
        config_for=answerer.config_for,
    )
    sessions = ApiSessions(
        store,
        config,
        clock,
        locks=locks,
        turn=gate.hold,
        user_turns=user_turns,
        answerer=answerer,
        quotas=quota_keeper,
        scope=scope,
    )
    return Engine(
        turns=ConsultationService(
            store,
            prompts,
            config,
            clock=clock,
            gate=gate,
            user_turns=user_turns,
            answerer=answerer,
            follow_ups=follow_ups,
            quotas=quota_keeper,
        ),
        sessions=sessions,
        client_chats=ClientChats(
            store,
            prompts,
            config,
            clock=clock,
            gate=gate,
            user_turns=user_turns,
            answerer=answerer,
            follow_ups=follow_ups,
            quotas=quota_keeper,
        ),
        lifecycle=Lifecycle(
            store, config, clock, locks=locks, stop=running.stop, sessions=sessions
        ),
        history=History(store, prompts),
        settings=ChatSettingsKeeper(
            store, prompts, config, clock, locks=locks, user_turns=user_turns
        ),
        figures=Figures(store, accounting, clock),
        quotas=quota_keeper,
        blocks=Blocks(store),
        languages=languages,
        memories=Memories(
            store, held, prompts, config, clock, accounting, quota_keeper, languages, formats
        ),
        config=config,
    )
