"""The composition root: what a running process needs, opened and closed in one place.

Settings → store (from `app.stores`), model clients by name (`app.model_clients`), prompts,
metrics, the engine (`core.turns.engine.build_engine`) and its periodic jobs, and the
intake that reads attachments (`media.intake`; voice only with TRANSCRIPTION_MODEL). The
Telegram bot, the HTTP API, the terminal and the quality evaluator all open a `Runtime`, so
all of them run the same engine on the same database. Once a process is up (its listener
bound, so a start-up failure stays one line), `check_model_endpoint` asks the model
endpoint once — a few seconds at most, never fatal — and logs one WARNING per setting that
looks wrong. Periodic cleanup and the event-loop lag watcher run as supervised loops
(`telemetry.supervision`: they outlive their failures, and `Runtime.loops`, which
`/healthz` reads, says whether each is still doing its job) for as long as the runtime is
open.

PDF and DOCX documents are parsed in the intake's reader processes
(`media.reader_pool`), which closing the runtime kills at once.

With MCP_SERVERS (and TOOLS_ENABLED, the default) the runtime starts the tool servers'
toolbox (`tools.toolbox.McpToolbox`) before the engine and waits for each server's first
start, ready or failed (at most 30 s; a server that cannot start is logged once and tried
again in the background), and closing the runtime stops them, stdio children included.
`Runtime.toolbox()` is what consultations may call, `Runtime.tool_statuses()` where each
server stands. Without tool servers the `mcp` SDK is never imported.

With DATABASE_URL (several worker processes on one PostgreSQL database) an API session
is held across workers by an advisory lock every worker respects (`PostgresChatLocks`,
`Runtime.chat_locks`) and a Telegram chat by its inbox claim, so the engine itself only
orders the calls of this process (`KeyedLock`: no database round trip per turn); the state
the edges must share (rate limits, undelivered replies, flood waits) lives in a small
pool of its own (`shared_pool`), the cleanup runs on one worker at a time, and a bot
process also opens the shared inbox (`PostgresInbox`) with its own claim connection and
records itself in the worker registry every 15 s (`app.heartbeat`, a supervised loop;
its row is deleted when the runtime closes); without it, one process: in-process locks,
memory and no inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from app.bot_engines import engine_defaults
from app.bots import check_stored_bots
from app.knowledge_base import OpenedKnowledge, open_knowledge
from app.model_clients import ModelClients
from app.settings import Settings
from app.startup import StartupError
from app.stores import open_store
from core.domain.bots import BotProfile, StoredBot
from core.domain.knowledge import KnowledgeSearch
from core.domain.plans import Plan
from core.domain.ports import BotRegistry, ChatLocks, Completer
from core.domain.quotas import QuotaConfig
from core.domain.telegram_keys import DEFAULT_SCOPE
from core.domain.tools import Toolbox, ToolServerStatus
from core.domain.usage import Accounting
from core.llm.llm import ModelEndpoint, OpenAICompleter
from core.primitives.intake_gate import IntakeGate
from core.primitives.keyed_lock import KeyedLock
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.turns.engine import Engine, build_engine
from core.turns.knowledge_tool import NAME as KNOWLEDGE_TOOL
from core.turns.plan_sales import PlanSales
from core.turns.sales_figures import Sells, StarsFigures
from media.intake import Intake
from media.reader_pool import DocumentReaders
from telemetry.loopwatch import watch_event_loop
from telemetry.metrics import Metrics
from telemetry.supervision import LoopRegistry, Pace, supervise

if TYPE_CHECKING:  # PostgreSQL's modules and asyncpg load only with DATABASE_URL, the loader on
    # use, the MCP SDK (tools.toolbox) only with MCP_SERVERS
    import asyncpg

    from app.stores import Store
    from media.knowledge_files import KnowledgeLoader
    from storage.postgres.cluster.inbox import PostgresInbox
    from storage.postgres.cluster.locks import PostgresChatLocks
    from tools.toolbox import McpToolbox

log = logging.getLogger(__name__)

BOT_MODEL = "bot"
CLEANUP_LONGEST = 300.0  # one cleanup taking longer is stuck
CLEANUP_FIRST_RETRY = 5.0

T = TypeVar("T")


@dataclass
class Runtime:
    settings: Settings
    store: Store
    models: ModelClients
    prompts: PromptLibrary
    engine: Engine
    metrics: Metrics
    chat_locks: ChatLocks  # API sessions' locks: across processes with DATABASE_URL
    intake: Intake  # reads voice notes, documents and photos into a turn
    knowledge: OpenedKnowledge  # what operators load into (hybrid with EMBEDDING_MODEL)
    inbox: PostgresInbox | None = None  # the shared inbox (a bot process with DATABASE_URL)
    inbox_claims: PostgresChatLocks | None = None  # which worker works which inbox chat
    shared_pool: asyncpg.Pool | None = None  # state every worker shares (DATABASE_URL)
    loops: LoopRegistry = field(default_factory=LoopRegistry)  # what `/healthz` watches
    tools: McpToolbox | None = None  # the MCP servers' tools (MCP_SERVERS, TOOLS_ENABLED)
    sales: PlanSales | None = None  # the plans PLANS sells in Stars (None: nothing is sold)
    stars: StarsFigures | None = None  # every bot's Stars figures (/stats, the API, console)
    # Builds an engine as `engine` is built, with other defaults (`engine_for`).
    make_engine: Callable[[EngineConfig, QuotaConfig, int], Engine] | None = None
    # Sells plans in an engine as `sales` sells PLANS (`sales_for`).
    make_sales: Callable[[tuple[Plan, ...], Engine], PlanSales | None] | None = None
    # A few turns at a time between arrival and model call, for every bot of the process.
    turn_intake: IntakeGate = field(default_factory=IntakeGate)
    # Each stored bot's engine and plans for the HTTP API and the console, by bot id, with
    # the profile it was built from (`stored_bot_engine`).
    _stored_engines: dict[int, tuple[BotProfile, Engine, PlanSales | None]] = field(
        default_factory=dict, repr=False
    )

    def engine_for(self, config: EngineConfig, quotas: QuotaConfig, scope: int) -> Engine:
        """An engine on this runtime's store, model clients, prompts, knowledge, tools and
        metrics, with `config`'s and `quotas`' defaults in place of the deployment's (a
        stored bot's, `app.bot_fleet`, whose id is `scope`); its own chat locks, as its
        chat keys (its API sessions' among them) are its own; no one holds a plan in it
        until plans are sold there (`sales_for`)."""
        assert self.make_engine is not None, "open_runtime sets it"
        return self.make_engine(config, quotas, scope)

    def stored_bot_engine(self, bot: StoredBot) -> tuple[Engine, PlanSales | None]:
        """The engine a stored bot's API sessions and console pages run on, and the plans
        sold in it: built from its profile as `app.bot_fleet` builds its bot's
        (`app.bot_engines.engine_defaults`), once per profile, and again when it changed."""
        built = self._stored_engines.get(bot.id)
        if built is None or built[0] != bot.profile:
            config, quotas, plans = engine_defaults(self.settings, bot.profile)
            engine = self.engine_for(config, quotas, bot.id)
            built = (bot.profile, engine, self.sales_for(plans, engine))
            self._stored_engines[bot.id] = built
        return built[1], built[2]

    def sales_for(self, plans: tuple[Plan, ...], engine: Engine) -> PlanSales | None:
        """`plans` sold in `engine` (a stored bot's, `app.bot_fleet`): the books in this
        runtime's store, its buyers' plans as that engine's per-person limits and models
        (in place of PLANS'); None, and no one holds a plan there, when `plans` is empty."""
        assert self.make_sales is not None, "open_runtime sets it"
        return self.make_sales(plans, engine)

    def toolbox(self) -> Toolbox | None:
        """The tools consultations may call; None without tool servers."""
        return self.tools

    def tool_statuses(self) -> tuple[ToolServerStatus, ...]:
        """Where each configured tool server stands (for `/healthz` and the dashboard);
        empty without tool servers."""
        return self.tools.statuses() if self.tools is not None else ()

    def knowledge_loader(self) -> KnowledgeLoader:
        """Loads the operators' documents (the console's uploads, `/knowledge` in Telegram)
        into the knowledge base as `consultation-bot knowledge add` does: the runtime's one
        pool of readers, KNOWLEDGE_MAX_DOCUMENT_BYTES, and the embedder when there is one."""
        from media.knowledge_files import KnowledgeLoader

        return KnowledgeLoader(
            self.knowledge.knowledge,
            self.intake.readers,
            max_bytes=self.settings.knowledge_max_document_bytes,
            embedder=self.knowledge.embedder,
        )

    @property
    def completer(self) -> OpenAICompleter:
        """The bot model's SDK client."""
        return self.models.raw(BOT_MODEL)


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    extra_models: Iterable[ModelEndpoint] = (),
    background: bool = True,
    inbox: bool = False,
    clock: Callable[[], float] = time.time,
    knowledge: KnowledgeSearch | None = None,
    wrap_bot_model: Callable[[Completer], Completer] | None = None,
) -> AsyncIterator[Runtime]:
    """Open everything, yield the runtime, close everything in reverse order.

    `extra_models` adds named model clients beside the bot's; `background=False`
    leaves out the periodic jobs (a short-lived process such as the evaluator);
    `inbox=True` opens the shared inbox when DATABASE_URL is set (the bot process);
    `clock` is the engine's (Unix time; a test moves it across a UTC day);
    `knowledge` is the knowledge base every consultation reads (None: the one kept in
    the store, which an empty knowledge base leaves out of every call);
    `wrap_bot_model` wraps the bot model's client the engine calls (the evaluator records
    each request a consultation sends, with the passages it was given).
    """
    prompts = PromptLibrary(settings.prompts_dir)
    prompts.check()
    bot_model = settings.model_endpoint()
    tools_config = settings.tools_config()
    engine_config = settings.engine_config()
    transcription = settings.transcription_endpoint()
    url = settings.secret("database_url")
    async with contextlib.AsyncExitStack() as closing:
        store = await open_store(settings)
        closing.push_async_callback(store.close)
        await check_stored_bots(store.bots, settings.secret("secret_key"))
        stored_knowledge = open_knowledge(settings, store)  # hybrid with EMBEDDING_MODEL
        closing.push_async_callback(stored_knowledge.close)
        chat_locks: ChatLocks = KeyedLock()
        shared_inbox = claims = shared_pool = None
        if url:
            from storage.postgres.cluster.inbox import PostgresInbox
            from storage.postgres.cluster.locks import PostgresChatLocks
            from storage.postgres.cluster.pool import open_shared_pool

            # API sessions only: a worker whose API is never called keeps no connection for it.
            pg_locks = PostgresChatLocks.on_first_use(url)
            closing.push_async_callback(pg_locks.close)
            chat_locks = pg_locks
            shared_pool = await _database_part("shared state", open_shared_pool(url))
            closing.push_async_callback(shared_pool.close)
            if inbox:
                shared_inbox = await _database_part("inbox", PostgresInbox.open(url))
                closing.push_async_callback(shared_inbox.close)
                claims = await _database_part("inbox claims", PostgresChatLocks.open(url))
                closing.push_async_callback(claims.close)
        metrics = Metrics()
        if shared_inbox is not None:
            metrics.read_inbox_depth_from(shared_inbox.depth)
        models = ModelClients([bot_model, *extra_models], metrics)
        closing.push_async_callback(models.close)
        toolbox = None
        if tools_config.servers:  # the MCP SDK loads only with tool servers configured
            from tools.toolbox import McpToolbox

            toolbox = McpToolbox(tools_config)
            closing.push_async_callback(toolbox.close)  # stops the stdio servers' processes
            await toolbox.start()  # each server ready or failed (logged once); never fatal
        metrics.name_tools_from(tool_names(toolbox))
        # Within the process: across processes a chat is the inbox claim's, a session its lock's.
        accounting = Accounting(settings.prices(), observe=metrics.record_charge)
        bot_completer = models[BOT_MODEL]
        if wrap_bot_model is not None:
            bot_completer = wrap_bot_model(bot_completer)

        def make_engine(config: EngineConfig, quotas: QuotaConfig, scope: int = 0) -> Engine:
            built = build_engine(
                store,
                bot_completer,
                prompts,
                config,
                locks=KeyedLock(),
                accounting=accounting,
                quotas=quotas,
                on_quota=functools.partial(metrics.record_quota_refusal, bot=scope),
                clock=clock,
                knowledge=knowledge if knowledge is not None else stored_knowledge.knowledge,
                toolbox=toolbox,
                scope=scope,
            )
            return built

        engine = make_engine(engine_config, settings.quota_config())

        def make_sales(plans: tuple[Plan, ...], sold_in: Engine) -> PlanSales | None:
            return sell_plans(plans, store, sold_in, clock, metrics)

        sales = make_sales(settings.plan_list(), engine)
        stars = StarsFigures(store.payments, clock, sells=bots_selling(settings, store.bots))
        transcriber = None
        if transcription is not None:  # voice notes: only with TRANSCRIPTION_MODEL
            from media.transcription import OpenAITranscriber

            transcriber = OpenAITranscriber(transcription)
            closing.push_async_callback(transcriber.close)
        readers = DocumentReaders(settings.reader_config())
        closing.push_async_callback(readers.close)  # kills the reader processes at once
        intake = Intake(settings.intake_config(), transcriber, readers)
        loops = LoopRegistry()
        tasks = []
        worker = None
        if background:
            tasks = [
                asyncio.create_task(_cleanup_loop(engine, settings, loops, shared_pool)),
                asyncio.create_task(watch_event_loop(metrics.loop_lag.observe, loops=loops)),
            ]
            if shared_inbox is not None and shared_pool is not None:
                from app.heartbeat import heartbeat
                from storage.postgres.cluster.workers import this_process

                worker = this_process(time.time())
                tasks.append(asyncio.create_task(heartbeat(shared_pool, worker, loops)))
        try:
            yield Runtime(
                settings,
                store,
                models,
                prompts,
                engine,
                metrics,
                chat_locks,
                intake,
                stored_knowledge,
                inbox=shared_inbox,
                inbox_claims=claims,
                shared_pool=shared_pool,
                loops=loops,
                tools=toolbox,
                sales=sales,
                stars=stars,
                make_engine=make_engine,
                make_sales=make_sales,
                turn_intake=IntakeGate(settings.turn_intake_slots),
            )
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if worker is not None and shared_pool is not None:
                from app.heartbeat import leave

                await leave(shared_pool, worker)


def sell_plans(
    plans: tuple[Plan, ...],
    store: Store,
    engine: Engine,
    clock: Callable[[], float],
    metrics: Metrics,
) -> PlanSales | None:
    """`plans` sold in Stars in `engine` (PLANS in the deployment's, in every process: the
    console shows and the bot applies them; a stored bot's own in its engine), their books
    in the store, and each buyer's plan as the engine's per-person limits and models; None
    when nothing is sold (then no one holds a plan in that engine)."""
    if not plans:
        engine.quotas.use_plans(None)
        return None
    sales = PlanSales(
        store.payments,
        plans,
        clock,
        blocked=engine.blocks.blocked,
        refresh=engine.quotas.refresh,
        events=metrics,
    )
    engine.quotas.use_plans(sales.plan_of)
    return sales


def bots_selling(settings: Settings, registry: BotRegistry) -> Sells:
    """Whether bot `scope` sells plans: the deployment's (0) PLANS; a stored bot enabled
    its own `plans`, else PLANS; None: whether any of them does."""
    deployment = settings.plan_list()

    async def sells(scope: int | None) -> bool:
        if scope == DEFAULT_SCOPE or (scope is None and deployment):
            return bool(deployment)
        return any(
            bot.enabled
            and (scope is None or bot.id == scope)
            and bool(deployment if bot.profile.plans is None else bot.profile.plans)
            for bot in await registry.bots()
        )

    return sells


def tool_names(toolbox: Toolbox | None) -> Callable[[], frozenset[str]]:
    """The names `/metrics` counts tool calls under: every tool the servers have offered
    since the start (a server restarting offers none for a while, and its calls still
    count under their names) and the knowledge base's search; the servers' listings are
    bounded, so the names are."""
    known = {KNOWLEDGE_TOOL}

    def names() -> frozenset[str]:
        if toolbox is not None:
            known.update(spec.name for spec in toolbox.specs())
        return frozenset(known)

    return names


async def _database_part(name: str, opening: Awaitable[T]) -> T:
    """Open one more connection to the database the store already reached."""
    try:
        return await opening
    except Exception as exc:  # the store's connection worked a moment ago: say what failed
        raise StartupError(f"DATABASE_URL: cannot open the {name}: {exc}") from None


async def check_model_endpoint(runtime: Runtime, name: str = BOT_MODEL) -> None:
    """Log what `GET /models` says is wrong with a model's settings; never stop start-up."""
    try:
        endpoint = runtime.models.endpoint(name)
        warnings = await runtime.models.raw(name).check_endpoint(endpoint.model)
    except Exception:  # a check that cannot run proves nothing
        log.debug("model endpoint check failed", exc_info=True)
        return
    for warning in warnings:
        log.warning("model endpoint: %s", warning)


async def _cleanup_loop(
    engine: Engine,
    settings: Settings,
    loops: LoopRegistry,
    shared: asyncpg.Pool | None = None,
) -> None:
    """Expire idle consultations and purge old ones, now and then; with several workers
    (`shared`), one worker at a time, which also forgets the shared state gone stale. A
    cleanup that fails is logged and tried again sooner, backing off up to the interval."""

    async def once() -> None:
        if shared is None:
            await _cleanup_once(engine, settings)
            return
        from storage.postgres.cluster.flood_waits import PostgresFloodWaits
        from storage.postgres.cluster.locks import try_exclusive
        from storage.postgres.cluster.rate_limits import (
            LEGACY_RATE_TABLES,
            RATE_TABLES,
            forget_idle,
        )
        from storage.postgres.cluster.undelivered import PostgresUndelivered

        async with try_exclusive(shared, "cleanup") as mine:
            if mine:
                await _cleanup_once(engine, settings)
                for table in RATE_TABLES + LEGACY_RATE_TABLES:
                    await forget_idle(shared, table, time.time())
                await PostgresUndelivered(shared).forget_old()
                await PostgresFloodWaits(shared).forget_past()

    interval = float(settings.cleanup_interval_seconds)
    pace = Pace(
        interval,
        CLEANUP_LONGEST,
        first_retry=min(CLEANUP_FIRST_RETRY, interval),
        max_retry=interval,
    )
    await supervise("cleanup", once, pace, loops)


async def _cleanup_once(engine: Engine, settings: Settings) -> None:
    # now=None: the engine's own clock, the one every other expiry of the engine reads.
    expired, purged = await engine.lifecycle.cleanup(
        retention_seconds=settings.retention_days * 86400, now=None
    )
    if expired or purged:
        log.info("cleanup: %d expired, %d purged", expired, purged)
