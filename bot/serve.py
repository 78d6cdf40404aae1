"""The long-running bot process: runtime, Telegram application, optional HTTP server.

Stops cleanly on SIGTERM/SIGINT: polling ends, updates being handled finish,
the store is closed. Start-up failures (bad token, Telegram unreachable) end with
one clear line instead of a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from telegram import Update
from telegram.error import InvalidToken, NetworkError, TelegramError, TimedOut

from bot.app import build_application, set_command_menus
from bot.runtime import (
    StartupError,
    cannot_listen,
    check_model_endpoint,
    open_runtime,
    stop_on_signals,
)
from core.settings import Settings

log = logging.getLogger(__name__)

STARTUP_ATTEMPTS = 5


async def run_bot(settings: Settings) -> int:
    stop = stop_on_signals()
    async with open_runtime(settings) as runtime:
        webhook = bool(settings.webhook_url)
        application = build_application(
            settings,
            runtime.service,
            webhook=webhook,
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
            web = await start_web(settings, runtime, application) if needs_web(settings) else None
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
            if web is not None:
                await web.cleanup()
            await application.stop()
        finally:
            await application.shutdown()
    return 0


async def initialize_with_retries(application) -> None:  # type: ignore[no-untyped-def]
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


async def start_web(settings, runtime, application):  # type: ignore[no-untyped-def]
    """The aiohttp server for the HTTP API, the webhook, health and metrics."""
    from api import start_web_server

    try:
        return await start_web_server(settings, runtime, application)
    except OSError as exc:
        raise cannot_listen(settings, exc) from None
    except TelegramError as exc:  # setWebhook refused, or Telegram unreachable for it
        raise StartupError(f"WEBHOOK_URL: Telegram did not set the webhook: {exc}") from None
