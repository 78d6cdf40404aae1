"""Refuse to serve the API beyond this machine without a token, unless told to.

Invariant: an API reachable from other hosts (API_HOST not loopback) either needs
a bearer token (API_TOKEN) or was opened on purpose (API_ALLOW_ANONYMOUS=true):
an open API spends the operator's model budget for anyone who finds the port.
"""

from __future__ import annotations

import ipaddress

from core.settings import ConfigError, Settings

_LOCAL_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost; any other name or address (0.0.0.0, "") is not."""
    name = host.strip().strip("[]").lower()
    if name in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    """Raise `ConfigError` (one line saying why) for an open API without a token."""
    if not settings.api_enabled or settings.api_allow_anonymous:
        return
    if settings.secret("api_token") or is_loopback(settings.api_host):
        return
    raise ConfigError(
        f"API_HOST={settings.api_host} is reachable from other machines and API_TOKEN is not "
        "set, so anyone could use the API at your expense: set API_TOKEN, listen on "
        "127.0.0.1, or set API_ALLOW_ANONYMOUS=true to allow it on purpose."
    )
