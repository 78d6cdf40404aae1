"""The PostgreSQL store's own SQL: its hot statements, each written for a whole batch of
calls, and the consultation reads and writes only PostgreSQL says this way (the SQL both
stores run is in `storage.statements`).

A turn reads its chat's state once (`load_turns`) and appends two messages (the user's,
then the reply: `append_messages`). Under load many chats do so at once; with
`storage.postgres.batch.BatchedStatement` the calls made while one statement runs go together
in the next, so a round trip (and a commit) carries the turns of many chats.

Invariants:
- One statement per batch: one snapshot for every read, one transaction for every write.
- Appending locks the consultations' rows in id order (so two batches from two
  processes never deadlock), takes each message's position from its row's newest version
  (`last_seq`) and stores it only if the row's guard holds: for a reply, that the
  consultation is still ACTIVE at the round the turn started from (a compare-and-set,
  so two writers never both advance one round).
- Each call gets its own answer. A statement never holds two appends to one consultation
  (its UPDATE would advance the row once for both): a batch that does is written as
  consecutive statements, in the batch's order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from core.domain.consultation import Consultation, Message, Status, TurnRecord, locate_turn
from core.domain.errors import SessionNotFound
from core.domain.usage import Charge
from storage.idempotency import Statement
from storage.postgres.usage import CHARGE_COLUMNS, CHARGE_TYPES, charge_items, charge_values
from storage.rows import (
    CONSULTATION_COLUMNS,
    MESSAGE_INSERT_COLUMNS,
    MESSAGE_READ_COLUMNS,
    consultation_from_row,
    message_values,
)
from storage.statements.consultations import WITHDRAW_EMPTY, WITHDRAW_FIRST, WITHDRAW_MESSAGE

_QUALIFIED = ", ".join(f"c.{column.strip()}" for column in CONSULTATION_COLUMNS.split(","))


@dataclass(frozen=True, slots=True)
class RoundGuard:
    """Store the reply only while the consultation is ACTIVE at `expected_round`; then
    make it `current_round` with `status`."""

    expected_round: int
    current_round: int
    status: Status


@dataclass(frozen=True, slots=True)
class Append:
    consultation_id: str
    message: Message
    last_activity_at: float
    guard: RoundGuard | None = None
    charge: Charge | None = None  # counted when the message is stored


@dataclass(frozen=True, slots=True)
class Appended:
    stored: bool
    known: bool  # the consultation exists (stored is False and known True: a failed guard)


async def load_turns(
    connection: asyncpg.Connection, requests: Sequence[tuple[str, str | None]]
) -> list[tuple[TurnRecord | None, Consultation | None]]:
    """For each (chat key, turn id or None): the turn stored with that id, else the
    chat's active consultation (see `ConsultationStore.load_turn`)."""
    rows = await connection.fetch(
        _LOAD_TURNS, [chat for chat, _ in requests], [turn for _, turn in requests]
    )
    turns: dict[int, TurnRecord] = {}
    active: dict[int, Consultation] = {}
    for row in rows:
        n = int(row["n"]) - 1
        consultation = consultation_from_row(row, row["messages"])
        turn_id = requests[n][1]
        if row["which"] == 1 and turn_id is not None:
            if (found := locate_turn(consultation, turn_id)) is not None:
                turns[n] = found
        else:
            active[n] = consultation
    return [(turns[n], None) if n in turns else (None, active.get(n)) for n in range(len(requests))]


async def append_messages(
    connection: asyncpg.Connection, appends: Sequence[Append]
) -> list[Appended]:
    """Each append's outcome, in order; one statement per run of distinct consultations."""
    outcomes: list[Appended] = []
    for run in _distinct_runs(appends):
        outcomes.extend(await _append_run(connection, run))
    return outcomes


def _distinct_runs(appends: Sequence[Append]) -> Iterator[list[Append]]:
    """`appends` cut into consecutive runs in which no consultation appears twice."""
    run: list[Append] = []
    seen: set[str] = set()
    for append in appends:
        if append.consultation_id in seen:
            yield run
            run, seen = [], set()
        run.append(append)
        seen.add(append.consultation_id)
    if run:
        yield run


async def _append_run(connection: asyncpg.Connection, appends: list[Append]) -> list[Appended]:
    columns = [list(column) for column in zip(*map(_values, appends), strict=True)]
    rows = await connection.fetch(_APPEND_MESSAGES, *columns)
    outcome: defaultdict[int, Appended] = defaultdict(lambda: Appended(False, False))
    for row in rows:
        outcome[int(row["n"]) - 1] = Appended(bool(row["stored"]), bool(row["known"]))
    return [outcome[n] for n in range(len(appends))]


