"""`Idempotency-Key`: what a key may look like, what makes two requests "the same",
and the store the keys live in.

Invariant: a key names one request of one client. The first request with it is
answered normally; a retry with the same key and an equal body gets that request's
outcome — the stored reply, or (while it runs) its result when it ends — and never
takes a new round; the same key with another body is refused. A request that failed
stores no reply, so its key stays usable and the retry really retries.

A key also names its message in the session (`turn_id`, as an update id does on
Telegram): the message is stored with it, so a retry after a crash finds its own
message, and the reply that answered it, exactly, however many others say the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Protocol

from api.errors import ApiError
from api.schemas import ChatRequest

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_KEY_LENGTH}}}")


class KeyRow(Protocol):
    """A claimed key as stored: the request it was first sent with, its session (None
    before one was opened), its reply (None until answered), and until when its holder's
    lease runs (None: nobody is answering it)."""

    @property
    def fingerprint(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def response(self) -> str | None: ...
    @property
    def lease_until(self) -> float | None: ...


class HeldKey(Protocol):
    """A key an attempt now holds: the session an earlier attempt opened (or None)."""

    @property
    def session_id(self) -> str | None: ...


class KeyStore(Protocol):
    """Where keys and their replies are kept (both stores have these; see
    `storage.idempotency` for the rules)."""

    async def find_idempotency_key(self, client: str, key: str) -> KeyRow | None: ...

    async def claim_idempotency_key(
        self,
        client: str,
        key: str,
        *,
        fingerprint: str,
        owner: str,
        at: float,
        lease_until: float,
    ) -> HeldKey | None:
        """Hold the key for `owner`, in one statement: a new key, or one whose earlier
        attempt at the same request gave it up or let its lease run out. None otherwise."""
        ...

    async def renew_idempotency_key(
        self, client: str, key: str, *, owner: str, lease_until: float
    ) -> bool: ...

    async def attach_idempotency_session(
        self, client: str, key: str, *, owner: str, session_id: str
    ) -> bool: ...

    async def release_idempotency_key(self, client: str, key: str, *, owner: str) -> None: ...

    async def save_idempotent_response(self, client: str, key: str, response: str) -> None: ...


def parse_key(value: str | None) -> str | None:
    """The header's key, None without one; `ApiError` for one that is not 1-255 visible ASCII."""
    if value is None:
        return None
    if not _KEY.fullmatch(value):
        raise ApiError(
            "VALIDATION_ERROR",
            f"{HEADER}: 1 to {MAX_KEY_LENGTH} visible ASCII characters (a UUID, say)",
        )
    return value


def key_reused() -> ApiError:
    return ApiError(
        "IDEMPOTENCY_KEY_REUSED",
        f"{HEADER} was already used for a different request: use a new key for a new request",
    )


def fingerprint(body: ChatRequest) -> str:
    """The request's meaning, not its bytes: key order, spacing and unknown fields don't count."""
    canonical = json.dumps(
        body.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def turn_id(client: str, key: str) -> str:
    """The turn id the key's message is stored with: the same key of the same client always
    names the same turn, and no other (nor a Telegram update's `tg:` id)."""
    digest = hashlib.sha256(json.dumps([client, key]).encode()).hexdigest()
    return f"api:{digest[:32]}"
