"""The composition root: what a running process needs, opened and closed in one place.

Settings → store (from `app.stores`), model clients by name (`app.models`), prompts,
metrics, the consultation service and its periodic jobs. The Telegram bot, the HTTP
API, the console and the quality evaluator all open a `Runtime`, so all of them run
the same engine on the same database. Once a process is up (its listener bound, so a
start-up failure stays one line), `check_model_endpoint` asks the model endpoint once
— a few seconds at most, never fatal — and logs one WARNING per setting that looks
wrong. Periodic cleanup and the event-loop lag watcher run as plain asyncio tasks for
as long as the runtime is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from app.models import ModelClients
from app.settings import Settings
from app.stores import Store, open_store
from core.errors import StoreUnavailable
from core.keyed_lock import KeyedLock
from core.llm import ModelEndpoint, OpenAICompleter
from core.prompts import PromptLibrary
from core.service import ConsultationService
from telemetry.loopwatch import watch_event_loop
from telemetry.metrics import Metrics

log = logging.getLogger(__name__)

BOT_MODEL = "bot"


@dataclass
class Runtime:
    settings: Settings
    store: Store
    models: ModelClients
    prompts: PromptLibrary
    service: ConsultationService
    metrics: Metrics

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
) -> AsyncIterator[Runtime]:
    """Open everything, yield the runtime, close everything in reverse order.

    `extra_models` adds named model clients beside the bot's; `background=False`
    leaves out the periodic jobs (a short-lived process such as the evaluator).
    """
    prompts = PromptLibrary(settings.prompts_dir)
    prompts.check()
    bot_model = settings.model_endpoint()
    engine = settings.engine_config()
    store = await open_store(settings)
    metrics = Metrics()
    models = ModelClients([bot_model, *extra_models], metrics)
    service = ConsultationService(store, models[BOT_MODEL], prompts, engine, locks=KeyedLock())
    tasks = []
    if background:
        tasks = [
            asyncio.create_task(_cleanup_loop(service, settings)),
            asyncio.create_task(watch_event_loop(metrics.loop_lag.observe)),
        ]
    try:
        yield Runtime(settings, store, models, prompts, service, metrics)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await models.close()
        await store.close()


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