def _values(append: Append) -> tuple[object, ...]:
    """One append as the statement's parameters $1-$29, in order."""
    guard = append.guard
    return (
        append.consultation_id,
        *message_values(append.message),
        append.last_activity_at,
        guard is not None,
        None if guard is None else guard.current_round,
        None if guard is None else guard.status.value,
        None if guard is None else guard.expected_round,
        *charge_values(append.charge),
    )


MESSAGES_OF_FOUND = (
    # The messages of the consultation row named `found`, in order, as an array of rows (read
    # in the same statement, so from the same snapshot).
    f"ARRAY(SELECT ROW({MESSAGE_READ_COLUMNS}) FROM messages m"
    " WHERE m.consultation_id = found.id ORDER BY m.seq) AS messages"
)
_CHARGE_ARRAYS_19 = ", ".join(f"${19 + n}::{t}[]" for n, t in enumerate(CHARGE_TYPES))
_CHARGE_PARAMETERS_16 = ", ".join(
    f"${16 + n}::{t} AS {c.strip()}"
    for n, (t, c) in enumerate(zip(CHARGE_TYPES, CHARGE_COLUMNS.split(","), strict=True))
)
_LOAD_TURNS = (
    # $1 chat keys, $2 turn ids (NULL: none): per request n, the consultation holding the
    # turn (which = 1) and the chat's active one (which = 2), each with its messages.
    f"SELECT found.*, {MESSAGES_OF_FOUND}, request.n"
    " FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS request (chat_key, turn_id, n)"
    " CROSS JOIN LATERAL ("
    f"(SELECT {_QUALIFIED}, 1 AS which FROM messages m"
    " JOIN consultations c ON c.id = m.consultation_id"
    " WHERE request.turn_id IS NOT NULL AND m.turn_id = request.turn_id AND m.role = 'user'"
    " AND c.chat_key = request.chat_key ORDER BY c.created_at DESC LIMIT 1)"
    f" UNION ALL (SELECT {_QUALIFIED}, 2 AS which FROM consultations c"
    " WHERE c.chat_key = request.chat_key AND c.status = 'active')"
    ") AS found"
)
_APPEND_MESSAGES = (
    "WITH input AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"
    " $5::double precision[], $6::integer[], $7::integer[], $8::boolean[], $9::text[],"
    " $10::text[], $11::boolean[], $12::text[], $13::text[], $14::double precision[],"
    f" $15::boolean[], $16::integer[], $17::text[], $18::integer[], {_CHARGE_ARRAYS_19})"
    " WITH ORDINALITY AS i (id, role, author, text, created_at, prompt_tokens,"
    " completion_tokens, tokens_estimated, turn_id, questions, ready_for_final,"
    " knowledge_sources, tool_uses, activity,"
    f" guarded, new_round, new_status, expected_round, {CHARGE_COLUMNS}, n)),"
    # Lock the rows in id order first: two batches never wait for each other in a circle.
    " locked AS (SELECT c.id FROM consultations c WHERE c.id IN (SELECT id FROM input)"
    " ORDER BY c.id FOR UPDATE),"
    " touched AS (UPDATE consultations c SET last_activity_at = i.activity,"
    " current_round = CASE WHEN i.guarded THEN i.new_round ELSE c.current_round END,"
    " status = CASE WHEN i.guarded THEN i.new_status ELSE c.status END,"
    # A reply that ends the consultation (its final answer) ends it now.
    " ended_at = CASE WHEN i.guarded AND i.new_status <> 'active' THEN i.activity"
    " ELSE c.ended_at END,"
    # The next position: the row's counter, or past the messages a worker of a version
    # before the counter appended (rolling upgrades).
    " last_seq = GREATEST(c.last_seq, COALESCE((SELECT MAX(seq) FROM messages m"
    " WHERE m.consultation_id = c.id), 0)) + 1"
    " FROM input i JOIN locked l ON l.id = i.id WHERE c.id = i.id AND (NOT i.guarded"
    " OR (c.current_round = i.expected_round AND c.status = 'active'))"
    " RETURNING c.id, c.last_seq),"
    f" appended AS (INSERT INTO messages ({MESSAGE_INSERT_COLUMNS})"
    " SELECT t.id, t.last_seq, i.role, i.author, i.text, i.created_at, i.prompt_tokens,"
    " i.completion_tokens, i.tokens_estimated, i.turn_id, i.questions, i.ready_for_final,"
    " i.knowledge_sources, i.tool_uses FROM touched t"
    " JOIN input i ON i.id = t.id RETURNING consultation_id),"
    # The charges of the replies stored: counted in the same transaction.
    f" {charge_items('SELECT i.* FROM input i JOIN touched t ON t.id = i.id')}"
    " SELECT i.n, EXISTS (SELECT 1 FROM appended a WHERE a.consultation_id = i.id) AS stored,"
    " EXISTS (SELECT 1 FROM consultations c WHERE c.id = i.id) AS known FROM input i"
)
RECORD_FOLLOW_UP = (
    # $1 consultation id, $2 last activity, $3 follow-ups expected, $4-$15 the message's
    # values (`message_values`): counted and appended only while COMPLETE at $3; $16-$26
    # its charge (`charge_values`), added with it.
    "WITH touched AS (UPDATE consultations c SET follow_ups = c.follow_ups + 1,"
    " last_activity_at = $2, last_seq = GREATEST(c.last_seq, COALESCE((SELECT MAX(seq)"
    " FROM messages m WHERE m.consultation_id = c.id), 0)) + 1"
    " WHERE c.id = $1 AND c.follow_ups = $3::integer AND c.status = 'complete'"
    " RETURNING c.id, c.last_seq),"
    f" appended AS (INSERT INTO messages ({MESSAGE_INSERT_COLUMNS})"
    " SELECT t.id, t.last_seq, $4::text, $5::text, $6::text, $7::double precision,"
    " $8::integer, $9::integer, $10::boolean, $11::text, $12::text, $13::boolean,"
    " $14::text, $15::text FROM touched t"
    " RETURNING consultation_id),"
    f" {charge_items(f'SELECT {_CHARGE_PARAMETERS_16} FROM touched')}"
    " SELECT EXISTS (SELECT 1 FROM appended) AS stored,"
    " EXISTS (SELECT 1 FROM consultations WHERE id = $1) AS known"
)
"""Append a follow-up's answer and count it, as a compare-and-set on the count."""


