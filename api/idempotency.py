"""`Idempotency-Key`: what a key may look like, what makes two requests "the same",
and the store the keys live in.

Invariant: a key names one request of one client. The first request with it is
answered normally; a retry with the same key and an equal body gets that request's
outcome — the stored reply, or (while it runs) its result when it ends — and never
takes a new round; the same key with another body is refused. A request that failed
stores no reply, so its key stays usable and the retry really retries.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Protocol

from api.errors import ApiError
from api.schemas import ChatRequest, ChatResponse
from core.models import Consultation, Role, Status

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_KEY_LENGTH}}}")


class KeyStore(Protocol):
    """Where keys and their replies are kept (`storage.SqliteStore` has these)."""

    async def find_idempotency_key(
        self, client: str, key: str
    ) -> tuple[str, str, str | None, float] | None:
        """(fingerprint, session id, stored reply JSON or None, claimed at) of a claimed key."""
        ...

    async def claim_idempotency_key(
        self, client: str, key: str, *, fingerprint: str, session_id: str, at: float
    ) -> None: ...

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


def fingerprint(body: ChatRequest) -> str:
    """The request's meaning, not its bytes: key order, spacing and unknown fields don't count."""
    canonical = json.dumps(
        body.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def answered_round(
    consultation: Consultation, message: str, *, since: float, default_model: str
) -> ChatResponse | None:
    """The reply to `message` if the session stored one after `since` (when the key was
    claimed): the round was answered but its reply never reached the key's record (the
    process stopped in between). None when the message is still waiting for its answer.
    `model` is then the model asked for: the provider's own name for it was not kept.
    """
    messages = consultation.messages
    rounds = 0
    for index, reply in enumerate(messages):
        if reply.role is not Role.ASSISTANT:
            continue
        rounds += 1
        asked = messages[index - 1] if index else None
        if reply.created_at < since or asked is None or asked.role is not Role.USER:
            continue
        if asked.text == message:
            last = index == len(messages) - 1
            return ChatResponse(
                content=reply.text,
                model=consultation.options.model or default_model,
                is_complete=last and consultation.status is Status.COMPLETE,
                round=rounds,
                max_rounds=max(consultation.max_rounds, rounds),
                session_id=consultation.id,
            )
    return None
