"""The long-running bot process (`consultation-bot run`, `python -m bot`): runtime,
Telegram application, and the HTTP server when the API or the webhook needs it.

Stops cleanly on SIGTERM/SIGINT: polling ends, updates being handled finish,
the store is closed. Start-up failures (bad token, Telegram unreachable) end with
one clear line instead of a traceback.

With DATABASE_URL any number of these processes serve one bot: updates (from the
webhook, or from whichever process leads the polling) go into the shared inbox, and
every process's `InboxWorker` hands them to PTB's `process_update`, each chat in order
on one process at a time. Without it, one process: PTB's own Updater and update queue.

Beside TELEGRAM_BOT_TOKEN's bot the process serves every enabled bot of the bots table
(`app.bot_fleet`), each its own Application built from the same parts (`app.bot_edge`),
following the table while it runs; they stop before the deployment's bot does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from telegram import Update
from telegram.error import InvalidToken, NetworkError, TelegramError, TimedOut
from telegram.ext import Application

from app.bot_edge import (
    inbox_worker,
    operator_knowledge,
    polling_leadership,
    set_menus,
    shared_state,
)
from app.runtime import Runtime, check_model_endpoint, open_runtime
from app.settings import Settings
from app.startup import StartupError, cannot_listen, stop_on_signals
from bot.app import build_application
from bot.commands.plans import sells_plans
from i18n.document_labels import DOCUMENT_LANGUAGES

if TYPE_CHECKING:  # the HTTP server loads only with the API or the webhook on; PostgreSQL's
    # modules, asyncpg and the shared inbox's worker and polling leader only with DATABASE_URL
    from aiohttp import web

    from api.webhook import UpdateSink
    from app.bot_fleet import Fleet

log = logging.getLogger(__name__)

STARTUP_ATTEMPTS = 5


async def run_bot(settings: Settings) -> int:
    stop = stop_on_signals()
    config = settings.bot_config()
    webhook = config.webhook
    async with open_runtime(settings, inbox=True) as runtime:
        if runtime.inbox is not None:
            config = dataclasses.replace(config, external_updates=True)
        application = build_application(
            config,
            runtime.engine,
            on_reply=lambda reply: runtime.metrics.record_reply(reply, source="telegram"),
            shared=shared_state(runtime, config),
            intake=runtime.intake,
            turn_intake=runtime.turn_intake,
            on_given_up=runtime.metrics.record_given_up,
            knowledge=operator_knowledge(runtime),
            sales=runtime.sales,
            stars=runtime.stars,
            bots=runtime.store.bots.bots,
        )
        try:
            await initialize_with_retries(application)
        except InvalidToken:
            print(
                "Telegram rejected TELEGRAM_BOT_TOKEN: check the token from @BotFather.",
                file=sys.stderr,
            )
            return 2
        except (NetworkError, TimedOut) as exc:
            print(
                f"Cannot reach the Telegram Bot API at {settings.telegram_api_base_url}: {exc}",
                file=sys.stderr,
            )
            return 1
        worker = inbox_worker(runtime, application, config.scope)
        background: list[asyncio.Task[None]] = []
        leadership = None
        fleet = stored_bots(runtime)
        try:
            await set_menus(application, config, payments=sells_plans(runtime.sales))
            # The server first: if it cannot listen, nothing is running yet to stop.
            server = None
            if needs_web(settings):
                sink = worker.accept if worker is not None else None
                routes = [fleet.webhooks()] if webhook else []  # /telegram/<bot id>
                server = await start_web(settings, runtime, application, sink, routes)
            await application.start()
            if worker is not None:
                background.append(asyncio.create_task(worker.run()))
            if not webhook and worker is not None:
                from bot.updates.polling import PollingLeader

                leadership = polling_leadership(settings, config.token)
                leader = PollingLeader(
                    application.bot, worker.accept, leadership, loops=runtime.loops
                )
                background.append(asyncio.create_task(leader.run()))
            elif not webhook:
                assert application.updater is not None
                await application.updater.start_polling(
                    allowed_updates=Update.ALL_TYPES, timeout=30, poll_interval=0
                )
            watching = asyncio.create_task(fleet.run())  # the stored bots, from now on
            background.append(watching)
            await check_model_endpoint(runtime)
            log.info(
                "bot @%s is running (%s%s)",
                application.bot.username,
                "webhook" if webhook else "polling",
                ", shared inbox" if worker is not None else "",
            )
            await stop.wait()
            log.info("stopping")
            await _cancel(background.pop(background.index(watching)))
            await fleet.close()  # the stored bots stop first, each as the first one below
            if application.updater is not None and application.updater.running:
                await application.updater.stop()
            if leadership is not None:  # another worker takes over the polling
                await _cancel(background.pop())
                await leadership.close()
            if server is not None:
                await server.cleanup()
            if worker is not None:  # the updates being processed finish; the rest wait
                worker.stop()
                await asyncio.gather(*background)
            await application.stop()
        finally:
            for task in background:
                await _cancel(task)
            await fleet.close()
            if leadership is not None:
                await leadership.close()
            await application.shutdown()
    log.info("stopped")
    return 0


def stored_bots(runtime: Runtime) -> Fleet:
    """The stored bots (`app.bot_fleet`), none started yet: `Fleet.run` starts the enabled
    ones at once and follows the bots table from then on."""
    from app.bot_fleet import Fleet

    return Fleet(runtime)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("a background task had failed")


async def initialize_with_retries(application: Application) -> None:
    """getMe and friends, retried a few times: a network blip at start-up is no reason to die."""
    for attempt in range(1, STARTUP_ATTEMPTS + 1):
        try:
            await application.initialize()
            return
        except InvalidToken:
            await application.bot.shutdown()  # close the HTTP sessions initialize opened
            raise
        except (NetworkError, TimedOut) as exc:
            if attempt == STARTUP_ATTEMPTS:
                await application.bot.shutdown()
                raise
            log.warning("Telegram not reachable (%s); retrying", exc)
            await asyncio.sleep(min(2**attempt, 30))


def needs_web(settings: Settings) -> bool:
    """The HTTP server runs for the API, the webhook or the operator's console."""
    return settings.api_enabled or bool(settings.webhook_url) or settings.admin_token is not None


async def start_web(
    settings: Settings,
    runtime: Runtime,
    application: Application,
    update_sink: UpdateSink | None = None,
    routes: Sequence[tuple[str, web.Application]] = (),
) -> web.AppRunner:
    """The aiohttp server for the HTTP API, the webhook (into `update_sink` when given),
    health and metrics, the console, and `routes` (the stored bots' webhooks)."""
    from api.app import start_web_server
    from app.admin_mount import console_mounts
    from app.api_bots import ApiBots

    config = settings.api_config()
    try:
        return await start_web_server(
            config,
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            metrics=runtime.metrics,
            telegram_application=application,
            update_sink=update_sink,
            session_locks=runtime.chat_locks,
            intake=runtime.intake,
            loops=runtime.loops,
            mounts=[*console_mounts(settings, runtime), *routes],
            tool_statuses=runtime.tool_statuses,
            stars=runtime.stars,
            bots=ApiBots(runtime),
            turn_intake=runtime.turn_intake,
        )
    except OSError as exc:
        raise cannot_listen(config.host, config.port, exc) from None
    except TelegramError as exc:  # setWebhook refused, or Telegram unreachable for it
        raise StartupError(f"WEBHOOK_URL: Telegram did not set the webhook: {exc}") from None
