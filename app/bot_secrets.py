"""The added bots' tokens sealed for the database and opened again, under SECRET_KEY.

A token is stored as a Fernet token (AES-128-CBC and HMAC-SHA256, from `cryptography`)
under a key derived from SECRET_KEY with HKDF-SHA256 (`SALT`, `INFO`): a database dump
alone does not give a bot away, and SECRET_KEY itself is never stored.

Invariants:
- `cryptography` is imported only when a token is sealed or opened (`app.lean_imports`
  keeps it out of processes that need it for nothing else), so a deployment without an
  added bot never loads it;
- a token that does not open under this SECRET_KEY (another key, a damaged row) is
  `TokenUnreadable` naming the bot, one line, never the cipher text or a traceback;
- every token sealed or opened here is redacted from the logs from then on
  (`app.logs.redact_also`);
- nothing here returns or prints a token except `open`.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from app.lean_imports import admit
from app.logs import redact_also
from core.domain.bots import TAIL_CHARS, StoredBot

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

SALT = b"consultation-bot"
INFO = b"bot tokens v1"
"""Fixed derivation inputs: a new derivation (another key for tokens) changes `INFO`."""


class TokenUnreadable(Exception):
    """A stored bot's token does not open under this SECRET_KEY; the message names the bot."""


def no_secret_key(bots: int) -> str:
    """The one line that stops a start without SECRET_KEY while `bots` are stored."""
    stored = "1 bot is" if bots == 1 else f"{bots} bots are"
    return (
        f"SECRET_KEY is not set, and {stored} stored (`consultation-bot bots list`) whose "
        "tokens it encrypts: set the SECRET_KEY they were added with."
    )


def tail_of(token: str) -> str:
    """The last characters of a token: all that is ever shown of it."""
    return token[-TAIL_CHARS:]


def shown_tail(tail: str) -> str:
    return f"…{tail}"


class TokenBox:
    """Seals and opens bot tokens under one SECRET_KEY; the cipher is built on first use."""

    def __init__(self, secret_key: str) -> None:
        self._secret_key = secret_key
        self._fernet: Fernet | None = None

    def seal(self, token: str) -> str:
        """`token` encrypted, as the bots table stores it (ASCII)."""
        redact_also(token)
        return self._cipher().encrypt(token.encode()).decode("ascii")

    def open(self, bot: StoredBot) -> str:
        """`bot`'s token; `TokenUnreadable` when it was sealed under another key or damaged."""
        cipher = self._cipher()  # admits `cryptography` first
        from cryptography.fernet import InvalidToken

        try:
            token = cipher.decrypt(bot.token_cipher.encode("ascii")).decode()
        except (InvalidToken, UnicodeError, ValueError):
            raise TokenUnreadable(
                f"bot #{bot.id} {bot.handle}: its token does not decrypt with this SECRET_KEY "
                "(was it added under another one?); set that SECRET_KEY, or add the bot again"
            ) from None
        redact_also(token)
        return token

    def _cipher(self) -> Fernet:
        if self._fernet is None:
            admit("cryptography")
            from cryptography.fernet import Fernet
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            key = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info=INFO).derive(
                self._secret_key.encode()
            )
            self._fernet = Fernet(base64.urlsafe_b64encode(key))
        return self._fernet
