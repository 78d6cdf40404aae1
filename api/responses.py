"""What a chat request gets back: a round's response body, or a reply given before.

Invariants (with `Idempotency-Key`, see `api.idempotency`):
- a request is answered at most once: a retry of an answered request gets the stored
  reply (`api.key_claims`), and a retry of one whose reply was given but not recorded
  gets that reply read back from the session — neither takes a new round;
- an answer this request did not cause (a stored reply, or another request's it
  joined) is marked `Idempotent-Replayed: true`.
"""

from __future__ import annotations

from api.idempotency import answered_round
from api.key_claims import Hold
from api.schemas import ChatResponse
from api.turn import Turn
from core.attachments import TurnInput
from core.outcomes import Reply
from core.service import ConsultationService


def response(reply: Reply, read: TurnInput | None = None) -> dict[str, object]:
    """The body of `/api/chat` (and of the stream's `done` event) for one answered round."""
    return ChatResponse.from_reply(reply, read).model_dump(mode="json")


def replayed_headers(turn: Turn, joined: bool) -> dict[str, str] | None:
    """Marks an answer this request did not cause (a stored reply, or another request's)."""
    return {"Idempotent-Replayed": "true"} if turn.replayed or joined else None


async def recover(
    service: ConsultationService, hold: Hold, turn: Turn, session_id: str, text: str
) -> bool:
    """Replay a round the key's earlier attempt got answered without recording the reply."""
    consultation = await service.sessions.get_session(session_id)
    answered = answered_round(
        consultation, text, since=hold.claimed_at, default_model=service.config.model
    )
    if answered is None:
        return False
    body = answered.model_dump(mode="json")
    await hold.save(body)
    turn.replay(session_id, body)
    return True
