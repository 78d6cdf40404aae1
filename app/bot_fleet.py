"""The stored bots, served by the bot process beside TELEGRAM_BOT_TOKEN's (`app.serve_bot`).

Each enabled bot of the bots table runs as its own PTB Application (`BotConfig.scope` = its
id) with its own engine (`Runtime.engine_for`: the runtime's store, model clients, prompts,
knowledge, tools and metrics, the bot's defaults in place of the deployment's), so its flood
control, per-chat order, rate limits and HTTP pool are its own.

Invariants:
- a bot's `BotProfile` replaces the deployment's role (or gives an instruction of its own),
  rounds (at most MAX_ROUNDS_LIMIT), model and models, limits and plans; what it does not
  set falls back (`app.bot_engines.bot_settings`, `BotPlan.plans`);
- a bot sells its plans (its own, else PLANS) with its own token: /plans, invoices,
  pre-checkout answers, receipts and /refund are its Application's, its buyers are its
  people (`tg<n>:`), and their plans' limits and models apply in its engine only
  (`Runtime.sales_for`);
- the bots table is read every `WATCH_SECONDS` (`Fleet.run`): a bot added or enabled starts,
  one disabled or removed stops (its Application shut down), one whose token or settings
  changed restarts; a bot that cannot start (a revoked token, Telegram unreachable) is logged
  and tried again at the next reading, never stopping the others; a reading starts up to
  `STARTS_AT_ONCE` bots at the same time (a start is mostly waiting on Telegram: getMe and
  the menus), so many bots are running in a fraction of the time one after the other took;
- with DATABASE_URL every worker runs every bot: the bot's own view of the shared inbox and
  one poller per bot among the workers (`app.bot_edge.polling_leadership`, named after the
  bot's Telegram id); without it, PTB's own Updater polls;
- with WEBHOOK_URL no stored bot polls: bot n takes its updates at `/telegram/n` on the
  HTTP server (`Fleet.webhooks`, at WEBHOOK_URL's origin) with a secret token of its own
  (`bot_webhook_secret`, derived from WEBHOOK_SECRET, so every worker derives the same);
  each worker sets it with setWebhook when it starts the bot (harmless, as for the first
  bot) and deletes it when the bot is disabled or removed. A path naming no running bot is
  404; another bot's secret, or none, is refused as for the first bot (`api.webhook`);
- without stored bots nothing starts and `cryptography` is never loaded (`app.bot_secrets`
  is imported only to open a token).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from telegram import Update
from telegram.ext import Application

from app.bot_edge import (
    inbox_worker,
    operator_knowledge,
    polling_leadership,
    set_menus,
    shared_state,
)
from app.bot_engines import bot_settings, engine_defaults
from app.runtime import Runtime
from app.settings import Settings
from bot.app import build_application
from bot.commands.plans import sells_plans
from bot.transport.config import BotConfig
from core.domain.bots import BotProfile, StoredBot
from core.domain.plans import Plan
from core.domain.quotas import QuotaConfig
from core.prompting.requests import EngineConfig
from telemetry.supervision import Pace, supervise

if TYPE_CHECKING:  # aiohttp's server and the webhook only with WEBHOOK_URL
    from aiohttp import web

    from api.webhook import TelegramWebhook
    from bot.updates.inbox import InboxWorker
    from storage.postgres.cluster.inbox import PostgresInbox
    from storage.postgres.cluster.locks import PostgresLeadership

log = logging.getLogger(__name__)

WATCH_SECONDS = 5.0
"""How often the bots table is read: a change takes effect within this (and a start)."""
WATCH_LONGEST = 120.0  # one reading with its starts and stops taking longer is stuck
POLL_TIMEOUT = 30
STARTS_AT_ONCE = 8
"""Bots one reading starts at the same time: each start is about 27 Bot API calls."""
WEBHOOK_PREFIX = "/telegram"
"""Bot n's webhook is `/telegram/n`."""


def bot_webhook_secret(webhook_secret: str, scope: int) -> str:
    """Bot `scope`'s secret token: HMAC-SHA256 of its scope under WEBHOOK_SECRET, in hex (64
    characters, as Telegram allows); every worker derives the same, no bot knows another's."""
    return hmac.new(webhook_secret.encode(), f"bot {scope}".encode(), hashlib.sha256).hexdigest()


