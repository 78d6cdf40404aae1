"""The image's HEALTHCHECK: exit 0 when `/healthz` answers 200, 1 otherwise.

It reads the settings the way the bot does (environment, then `.env` in the working
directory). The bot runs its HTTP server for the API (API_ENABLED), the webhook
(WEBHOOK_URL) or the operator's console (ADMIN_TOKEN), as `app.serve_bot.needs_web`
decides; the `api` command always runs it. Without one (a polling bot with none of those)
there is no health endpoint: the check passes, and a bot that exits is restarted by the
container's restart policy instead.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from app.settings import Settings, load_settings

TIMEOUT_SECONDS = 4
WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


def command_line() -> list[str]:
    """The container's PID 1 command line (tini, then the bot's command)."""
    try:
        raw = Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def serves_http(settings: Settings) -> bool:
    """The bot's own rule (`app.serve_bot.needs_web`), kept here so that each check does not
    import the bot; tests/deployment/test_container_healthcheck.py holds the two to the same
    answers."""
    return settings.api_enabled or bool(settings.webhook_url) or settings.admin_token is not None


def main() -> int:
    api_command = "api" in command_line()[-1:]
    settings = load_settings(api_enabled=True) if api_command else load_settings()
    if not serves_http(settings):
        return 0
    host = "127.0.0.1" if settings.api_host in WILDCARD_HOSTS else settings.api_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    url = f"http://{host}:{settings.api_port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            healthy = response.status == 200
    except (urllib.error.URLError, OSError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
