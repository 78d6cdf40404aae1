"""What a chat request gets back: a round's response body, or a reply given before.

Invariants (with `Idempotency-Key`, see `api.idempotency`):
- a request is answered at most once: a retry of an answered request gets the stored
  reply (`api.key_claims`), and a retry of one whose reply was given but not recorded
  gets the reply that answered its message, found in the session by the key's turn id
  — neither takes a new round;
- an answer this request did not cause (a stored reply, or another request's it
  joined) is marked `Idempotent-Replayed: true`.
"""

from __future__ import annotations

from api.key_claims import Hold
from api.round_tasks import Message, RoundTask
from api.schemas import ChatResponse
from core.domain.attachments import MessageInput
from core.domain.outcomes import Reply
from core.turns.sessions import ApiSessions


def response(reply: Reply, read: MessageInput | None = None) -> dict[str, object]:
    """The body of `/api/chat` (and of the stream's `done` event) for one answered round."""
    return ChatResponse.from_reply(reply, read).model_dump(mode="json")


def replayed_headers(round_task: RoundTask, joined: bool) -> dict[str, str] | None:
    """Marks an answer this request did not cause (a stored reply, or another request's)."""
    return {"Idempotent-Replayed": "true"} if round_task.replayed or joined else None


async def replay_answered(
    sessions: ApiSessions, hold: Hold, round_task: RoundTask, session_id: str, message: Message
) -> bool:
    """Replay the round that answered the key's message when an earlier attempt got it
    answered without recording the reply (it stopped in between); False while the
    message is unanswered or not stored. The reply's body is recorded under the key."""
    reply = await sessions.replay(session_id, hold.turn_id)
    if reply is None:
        return False
    body = response(reply, message.read)
    await hold.save(body)
    round_task.replay(session_id, body)
    return True
