"""The HTTP API alone (no Telegram): `consultation-bot api`, `python -m api`.

For deployments that only need the JSON API, and for trying it with curl. Same
settings, database and engine as the bot; stops cleanly on SIGINT/SIGTERM, logging
"stopping" when the signal arrives and "stopped" once the server and the store are closed.
"""

from __future__ import annotations

import logging

from api.app import start_web_server
from app.admin_mount import console_mounts
from app.api_bots import ApiBots
from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from app.startup import cannot_listen, stop_on_signals
from i18n.document_labels import DOCUMENT_LANGUAGES

log = logging.getLogger(__name__)


async def serve_api(settings: Settings) -> int:
    stop = stop_on_signals()
    config = settings.api_config()
    async with open_runtime(settings) as runtime:
        try:
            runner = await start_web_server(
                config,
                runtime.engine,
                document_languages=DOCUMENT_LANGUAGES,
                store=runtime.store,
                metrics=runtime.metrics,
                session_locks=runtime.chat_locks,
                intake=runtime.intake,
                loops=runtime.loops,
                mounts=console_mounts(settings, runtime),
                tool_statuses=runtime.tool_statuses,
                stars=runtime.stars,
                bots=ApiBots(runtime),
                turn_intake=runtime.turn_intake,
            )
        except OSError as exc:
            raise cannot_listen(config.host, config.port, exc) from None
        print(f"API on http://{config.host}:{config.port}", flush=True)
        await check_model_endpoint(runtime)
        try:
            await stop.wait()
            log.info("stopping")
        finally:
            await runner.cleanup()
    log.info("stopped")
    return 0
