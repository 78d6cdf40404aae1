"""`python -m api`: the HTTP API alone (no Telegram), on API_HOST:API_PORT.

For deployments that only need the JSON API, and for trying it with curl. Same
settings, same database and engine as the bot; stops cleanly on SIGINT/SIGTERM.
A setting or start-up problem ends it with one line and exit code 2, as for the bot.
"""

from __future__ import annotations

import asyncio
import sys

from api.app import start_web_server
from api.exposure import check_exposure
from bot.logs import configure_logging, secrets_of
from core.settings import ConfigError, Settings, load_settings


async def serve(settings: Settings) -> int:
    from bot.runtime import cannot_listen, check_model_endpoint, open_runtime, stop_on_signals

    stop = stop_on_signals()
    async with open_runtime(settings) as runtime:
        try:
            runner = await start_web_server(settings, runtime, None)
        except OSError as exc:
            raise cannot_listen(settings, exc) from None
        print(f"API on http://{settings.api_host}:{settings.api_port}", flush=True)
        await check_model_endpoint(runtime)
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
        configure_logging(settings.log_level, secrets_of(settings))
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
    from bot.runtime import StartupError  # the engine's imports, once settings are sound

    try:
        return asyncio.run(serve(settings))
    except KeyboardInterrupt:
        return 0
    except StartupError as exc:
        print(f"Cannot start: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
