"""The long-running bot process (`consultation-bot run`, `python -m bot`): runtime,
Telegram application, and the HTTP server when the API or the webhook needs it.

Stops cleanly on SIGTERM/SIGINT: polling ends, updates being handled finish,
the store is closed. Start-up failures (bad token, Telegram unreachable) end with
one clear line instead of a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from aiohttp import web
from telegram import Update
from telegram.error import InvalidToken, NetworkError, TelegramError, TimedOut
from telegram.ext import Application

from api.app import start_web_server
from app.runtime import Runtime, check_model_endpoint, open_runtime
from app.settings import Settings
from app.startup import StartupError, cannot_listen, stop_on_signals
from bot.app import build_application, set_command_menus

log = logging.getLogger(__name__)

STARTUP_ATTEMPTS = 5


async def run_bot(settings: Settings) -> int:
    stop = stop_on_signals()
    config = settings.bot_config()
    webhook = config.webhook
    async with open_runtime(settings) as runtime:
        application = build_application(
            config,
            runtime.service,
            on_reply=lambda reply: runtime.metrics.record_reply(reply, source="telegram"),
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
        try:
            # Menus here: PTB runs `post_init` only under run_polling/run_webhook.
            await set_command_menus(application)
            # The server first: if it cannot listen, nothing is running yet to stop.
            server = None
            if needs_web(settings):
                server = await start_web(settings, runtime, application)
            await application.start()
            if not webhook:
                assert application.updater is not None
                await application.updater.start_polling(
                    allowed_updates=Update.ALL_TYPES, timeout=30, poll_interval=0
                )
            await check_model_endpoint(runtime)
            log.info(
                "bot @%s is running (%s)",
                application.bot.username,
                "webhook" if webhook else "polling",
            )
            await stop.wait()
            log.info("stopping")
            if application.updater is not None and application.updater.running:
                await application.updater.stop()
            if server is not None:
                await server.cleanup()
            await application.stop()
        finally:
            await application.shutdown()
    return 0


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
    return settings.api_enabled or bool(settings.webhook_url)


async def start_web(
    settings: Settings,
    runtime: Runtime,
    application: Application,
) -> web.AppRunner:
    """The aiohttp server for the HTTP API, the webhook, health and metrics."""
    config = settings.api_config()
    try:
        return await start_web_server(
            config,
            runtime.service,
            store=runtime.store,
            metrics=runtime.metrics,
            telegram_application=application,
        )
    except OSError as exc:
        raise cannot_listen(config.host, config.port, exc) from None
    except TelegramError as exc:  # setWebhook refused, or Telegram unreachable for it
        raise StartupError(f"WEBHOOK_URL: Telegram did not set the webhook: {exc}") from None
