"""Opening and closing what a running process needs: store, model client, prompts, service.

Shared by the Telegram bot, the HTTP API and the console, so all three run the
same engine on the same database. Once a process is up (its listener bound, so a
start-up failure stays one line), `check_model_endpoint` asks the model endpoint
once — a few seconds at most, never fatal — and logs one WARNING per setting that
looks wrong. Periodic cleanup and the event-loop lag watcher
run as plain asyncio tasks for as long as the runtime is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from api.loopwatch import watch_event_loop
from api.metrics import MeteredCompleter, Metrics
from core.deadline import DeadlineCompleter
from core.errors import StoreUnavailable
from core.llm import OpenAICompleter
from core.prompts import PromptLibrary
from core.requests import EngineConfig
from core.service import ConsultationService
from core.settings import Settings
from storage import DatabaseUnusable, SqliteStore

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The process cannot start as configured; the message says why in one line and
    names the setting to look at. Entry points print it and exit with code 2."""


def cannot_listen(settings: Settings, error: OSError) -> StartupError:
    """The HTTP server could not bind API_HOST:API_PORT (in use, not an address here)."""
    reason = error.strerror or str(error)
    return StartupError(
        f"API_HOST/API_PORT: cannot listen on {settings.api_host}:{settings.api_port} ({reason})"
    )


@dataclass
class Runtime:
    settings: Settings
    store: SqliteStore
    completer: OpenAICompleter
    prompts: PromptLibrary
    service: ConsultationService
    metrics: Metrics


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT, for a clean shutdown of a long-running process."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # platforms without signal handlers
            loop.add_signal_handler(sig, stop.set)
    return stop


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    prompts = PromptLibrary(settings.prompts_dir)
    prompts.check()
    try:
        store = await SqliteStore.open(settings.db_path)
    except DatabaseUnusable as exc:
        raise StartupError(f"DB_PATH: {exc}") from None
    completer = OpenAICompleter.from_settings(settings)
    metrics = Metrics()
    metered = MeteredCompleter(DeadlineCompleter.from_settings(completer, settings), metrics)
    service = ConsultationService(store, metered, prompts, EngineConfig.from_settings(settings))
    background = [
        asyncio.create_task(_cleanup_loop(service, settings)),
        asyncio.create_task(watch_event_loop(metrics.loop_lag.observe)),
    ]
    try:
        yield Runtime(settings, store, completer, prompts, service, metrics)
    finally:
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await completer.close()
        await store.close()


async def check_model_endpoint(runtime: Runtime) -> None:
    """Log what `GET /models` says is wrong with the model settings; never stop start-up."""
    try:
        warnings = await runtime.completer.check_endpoint(runtime.settings.llm_model)
    except Exception:  # a check that cannot run proves nothing
        log.debug("model endpoint check failed", exc_info=True)
        return
    for warning in warnings:
        log.warning("model endpoint: %s", warning)


async def _cleanup_loop(service: ConsultationService, settings: Settings) -> None:
    """Expire idle consultations and purge old ones, now and then."""
    while True:
        try:
            expired, purged = await service.cleanup(
                retention_seconds=settings.retention_days * 86400, now=time.time()
            )
            if expired or purged:
                log.info("cleanup: %d expired, %d purged", expired, purged)
        except StoreUnavailable as exc:
            log.warning("cleanup postponed: %s", exc)
        except Exception:
            log.exception("cleanup failed; will try again")
        await asyncio.sleep(settings.cleanup_interval_seconds)