def bot_webhook_url(webhook_url: str, scope: int) -> str:
    """Where Telegram posts bot `scope`'s updates: WEBHOOK_URL's origin, `/telegram/<scope>`."""
    parts = urlsplit(webhook_url)
    return f"{parts.scheme}://{parts.netloc}{WEBHOOK_PREFIX}/{scope}"


@dataclass(frozen=True, slots=True)
class BotPlan:
    """What one stored bot runs with: its Telegram edge, its engine's and quotas' defaults."""

    scope: int
    handle: str
    config: BotConfig
    engine: EngineConfig
    quotas: QuotaConfig
    webhook_url: str | None = None  # with WEBHOOK_URL: its own (`bot_webhook_url`)
    webhook_secret: str | None = None
    plans: tuple[Plan, ...] = ()  # what it sells: its own, else the deployment's PLANS


def plan_for(settings: Settings, bot: StoredBot, token: str) -> BotPlan:
    """The plan of `bot` (its token opened) on this deployment."""
    own = bot_settings(settings, bot.profile)
    engine, quotas, plans = engine_defaults(settings, bot.profile)
    config = BotConfig(
        token=token,
        api_base_url=own.telegram_api_base_url,
        max_rate=own.telegram_max_rate,
        allowed_user_ids=own.allowed_user_ids,
        allowed_chat_ids=own.allowed_chat_ids,
        admin_user_ids=own.admin_user_ids,
        user_rate_limit_per_minute=own.user_rate_limit_per_minute,
        button_presses_per_minute=own.button_presses_per_minute,
        group_config_admins_only=own.group_config_admins_only,
        max_input_chars=own.max_input_chars,
        session_ttl_seconds=own.session_ttl_seconds,
        file_api_url=own.telegram_file_base_url,
        handling_deadline=own.handling_deadline(),
        scope=bot.id,
        language=bot.profile.language,
        webhook=bool(own.webhook_url),
        payment_support_text=own.payment_support_text.strip(),
        payment_terms_text=own.payment_terms_text.strip(),
    )
    if not own.webhook_url:
        return BotPlan(bot.id, bot.handle, config, engine, quotas, plans=plans)
    secret = own.secret("webhook_secret")
    if not secret:  # the start stops without it (`Settings.api_config`): never here
        raise LookupError("WEBHOOK_SECRET is not set: no webhook secret to derive the bot's")
    return BotPlan(
        bot.id,
        bot.handle,
        config,
        engine,
        quotas,
        bot_webhook_url(own.webhook_url, bot.id),
        bot_webhook_secret(secret, bot.id),
        plans,
    )


