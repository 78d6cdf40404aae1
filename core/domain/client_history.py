"""A consultation rebuilt from the whole conversation a chat app sends with each request.

Chat apps that speak the OpenAI API are stateless: every request carries the conversation
so far. `rebuild` reads the consultation's state from it alone:
- the client's system messages are extra instructions, never the consultation's own;
- the first user message is the request; each assistant message is one round, the user
  messages after it the answers (consecutive messages of one role are one turn);
- an assistant message that is no round (`core.domain.round_markdown.is_round`), or the one
  at the round limit, is the final answer; the assistant messages after it answered
  follow-ups; once `followup_limit` were answered, the next user message starts a new
  consultation (whose request it is);
- what the last user turn asks (`Next`): the next round, the final answer now (`/answer`),
  or a follow-up.
Each user turn carries a key (`Turn.key`): a digest of everything the client sent up to and
including it, seeded with the settings the request chose, so two histories share a key
only when they agree on every message before it. A server that stored the consultation
finds its own copy by those keys; whatever it finds never overrides what the client sent.
Pure: no I/O.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from core.domain.clarifying import Answer, ClarifyingRound, answers_text
from core.domain.consultation import Role
from core.domain.round_markdown import is_round, read_round
from core.domain.typed_answers import NoSuchOption, read_line

ANSWER_COMMAND = "/answer"
KEY_PREFIX = "oai:"


class Next(enum.StrEnum):
    ROUND = "round"  # the next clarifying round (the final answer at the round limit)
    FINAL_NOW = "final_now"  # the user asked for the final answer now
    FOLLOW_UP = "follow_up"  # a question about the final answer


@dataclass(frozen=True, slots=True)
class Sent:
    """One message as the client sent it: its role (`system`, `user`, `assistant`) and text."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Turn:
    """A message of the rebuilt consultation, as the consultation stores it: a round's text
    without its closing line and its `questions`; answers by label as question–answer lines;
    `final_now` for a user's `/answer` (stored as the request for the answer); `key` for a
    user turn (see the module)."""

    role: Role
    text: str
    questions: ClarifyingRound | None = None
    final_now: bool = False
    key: str = ""


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """The consultation the client's conversation holds, up to its last user turn.

    `history`: its messages before that turn, the request first; `message`: the last user
    turn as typed (`answers`: the options its leading labels pick, `text` what follows
    them); `key`: that turn's key; `reply` the client's copy of the last assistant message
    (None before the first reply). `rounds_done` counts the replies up to the final answer
    (included), `follow_ups` the follow-ups answered after it.
    """

    request: str
    history: tuple[Turn, ...]
    message: str
    answers: tuple[Answer, ...]
    text: str
    key: str
    reply: str | None
    rounds_done: int
    complete: bool
    follow_ups: int
    next: Next
    max_rounds: int
    instructions: str | None

    @property
    def prior_key(self) -> str | None:
        """The key of the last user turn before `message` (None for a first message)."""
        keys = [turn.key for turn in self.history if turn.role is Role.USER]
        return keys[-1] if keys else None


class HistoryInvalid(ValueError):
    """The conversation cannot be a consultation; the message says why (for the client)."""

    def __init__(self, message: str, param: str = "messages") -> None:
        super().__init__(message)
        self.param = param


def rebuild(sent: Sequence[Sent], *, max_rounds: int, followup_limit: int, seed: str) -> Rebuilt:
    """The consultation `sent` holds (see the module); `seed` names the settings chosen
    (model, rounds), so a change of them makes other keys. Raises `HistoryInvalid` when no
    user message comes first, the last message is not the user's, or its labels name an
    option the last round does not have."""
    if max_rounds < 1:
        raise ValueError("max_rounds must be at least 1")
    instructions = "\n\n".join(
        m.text.strip() for m in sent if m.role == "system" and m.text.strip()
    )
    turns = _turns([m for m in sent if m.role != "system"])
    keys = _keys(sent, seed)
    if not turns or turns[0][0] is not Role.USER:
        raise HistoryInvalid("the first message that is not a system message must be the user's")
    if turns[-1][0] is not Role.USER:
        raise HistoryInvalid("the last message must be the user's")
    start = 0
    while True:
        found = _segment(turns[start:], keys[start:], max_rounds, followup_limit)
        if isinstance(found, int):
            start += found
            continue
        return _rebuilt(found, turns[start:], keys[start:], max_rounds, instructions or None)


