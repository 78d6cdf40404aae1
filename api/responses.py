"""What a chat request gets back: a round's response body, or a reply given before.

Invariants (with `Idempotency-Key`, see `api.idempotency`):
- a request is answered at most once: a retry of an answered request gets the stored
  reply, and a retry of one whose reply was given but not recorded gets that reply
  read back from the session — neither takes a new round;
- the same key with another body is refused, whatever became of the first request;
- an answer this request did not cause (a stored reply, or another request's it
  joined) is marked `Idempotent-Replayed: true`.
"""

from __future__ import annotations

import json

from api.errors import ApiError
from api.idempotency import HEADER, KeyStore, answered_round
from api.schemas import ChatResponse
from api.turn import Flight, Turn
from core.attachments import TurnInput
from core.outcomes import Reply
from core.service import ConsultationService


def response(reply: Reply, read: TurnInput | None = None) -> dict[str, object]:
    """The body of `/api/chat` (and of the stream's `done` event) for one answered round."""
    return ChatResponse.from_reply(reply, read).model_dump(mode="json")


def replayed_headers(turn: Turn, joined: bool) -> dict[str, str] | None:
    """Marks an answer this request did not cause (a stored reply, or another request's)."""
    return {"Idempotent-Replayed": "true"} if turn.replayed or joined else None


def key_reused() -> ApiError:
    return ApiError(
        "IDEMPOTENCY_KEY_REUSED",
        f"{HEADER} was already used for a different request: use a new key for a new request",
    )


async def find_stored(keys: KeyStore | None, turn: Turn, flight: Flight | None) -> str | None:
    """For a key seen before: replay its reply (answers `turn`), or the session to retry."""
    if flight is None or keys is None:
        return None
    found = await keys.find_idempotency_key(*flight)
    if found is None:
        return None
    stored_print, session_id, stored, claimed_at = found
    if stored_print != turn.fingerprint:
        raise key_reused()
    if stored is None:
        turn.claimed_at = claimed_at
        return session_id
    turn.replay(session_id, json.loads(stored))
    return session_id


async def recover(
    service: ConsultationService,
    keys: KeyStore | None,
    turn: Turn,
    session_id: str,
    text: str,
    flight: Flight | None,
) -> bool:
    """Replay a round the key's earlier attempt got answered without recording the reply."""
    consultation = await service.sessions.get_session(session_id)
    answered = answered_round(
        consultation, text, since=turn.claimed_at, default_model=service.config.model
    )
    if answered is None:
        return False
    body = answered.model_dump(mode="json")
    if flight is not None and keys is not None:
        await keys.save_idempotent_response(*flight, json.dumps(body, ensure_ascii=False))
    turn.replay(session_id, body)
    return True
