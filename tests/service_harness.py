"""The engine as tests build it (`core.turns.engine.build_engine`): the real collaborators,
a store and a completer they pass, a clock they can move.

The `store`, `completer`, `service` and `engine` fixtures (tests/conftest.py) build it on a
real SQLite file and the real openai SDK talking HTTP to the fake model server; a test that
needs another shape (another store, several services, a scripted model) calls
`make_service` itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from core.domain.knowledge import KnowledgeSearch
from core.domain.ports import Completer, ConsultationStore
from core.domain.quotas import Limit, QuotaConfig
from core.domain.tools import Toolbox
from core.domain.usage import Accounting
from core.primitives.keyed_lock import KeyedLock
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.turns.engine import Engine, build_engine

MODEL = "test-model"


class Clock:
    """A clock that stands still until a test moves `now`."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_service(
    store: ConsultationStore,
    completer: Completer,
    clock: Callable[[], float] = time.time,
    *,
    accounting: Accounting | None = None,
    quotas: QuotaConfig | None = None,
    on_quota: Callable[[Limit], None] | None = None,
    knowledge: KnowledgeSearch | None = None,
    toolbox: Toolbox | None = None,
    **config: object,
) -> Engine:
    """An engine with its own `KeyedLock`; `config` overrides `EngineConfig` fields;
    `knowledge` is its knowledge base (`tests.knowledge_search.ListedKnowledge`), `toolbox`
    the tools its consultations are offered (`tests.toolboxes.Tools`).

    Rounds are asked in text unless a test asks for `structured_questions` ("auto",
    "on"): most tests script text replies; structured rounds have tests of their own.
    """
    fields = {"model": MODEL, "structured_questions": "off", **config}
    engine = EngineConfig(**fields)  # type: ignore[arg-type]
    return build_engine(
        store,
        completer,
        PromptLibrary(),
        engine,
        locks=KeyedLock(),
        clock=clock,
        accounting=accounting,
        quotas=quotas,
        on_quota=on_quota,
        knowledge=knowledge,
        toolbox=toolbox,
    )


MakeEngine = Callable[..., Engine]
"""Builds an engine on the test's store and completer with `EngineConfig` overrides."""
