"""The row mapping both stores share: the same columns in the same order,
`CONSULTATION_COLUMNS` for a consultation, `MESSAGE_INSERT_COLUMNS` for writing a message,
and the message read order of `message_from_row`; only the SQL dialect around them differs.

Text is written without NUL characters on every store: PostgreSQL cannot hold them in text
and SQLite can, so dropping them here makes a text read back the same anywhere. A message's
`ready_for_final` is a boolean on PostgreSQL and 0 or 1 on SQLite. A message's clarifying
round (`questions`) and a consultation's unsent picks (`picks`) are kept as the JSON their
`to_json` writes, a reply's knowledge-base sources as the JSON of
`core.domain.knowledge_sources.sources_to_json` (NULL: none) and the tools it used as the
JSON of `core.domain.tool_uses.uses_to_json` (NULL: none); a value that does not read back
as one (damaged, or written by a version that stored another shape) loads as None (no
sources, no tool uses), never failing the read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from core.domain.clarifying import ClarifyingRound, Picks
from core.domain.consultation import (
    Consultation,
    ConsultationSummary,
    Message,
    ModelOptions,
    Role,
    Status,
    Usage,
)
from core.domain.facts import facts_from_value, facts_value
from core.domain.knowledge_sources import sources_from_json, sources_to_json
from core.domain.listing import ListedConsultation
from core.domain.tool_uses import uses_from_json, uses_to_json

CONSULTATION_COLUMNS = (
    "id, chat_key, status, max_rounds, current_round, initial_request, role,"
    " system_prompt, options, created_at, last_activity_at, started_by, picks,"
    " memory_owner, memory_facts, follow_ups, person"
)
MESSAGE_INSERT_COLUMNS = (
    "consultation_id, seq, role, author, text, created_at,"
    " prompt_tokens, completion_tokens, tokens_estimated, turn_id, questions, ready_for_final,"
    " knowledge_sources, tool_uses"
)
MESSAGE_READ_COLUMNS = (
    "role, text, created_at, author, prompt_tokens, completion_tokens, tokens_estimated,"
    " turn_id, questions, ready_for_final, knowledge_sources, tool_uses"
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
        options_value(c.options),
        c.created_at,
        c.last_activity_at,
        c.started_by,
        picks_value(c.picks),
        c.memory_owner,
        facts_value([_text(f) or "" for f in c.memory_facts]),
        c.follow_ups,
        _text(c.person),
    )


def picks_value(picks: Picks | None) -> str | None:
    """The stored form of a consultation's unsent picks (its `picks` column)."""
    return None if picks is None else picks.to_json()


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
        None if m.questions is None else m.questions.to_json(),
        m.ready_for_final,
        sources_to_json(m.knowledge_sources),
        uses_to_json(m.tool_uses),
    )


def _text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", "")


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from the values of `MESSAGE_READ_COLUMNS`."""
    (
        role,
        text,
        created_at,
        author,
        prompt,
        completion,
        estimated,
        turn_id,
        questions,
        ready,
        cited,
        used,
    ) = row
    return Message(
        role=Role(role),
        text=text,
        created_at=created_at,
        author=author,
        usage=None if prompt is None else Usage(prompt, completion or 0, bool(estimated)),
        turn_id=turn_id,
        questions=ClarifyingRound.from_json(questions),
        ready_for_final=bool(ready),
        knowledge_sources=sources_from_json(cited),
        tool_uses=uses_from_json(used),
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
        picks=Picks.from_json(row[12]),
        memory_owner=row[13],
        memory_facts=facts_from_value(row[14]),
        follow_ups=row[15],
        person=row[16],
        messages=[message_from_row(m) for m in messages],
    )


def summary_from_row(row: Sequence[Any]) -> ConsultationSummary:
    """A summary from a row of id, created_at, last_activity_at, the start of
    initial_request, status, current_round and max_rounds (each backend's `recent`)."""
    return ConsultationSummary(
        id=row[0],
        created_at=row[1],
        last_activity_at=row[2],
        request=row[3],
        status=Status(row[4]),
        current_round=row[5],
        max_rounds=row[6],
    )


def options_value(options: ModelOptions) -> str:
    """The options as the `consultations.options` column keeps them (JSON text)."""
    return json.dumps(dataclasses.asdict(options))


def options_from_json(raw: str) -> ModelOptions:
    data = json.loads(raw) if raw else {}
    known = {f.name for f in dataclasses.fields(ModelOptions)}
    # Keys written by a newer version are ignored rather than failing the load.
    return ModelOptions(**{k: v for k, v in data.items() if k in known})


def listed_from_row(row: Sequence[Any]) -> ListedConsultation:
    """A row of the console's consultation list (`storage.*.admin.list_consultations`)."""
    return ListedConsultation(
        id=row[0],
        chat_key=row[1],
        status=Status(row[2]),
        created_at=row[3],
        last_activity_at=row[4],
        request=row[5],
        current_round=row[6],
        max_rounds=row[7],
        follow_ups=row[8],
    )