# -- single consultations (`storage.postgres.store`) ------------------------------------

_WITH_MESSAGES = f"SELECT found.*, {MESSAGES_OF_FOUND} FROM ({{select}}) AS found"
"""A consultation row with its messages, in one statement (so from one snapshot, in one
round trip): `select` yields consultation columns; its messages come as an array of rows."""


async def load_consultation(
    connection: asyncpg.Connection, select: str, *args: object
) -> Consultation | None:
    """The consultation `select` finds, with its messages (one statement)."""
    row = await connection.fetchrow(_WITH_MESSAGES.format(select=select), *args)
    return None if row is None else consultation_from_row(row, row["messages"])


async def update_consultation(
    connection: asyncpg.Connection, consultation_id: str, **columns: Any
) -> None:
    """UPDATE the given columns (fixed names from this package, never user input);
    `SessionNotFound` when the consultation is gone."""
    assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(columns, start=2))
    updated = await connection.fetchval(
        f"UPDATE consultations SET {assignments} WHERE id = $1 RETURNING 1",
        consultation_id,
        *columns.values(),
    )
    if updated is None:
        raise SessionNotFound(consultation_id)


async def withdraw_turn(connection: asyncpg.Connection, consultation_id: str, turn_id: str) -> bool:
    """Take back the turn's user message if nothing answered it (the withdrawing statements
    of `storage.statements.consultations`, in the caller's transaction); True when one was
    taken back."""
    seq = await connection.fetchval(WITHDRAW_MESSAGE, consultation_id, turn_id)
    if seq is None:
        return False
    await connection.execute(WITHDRAW_EMPTY, consultation_id)
    await connection.execute(WITHDRAW_FIRST, consultation_id, seq)
    return True


async def run_key_statements(
    connection: asyncpg.Connection, statements: Sequence[Statement]
) -> Sequence[Any] | None:
    """Idempotency-key statements in order, in the caller's transaction; the first row the
    last one returned. A session the key names that was purged raises `SessionNotFound`."""
    row = None
    for text, args in statements:
        try:
            row = await connection.fetchrow(text, *args)
        except asyncpg.ForeignKeyViolationError as error:
            raise SessionNotFound("session not found") from error
    return row
