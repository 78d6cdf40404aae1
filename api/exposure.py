"""Refuse to serve the API beyond this machine without a token, unless told to.

Invariant: an API reachable from other hosts (API_HOST not loopback) either needs
a bearer token (API_TOKEN) or was opened on purpose (API_ALLOW_ANONYMOUS=true):
an open API spends the operator's model budget for anyone who finds the port.
"""

from __future__ import annotations

import ipaddress

from api.config import ApiConfig
from core.domain.errors import ConfigError

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


def check_exposure(config: ApiConfig) -> None:
    """Raise `ConfigError` (one line saying why) for an open API without a token."""
    if not config.enabled or config.allow_anonymous:
        return
    if config.token or is_loopback(config.host):
        return
    raise ConfigError(
        f"API_HOST={config.host} is reachable from other machines and API_TOKEN is not "
        "set, so anyone could use the API at your expense: set API_TOKEN, listen on "
        "127.0.0.1, or set API_ALLOW_ANONYMOUS=true to allow it on purpose."
    )
