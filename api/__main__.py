"""`python -m api`: the HTTP API alone (no Telegram), on API_HOST:API_PORT.

For deployments that only need the JSON API, and for trying it with curl. Same
settings, same database and engine as the bot; stops cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from api.app import start_web_server
from api.exposure import check_exposure
from core.settings import ConfigError, Settings, load_settings


async def serve(settings: Settings) -> int:
    from bot.runtime import open_runtime, stop_on_signals  # store, model client, service

    stop = stop_on_signals()
    async with open_runtime(settings) as runtime:
        runner = await start_web_server(settings, runtime, None)
        print(f"API on http://{settings.api_host}:{settings.api_port}", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
    return 0


def main() -> int:
    try:
        settings = load_settings(api_enabled=True)
        if not settings.secret("openai_api_key"):
            raise ConfigError("OPENAI_API_KEY: required")
        check_exposure(settings)
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    return asyncio.run(serve(settings))


if __name__ == "__main__":
    sys.exit(main())