@dataclass(frozen=True, slots=True)
class _State:
    history: tuple[Turn, ...]
    rounds_done: int
    complete: bool
    follow_ups: int
    last_round: ClarifyingRound | None


def _turns(sent: Sequence[Sent]) -> list[tuple[Role, str]]:
    """Consecutive messages of one role joined as one turn."""
    turns: list[tuple[Role, str]] = []
    for message in sent:
        role = Role.USER if message.role == "user" else Role.ASSISTANT
        if turns and turns[-1][0] is role:
            turns[-1] = (role, f"{turns[-1][1]}\n\n{message.text}")
        else:
            turns.append((role, message.text))
    return turns


def _keys(sent: Sequence[Sent], seed: str) -> list[str]:
    """Each non-system turn's key: the digest of the seed and everything sent up to the
    turn's last message."""
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass"))
    keys: list[str] = []
    role = None
    for message in sent:
        digest.update(b"\x00" + message.role.encode() + b"\x00")
        digest.update(message.text.encode("utf-8", "surrogatepass"))
        if message.role == "system":
            continue
        key = KEY_PREFIX + digest.copy().hexdigest()[:40]
        if message.role == role:
            keys[-1] = key
        else:
            keys.append(key)
        role = message.role
    return keys


def _segment(
    turns: Sequence[tuple[Role, str]], keys: Sequence[str], max_rounds: int, followup_limit: int
) -> _State | int:
    """The state of the consultation starting at `turns[0]`; or where the next one starts,
    when this one took its last follow-up before the last user turn."""
    history: list[Turn] = []
    rounds_done, complete, follow_ups = 0, False, 0
    last_round: ClarifyingRound | None = None
    for index, (role, text) in enumerate(turns[:-1]):
        if role is Role.USER:
            if index and complete and follow_ups >= followup_limit:
                return index
            if not index:  # the request, as written
                history.append(Turn(Role.USER, text, key=keys[index]))
                continue
            history.append(_user_turn(text, last_round, keys[index], not complete))
            continue
        if complete:
            follow_ups += 1
            history.append(Turn(Role.ASSISTANT, text))
            continue
        rounds_done += 1
        if is_round(text) and rounds_done < max_rounds:
            body, last_round = read_round(text)
            history.append(Turn(Role.ASSISTANT, body, last_round))
        else:
            complete, last_round = True, None
            history.append(Turn(Role.ASSISTANT, text))
    if len(turns) > 1 and complete and follow_ups >= followup_limit:
        return len(turns) - 1
    return _State(tuple(history), rounds_done, complete, follow_ups, last_round)


def _user_turn(text: str, last_round: ClarifyingRound | None, key: str, asking: bool) -> Turn:
    """A user turn of the history as stored: `/answer` marked, labels read as answers."""
    if asking and text.strip().lower() == ANSWER_COMMAND:
        return Turn(Role.USER, text, final_now=True, key=key)
    try:
        typed = read_line(text, last_round if asking else None)
    except NoSuchOption:
        return Turn(Role.USER, text, key=key)  # as typed: the client's words stand
    if typed.answers and last_round is not None:
        return Turn(
            Role.USER, answers_text(last_round, typed.answers, typed.text, author=None), key=key
        )
    return Turn(Role.USER, text, key=key)


def _rebuilt(
    state: _State,
    turns: Sequence[tuple[Role, str]],
    keys: Sequence[str],
    max_rounds: int,
    instructions: str | None,
) -> Rebuilt:
    message = turns[-1][1]
    answers: tuple[Answer, ...] = ()
    text = message
    if len(turns) == 1:
        next_ = Next.ROUND
    elif state.complete:
        next_ = Next.FOLLOW_UP
    elif message.strip().lower() == ANSWER_COMMAND:
        next_ = Next.FINAL_NOW
    else:
        next_ = Next.ROUND
        try:
            typed = read_line(message, state.last_round)
        except NoSuchOption as exc:
            raise HistoryInvalid(str(exc)) from None
        answers, text = typed.answers, typed.text
    reply = turns[-2][1] if len(turns) > 1 else None
    return Rebuilt(
        request=turns[0][1],
        history=state.history,
        message=message,
        answers=answers,
        text=text,
        key=keys[-1],
        reply=reply,
        rounds_done=state.rounds_done,
        complete=state.complete,
        follow_ups=state.follow_ups,
        next=next_,
        max_rounds=max_rounds,
        instructions=instructions,
    )