class FleetBot:
    """One stored bot running: its Application polling (or fed by the shared inbox)."""

    def __init__(self, runtime: Runtime, plan: BotPlan, *, poll_timeout: int) -> None:
        self.plan = plan
        self._runtime = runtime
        self._poll_timeout = poll_timeout
        config = plan.config
        if runtime.inbox is not None:
            config = dataclasses.replace(config, external_updates=True)
        self.engine = runtime.engine_for(plan.engine, plan.quotas, plan.scope)
        self.sales = runtime.sales_for(plan.plans, self.engine)
        self.application: Application = build_application(
            config,
            self.engine,
            on_reply=lambda reply: runtime.metrics.record_reply(
                reply, source="telegram", bot=plan.scope
            ),
            shared=shared_state(runtime, config),
            intake=runtime.intake,
            turn_intake=runtime.turn_intake,
            on_given_up=lambda reason: runtime.metrics.record_given_up(reason, bot=plan.scope),
            knowledge=operator_knowledge(runtime),
            sales=self.sales,
            stars=runtime.stars,
        )
        self._inbox: PostgresInbox | None = None
        self._worker: InboxWorker | None = None
        self._leadership: PostgresLeadership | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.webhook: TelegramWebhook | None = None  # with WEBHOOK_URL, once started
        # Its inbox and polling loops, beside the deployment's bot's in `/healthz`.
        self._loops = runtime.loops.part(f":bot{plan.scope}")

    async def start(self) -> None:
        """getMe, menus, then polling; on failure everything opened is closed again."""
        application = self.application
        try:
            await application.initialize()
        except BaseException:
            await application.bot.shutdown()  # the HTTP sessions initialize opened
            raise
        try:
            await set_menus(application, self.plan.config, payments=sells_plans(self.sales))
            await application.start()
            runtime = self._runtime
            if runtime.inbox is not None:
                self._inbox = runtime.inbox.for_bot(self.plan.scope)
                self._worker = inbox_worker(
                    runtime,
                    application,
                    self.plan.scope,
                    inbox=self._inbox,
                    engine=self.engine,
                    loops=self._loops,
                )
                assert self._worker is not None
                self._tasks.append(asyncio.create_task(self._worker.run()))
            if self.plan.webhook_url is not None:
                await self._take_webhooks(self.plan.webhook_url)
            elif self._worker is not None:
                from bot.updates.polling import PollingLeader

                self._leadership = polling_leadership(runtime.settings, self.plan.config.token)
                leader = PollingLeader(
                    application.bot,
                    self._worker.accept,
                    self._leadership,
                    poll_timeout=self._poll_timeout,
                    loops=self._loops,
                )
                self._tasks.append(asyncio.create_task(leader.run()))
            else:
                assert application.updater is not None
                await application.updater.start_polling(
                    allowed_updates=Update.ALL_TYPES, timeout=self._poll_timeout, poll_interval=0
                )
        except BaseException:
            await self.stop()
            raise
        log.info("bot #%d @%s is running", self.plan.scope, application.bot.username)

    async def _take_webhooks(self, url: str) -> None:
        from api.webhook import TelegramWebhook

        assert self.plan.webhook_secret is not None
        sink = self._worker.accept if self._worker is not None else None
        self.webhook = TelegramWebhook(
            self.application,
            self.plan.webhook_secret,
            seen=self._runtime.store,
            sink=sink,
            scope=self.plan.scope,
        )
        per_address = self._runtime.settings.http_max_connections_per_address
        await self.webhook.register(url, max_connections=per_address)

    async def forget_webhook(self) -> None:
        """Tell Telegram to stop posting this bot's updates (it was disabled or removed)."""
        if self.plan.webhook_url is None:
            return
        try:
            await self.application.bot.delete_webhook()
        except Exception as exc:  # it no longer has a route here: Telegram's posts are 404
            log.warning("bot #%d: deleteWebhook failed (%s)", self.plan.scope, exc)

    async def stop(self) -> None:
        """Polling ends, the updates being handled finish, the Application shuts down."""
        application = self.application
        try:
            if application.updater is not None and application.updater.running:
                await application.updater.stop()
            if self._leadership is not None:  # another worker takes over this bot's polling
                await _cancel(self._tasks.pop())
                await self._leadership.close()
            if self._worker is not None:
                self._worker.stop()
                await asyncio.gather(*self._tasks, return_exceptions=True)
            if application.running:
                await application.stop()
        finally:
            for task in self._tasks:
                await _cancel(task)
            self._tasks.clear()
            if self._leadership is not None:
                await self._leadership.close()
            if self._inbox is not None:
                await self._inbox.close()  # the view's listener; the pool is the runtime's
            with contextlib.suppress(Exception):
                await application.shutdown()
            self._loops.forget()


Fingerprint = tuple[str, BotProfile]
"""What restarts a running bot when it changes: its sealed token and its settings."""


