"""Domain values to table rows and back, the same for every store.

Both stores keep the same columns in the same order: `CONSULTATION_COLUMNS` for a
consultation, `MESSAGE_INSERT_COLUMNS` for writing a message, and the message read order
of `message_from_row`. Only the SQL dialect around them differs.

Text is written without NUL characters on every store: PostgreSQL cannot hold them in
text and SQLite can, so dropping them here makes a text read back the same anywhere.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from core.models import Consultation, Message, ModelOptions, Role, Status, Usage

CONSULTATION_COLUMNS = (
    "id, chat_key, status, max_rounds, current_round, initial_request, role,"
    " system_prompt, options, created_at, last_activity_at, started_by"
)
MESSAGE_INSERT_COLUMNS = (
    "consultation_id, seq, role, author, text, created_at,"
    " prompt_tokens, completion_tokens, tokens_estimated, turn_id"
)
MESSAGE_READ_COLUMNS = (
    "role, text, created_at, author, prompt_tokens, completion_tokens, tokens_estimated, turn_id"
)


def consultation_values(c: Consultation) -> tuple[Any, ...]:
    """The values of `CONSULTATION_COLUMNS`, in order."""
    return (
        c.id,
        c.chat_key,
        c.status.value,
        c.max_rounds,
        c.current_round,
        _text(c.initial_request),
        _text(c.role),
        _text(c.system_prompt),
        json.dumps(dataclasses.asdict(c.options)),
        c.created_at,
        c.last_activity_at,
        c.started_by,
    )


def message_values(m: Message) -> tuple[Any, ...]:
    """The values of `MESSAGE_INSERT_COLUMNS` after consultation_id and seq, in order."""
    usage = m.usage
    return (
        m.role.value,
        _text(m.author),
        _text(m.text),
        m.created_at,
        None if usage is None else usage.prompt_tokens,
        None if usage is None else usage.completion_tokens,
        None if usage is None else usage.estimated,
        m.turn_id,
    )


def _text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", "")


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from the values of `MESSAGE_READ_COLUMNS`."""
    role, text, created_at, author, prompt, completion, estimated, turn_id = row
    return Message(
        role=Role(role),
        text=text,
        created_at=created_at,
        author=author,
        usage=None if prompt is None else Usage(prompt, completion or 0, bool(estimated)),
        turn_id=turn_id,
    )


def consultation_from_row(row: Sequence[Any], messages: Iterable[Sequence[Any]]) -> Consultation:
    """A consultation from the values of `CONSULTATION_COLUMNS` and its message rows."""
    return Consultation(
        id=row[0],
        chat_key=row[1],
        status=Status(row[2]),
        max_rounds=row[3],
        current_round=row[4],
        initial_request=row[5],
        role=row[6],
        system_prompt=row[7],
        options=options_from_json(row[8]),
        created_at=row[9],
        last_activity_at=row[10],
        started_by=row[11],
        messages=[message_from_row(m) for m in messages],
    )


def options_from_json(raw: str) -> ModelOptions:
    data = json.loads(raw) if raw else {}
    known = {f.name for f in dataclasses.fields(ModelOptions)}
    # Keys written by a newer version are ignored rather than failing the load.
    return ModelOptions(**{k: v for k, v in data.items() if k in known})
