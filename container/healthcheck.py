"""The image's HEALTHCHECK: exit 0 when `/healthz` answers 200, 1 otherwise.

It reads the settings the way the bot does (environment, then `.env` in the working
directory). When no HTTP server is configured (a polling bot without API_ENABLED) there
is no health endpoint: the check passes, and a bot that exits is restarted by the
container's restart policy instead. The `api` command always runs the server.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from app.settings import load_settings

TIMEOUT_SECONDS = 4
WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


def command_line() -> list[str]:
    """The container's PID 1 command line (tini, then the bot's command)."""
    try:
        raw = Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def main() -> int:
    api_command = "api" in command_line()[-1:]
    settings = load_settings(api_enabled=True) if api_command else load_settings()
    if not (settings.webhook_url or settings.api_enabled):
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