class Fleet:
    """The stored bots this process serves, kept in step with the bots table."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        open_token: Callable[[StoredBot], str] | None = None,
        poll_timeout: int = POLL_TIMEOUT,
        watch_seconds: float = WATCH_SECONDS,
    ) -> None:
        """`open_token` reads a stored bot's token (default: `app.bot_secrets` under
        SECRET_KEY)."""
        self._runtime = runtime
        self._open_token = open_token
        self._poll_timeout = poll_timeout
        self._watch_seconds = watch_seconds
        self._running: dict[int, tuple[Fingerprint, FleetBot]] = {}
        self._failed: dict[int, Fingerprint] = {}  # logged once per fingerprint
        self._lock = asyncio.Lock()

    @property
    def running(self) -> dict[int, FleetBot]:
        """The bots running now, by scope."""
        return {scope: bot for scope, (_, bot) in self._running.items()}

    def webhooks(self) -> tuple[str, web.Application]:
        """The HTTP server's mount for the stored bots' webhooks: `/telegram/<id>`, each
        handled by that bot's `TelegramWebhook`; 404 for a bot not running here."""
        from aiohttp import web

        from api.errors import ApiError

        async def handle(request: web.Request) -> web.StreamResponse:
            running = self._running.get(int(request.match_info["bot"]))
            webhook = running[1].webhook if running is not None else None
            if webhook is None:
                raise ApiError("NOT_FOUND", "no such bot")
            return await webhook.handle(request)

        app = web.Application()
        app.router.add_post("/{bot:[1-9][0-9]{0,17}}", handle)
        return WEBHOOK_PREFIX, app

    async def run(self) -> None:
        """Follow the bots table until cancelled; a reading that fails is logged and made
        again (`telemetry.supervision`)."""
        pace = Pace(self._watch_seconds, WATCH_LONGEST, first_retry=self._watch_seconds)
        await supervise("bots", self._step, pace, self._runtime.loops)

    async def _step(self) -> None:
        await self.sync()

    async def sync(self) -> None:
        """Start, stop and restart bots to match the table's enabled bots."""
        async with self._lock:
            wanted = {
                bot.id: bot
                for bot in await self._runtime.store.bots.bots()
                if bot.enabled and bot.removed_at is None
            }
            for scope in list(self._running):
                fingerprint, _ = self._running[scope]
                bot = wanted.get(scope)
                if bot is None:
                    await self._running[scope][1].forget_webhook()
                    await self._stop(scope, "disabled or removed")
                elif _fingerprint(bot) != fingerprint:
                    await self._stop(scope, "changed")
            starting = [bot for scope, bot in wanted.items() if scope not in self._running]
            turns = asyncio.Semaphore(STARTS_AT_ONCE)

            async def start(bot: StoredBot) -> None:
                async with turns:
                    await self._start(bot)

            await asyncio.gather(*(start(bot) for bot in starting))
            for scope in list(self._failed):
                if scope not in wanted:
                    del self._failed[scope]

    async def close(self) -> None:
        """Stop every bot (the process is stopping)."""
        async with self._lock:
            for scope in list(self._running):
                await self._stop(scope, "stopping")

    async def _start(self, bot: StoredBot) -> None:
        fingerprint = _fingerprint(bot)
        try:
            token = await asyncio.to_thread(self._token_of, bot)
            plan = plan_for(self._runtime.settings, bot, token)
            running = FleetBot(self._runtime, plan, poll_timeout=self._poll_timeout)
            await running.start()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one bot that cannot start never stops the others
            if self._failed.get(bot.id) != fingerprint:
                log.warning(  # the logs redact every token opened (`app.bot_secrets`)
                    "bot #%d %s cannot start (%s: %s); trying again every %.0f s",
                    bot.id,
                    bot.handle,
                    type(exc).__name__,
                    str(exc)[:200],
                    self._watch_seconds,
                )
                self._failed[bot.id] = fingerprint
            return
        self._failed.pop(bot.id, None)
        self._running[bot.id] = (fingerprint, running)

    async def _stop(self, scope: int, why: str) -> None:
        _, running = self._running[scope]
        log.info("bot #%d %s stops (%s)", scope, running.plan.handle, why)
        try:
            await running.stop()
        except Exception:
            log.exception("bot #%d did not stop cleanly", scope)
        finally:
            del self._running[scope]  # `running` names it until it has stopped

    def _token_of(self, bot: StoredBot) -> str:
        if self._open_token is not None:
            return self._open_token(bot)
        from app.bot_secrets import TokenBox

        secret_key = self._runtime.settings.secret("secret_key")
        if not secret_key:  # a bot added after a start without any
            raise LookupError("SECRET_KEY is not set: the bot's token cannot be opened")
        return TokenBox(secret_key).open(bot)


def _fingerprint(bot: StoredBot) -> Fingerprint:
    return (bot.token_cipher, bot.profile)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
