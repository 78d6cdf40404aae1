"""The operator's web console on the HTTP server: what to mount, from the settings.

Mounted at `/admin` only when ADMIN_TOKEN is set (`Settings.admin_config`); otherwise
nothing is, and every `/admin` path is the server's 404. On PostgreSQL (the runtime holds
the shared-state pool) the dashboard also shows the workers seen and the shared inbox
(`app.admin_figures`), and the sign-in attempts per address are counted in a table
every worker shares; on SQLite, one process, it has no such section and counts them in
memory.

Its Knowledge page stores uploads through `app.console_uploads.ConsoleUploads`: the CLI's
loader (`media.knowledge_files.KnowledgeLoader`) on the runtime's own document readers
(the intake's pool: no second pool of reader processes) and the store's knowledge base;
its Bots page keeps the bots through the CLI's service (`app.bots.BotKeeper`); its Payments
page refunds and cancels subscriptions through the Bot API with the token of the bot each
payment was made in (`app.star_refunds`: TELEGRAM_BOT_TOKEN, or a stored bot's under
SECRET_KEY; neither: no refunds).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from admin.config import PREFIX
from app.console_engines import ConsoleEngines
from app.settings import Settings
from core.domain.ports import BotRegistry
from core.domain.tools import ToolServerStatus

if TYPE_CHECKING:
    from aiohttp import web

    from app.runtime import Runtime


def console_mounts(
    settings: Settings,
    runtime: Runtime,
    *,
    clock: Callable[[], float] = time.time,
    tool_statuses: Callable[[], Sequence[ToolServerStatus]] | None = None,
) -> list[tuple[str, web.Application]]:
    """`[("/admin", the console)]` when ADMIN_TOKEN is set, else nothing; `clock` is the
    wall time its sessions expire by; `tool_statuses` where each tool server stands, for
    the dashboard (the runtime's servers unless given)."""
    config = settings.admin_config()
    if config is None:
        return []
    # Jinja2, markdown-it and the text splitter load only when the console is on.
    from admin.app import build_admin_app
    from admin.payments import PaymentPages
    from app.bots import keeper_for
    from app.console_uploads import ConsoleUploads

    figures = throttle = None
    if runtime.shared_pool is not None:
        from app.admin_figures import PostgresFigures
        from storage.postgres.cluster.sign_ins import PostgresSignIns

        figures = PostgresFigures(runtime.shared_pool, clock)
        throttle = PostgresSignIns(
            runtime.shared_pool,
            config.failed_sign_ins,
            config.failure_window_seconds,
            clock=clock,
        )
    uploads = ConsoleUploads(
        runtime.knowledge_loader(),  # the runtime's one pool of readers, its embedder
        max_bytes=settings.knowledge_max_document_bytes,
    )
    token = settings.secret("telegram_bot_token")
    secret_key = settings.secret("secret_key")
    refunds = None
    if token or secret_key:
        from app.star_refunds import TelegramStarRefunds, bot_tokens

        tokens = bot_tokens(token, runtime.store.bots, secret_key)
        refunds = TelegramStarRefunds(tokens, settings.telegram_api_base_url)
    engines = ConsoleEngines(runtime)  # a stored bot's people's limits and plans
    payments = PaymentPages(
        runtime.store.payments,
        runtime.engine,
        clock,
        plans=plan_choices(settings, runtime.store.bots),
        refunds=refunds,
        on_refund=lambda scope: runtime.metrics.record_refund(bot=scope),
    )
    console, _ = build_admin_app(
        config,
        runtime.store,
        runtime.engine,
        loader=uploads,
        bots=keeper_for(settings, runtime.store.bots, runtime.store.forget_bot),
        clock=clock,
        figures=figures,
        throttle=throttle,
        knowledge=runtime.knowledge.knowledge,
        tool_statuses=runtime.tool_statuses if tool_statuses is None else tool_statuses,
        payments=payments,
        sales=runtime.sales,
        stars=runtime.stars,
        engines=engines,
    )
    return [(PREFIX, console)]


def plan_choices(
    settings: Settings, registry: BotRegistry
) -> Callable[[], Awaitable[Sequence[tuple[str, str]]]]:
    """The Payments page's plan filter: every plan id a bot sells (PLANS, and each stored
    bot's own `plans`), by id; one two bots sell is labelled by them (`pro (this
    deployment's bot, @shop_bot)`). The bots are read at each page."""

    async def choices() -> Sequence[tuple[str, str]]:
        sellers: dict[str, list[str]] = {}
        for plan in settings.plan_list():
            sellers.setdefault(plan.id, []).append("this deployment's bot")
        for bot in await registry.bots():
            for plan in bot.profile.plans or ():
                sellers.setdefault(plan.id, []).append(bot.handle)
        return [
            (plan_id, plan_id if len(bots) < 2 else f"{plan_id} ({', '.join(bots)})")
            for plan_id, bots in sorted(sellers.items())
        ]

    return choices
