"""One bot's Telegram edge on a runtime, as the bot process runs it for the deployment's bot
(`app.serve_bot`) and for each stored bot (`app.bot_fleet`): the state its workers share,
the worker feeding it from the shared inbox, its polling leadership and the operators'
knowledge."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from telegram import Update
from telegram.ext import Application

from app.runtime import Runtime
from app.settings import Settings
from bot.app import INTERRUPTING_COMMANDS, UNORDERED_COMMANDS
from bot.commands.given_up import give_up
from bot.commands.knowledge import OperatorKnowledge
from bot.transport.config import BotConfig
from bot.transport.menus import set_command_menus
from bot.transport.undelivered import StoredUndelivered
from bot.updates.cluster_state import IN_MEMORY, SharedState

if TYPE_CHECKING:  # PostgreSQL's modules, asyncpg and the shared inbox's worker and polling
    # leader load only with DATABASE_URL
    from bot.updates.inbox import InboxWorker
    from core.turns.engine import Engine
    from storage.postgres.cluster.inbox import PostgresInbox
    from storage.postgres.cluster.locks import PostgresLeadership
    from telemetry.supervision import LoopRegistry


def operator_knowledge(runtime: Runtime) -> OperatorKnowledge:
    """What the operators' /knowledge manages: the knowledge base in the store, loaded
    through the runtime's one pool of document readers, within KNOWLEDGE_MAX_DOCUMENT_BYTES."""
    limit = runtime.settings.knowledge_max_document_bytes
    return OperatorKnowledge(runtime.knowledge.knowledge, runtime.knowledge_loader(), limit)


async def set_menus(application: Application, config: BotConfig, *, payments: bool = False) -> None:
    """The bot's command menus, for the deployment's bot and each stored bot alike: in its
    own language when it has one (`config.language`), else one per client language;
    `payments` when it sells plans. PTB runs `post_init` only under run_polling and
    run_webhook, so the bot process sets them itself, before the bot starts."""
    await set_command_menus(application.bot, payments=payments, language=config.language)


def shared_state(runtime: Runtime, config: BotConfig) -> SharedState:
    """What the workers share: in PostgreSQL with DATABASE_URL, else this process's memory;
    which message carries each conversation's round keyboard, in the store either way."""
    pool = runtime.shared_pool
    if pool is None:
        return dataclasses.replace(IN_MEMORY, round_keyboards=runtime.store)
    from storage.postgres.cluster.flood_waits import PostgresFloodWaits
    from storage.postgres.cluster.rate_limits import PostgresRateLimits
    from storage.postgres.cluster.undelivered import PostgresUndelivered

    scope = config.scope  # each bot's limits, replies and waits are its own
    return SharedState(
        rate_limits=PostgresRateLimits(pool, config.user_rate_limit_per_minute, bot=scope),
        press_limits=PostgresRateLimits(
            pool, config.button_presses_per_minute, table="bot_press_limits", bot=scope
        ),
        undelivered=StoredUndelivered(PostgresUndelivered(pool, bot=scope)),
        flood_waits=PostgresFloodWaits(pool, bot=scope),
        round_keyboards=runtime.store,
    )


def inbox_worker(
    runtime: Runtime,
    application: Application,
    scope: int = 0,
    *,
    inbox: PostgresInbox | None = None,
    engine: Engine | None = None,
    loops: LoopRegistry | None = None,
) -> InboxWorker | None:
    """The worker feeding PTB from the shared inbox (None without DATABASE_URL) for the
    bot of `scope`: from `inbox` (a stored bot's view, `PostgresInbox.for_bot`, which its
    runner closes), giving up with `engine` (the bot's) and reporting to `loops` (its part
    of the runtime's) when given."""
    if runtime.inbox is None or runtime.inbox_claims is None:
        return None
    from bot.updates.inbox import InboxWorker

    async def process(payload: str, parsed: Update | None) -> None:
        update = parsed or Update.de_json(json.loads(payload), application.bot)
        await application.process_update(update)

    async def given_up(payload: str, parsed: Update | None, reason: str) -> None:
        runtime.metrics.record_given_up(reason, bot=scope)
        update = parsed or Update.de_json(json.loads(payload), application.bot)
        await give_up(application.bot, engine or runtime.engine, update, scope)

    settings = runtime.settings
    return InboxWorker(
        inbox or (runtime.inbox if scope == 0 else runtime.inbox.for_bot(scope)),
        runtime.inbox_claims,
        process,
        unordered_commands=UNORDERED_COMMANDS,
        interrupting_commands=INTERRUPTING_COMMANDS,
        on_claim=runtime.metrics.inbox_claim_seconds.observe,
        bot=application.bot,
        max_attempts=settings.inbox_max_attempts,
        deadline=settings.handling_deadline(),
        on_dead=given_up,
        loops=loops if loops is not None else runtime.loops,
        scope=scope,
    )


def polling_leadership(settings: Settings, token: str) -> PostgresLeadership:
    """One poller per bot among the workers: the lock is named after the bot's id."""
    from storage.postgres.cluster.locks import PostgresLeadership

    url = settings.secret("database_url")
    assert url is not None
    return PostgresLeadership(url, "telegram-polling:" + token.split(":", 1)[0])
