"""Process logging: one format, a validated level, and no secret in any line.

Invariants:
- Every record that reaches a root handler has the configured secrets (bot
  token, webhook secret, API token, model API key, the headers of MCP_SERVERS' HTTP
  servers and the token after their scheme — as written and URL-encoded)
  replaced by `REDACTED`, in its message, arguments, exception text and stack.
  Libraries log them at DEBUG: python-telegram-bot the bot URL with the token
  and `setWebhook` with `secret_token`.
- aiosqlite stays at INFO whatever LOG_LEVEL says: at DEBUG it logs every
  statement it runs with its parameters, i.e. every user's message in full,
  and tells an operator nothing the store's own logs do not.
- Third-party chatter stays out unless LOG_LEVEL=DEBUG: the openai SDK's "Retrying
  request" lines, one "HTTP Request" line per model call from httpx (httpx2 under
  the SDK's aiohttp transport), aiohttp's own access log and the MCP SDK's session lines
  are WARNING and above;
  the API's access log is `api.access` (one line per request, API_ACCESS_LOG).
- `floor` raises the level for a process whose terminal is its user interface (the
  terminal): its stderr shows warnings, never INFO lines between the turns.
- An unknown LOG_LEVEL is a `ConfigError` naming the variable, not a traceback.
"""

from __future__ import annotations

import logging
import re
import typing
from collections.abc import Iterable
from urllib.parse import quote, urlsplit

from pydantic import SecretStr

from app.settings import Settings
from core.domain.errors import ConfigError

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 6
"""Shorter values cannot be told apart from ordinary text, so they are not searched for."""

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_QUIET = {
    "openai": logging.WARNING,
    "httpx": logging.WARNING,
    "httpx2": logging.WARNING,
    "httpcore": logging.WARNING,
    "aiohttp.access": logging.WARNING,
    "telegram.ext.Updater": logging.WARNING,
    "mcp": logging.WARNING,  # the MCP SDK: a line per HTTP session and stream reconnect
}
_NEVER_BELOW = {"aiosqlite": logging.INFO}  # whatever LOG_LEVEL says (see above)


class Redactor(logging.Filter):
    """A handler filter that replaces secrets in whatever the record will print."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        super().__init__()
        self._variants: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str | None]) -> None:
        """Redact `secrets` too from now on (a stored bot's token, once it is read)."""
        self._variants |= {
            form
            for secret in secrets
            if secret and len(secret) >= MIN_SECRET_LENGTH
            for form in (secret, quote(secret, safe=""), quote(secret))
        }
        # Longest first, so a secret containing another is replaced whole.
        alternatives = sorted(self._variants, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None

    def redact(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        if self._pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: print them as they are
            message = f"{record.msg} {record.args}"
        record.msg, record.args = self.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def secret_settings() -> list[str]:
    """Every setting typed as a secret (`SecretStr`): a new one is redacted without being
    listed anywhere."""
    return [
        name
        for name, field in Settings.model_fields.items()
        if SecretStr in typing.get_args(field.annotation) or field.annotation is SecretStr
    ]


def secrets_of(settings: Settings) -> list[str | None]:
    """The values no log line may show."""
    secrets = [settings.secret(name) for name in secret_settings()]
    database_url = settings.secret("database_url")
    if database_url:  # its password, wherever a library prints it
        secrets.append(urlsplit(database_url).password)
    for server in settings.tools_config().servers:  # an HTTP tool server's credentials
        for value in server.headers.values():
            secrets += [value, value.split()[-1] if value.split() else None]  # "Bearer <t>"
    return secrets


def configure_logging(
    level: str, secrets: Iterable[str | None] = (), *, floor: str = "DEBUG"
) -> None:
    """Log to stderr at `level` (a name from `LEVELS`) but not below `floor` unless `level`
    is DEBUG, secrets redacted; raise ConfigError for an unknown level."""
    name = level.strip().upper()
    if name not in LEVELS:
        raise ConfigError(f"LOG_LEVEL: {level!r} is not a level; use one of {', '.join(LEVELS)}")
    if name != "DEBUG" and LEVELS.index(name) < LEVELS.index(floor):
        name = floor
    logging.basicConfig(
        level=getattr(logging, name), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger().setLevel(name)  # also when a handler was there before basicConfig
    redactor = Redactor(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor)
    chosen = getattr(logging, name)
    for logger, quiet in _QUIET.items():
        logging.getLogger(logger).setLevel(chosen if name == "DEBUG" else max(quiet, chosen))
    for logger, least in _NEVER_BELOW.items():
        logging.getLogger(logger).setLevel(max(least, chosen))


def redact_also(*secrets: str) -> None:
    """Keep `secrets` out of every log line from now on, as the configured ones: each root
    handler's `Redactor` learns them (a handler without one gets one)."""
    for handler in logging.getLogger().handlers:
        redactor = next((f for f in handler.filters if isinstance(f, Redactor)), None)
        if redactor is None:
            handler.addFilter(Redactor(secrets))
        else:
            redactor.add(secrets)
