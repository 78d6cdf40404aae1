"""All SQL of the store, and the mapping between rows and domain values.

Invariant: every value reaches SQLite as a bound parameter; the only text
formatted into SQL is fixed column names written in this module. Every
function here is synchronous and runs on a connection's thread inside a
transaction opened by `storage.sqlite.batch`; writes raise `SessionNotFound` for a
missing consultation (and `record_reply` raises `TurnSuperseded` when its
compare-and-set fails) before changing anything, so their savepoint is rolled back
and the writes batched with them still commit.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from core.domain.consultation import (
    SUMMARY_CHARS,
    ChatSettings,
    Consultation,
    ConsultationSummary,
    Message,
    Status,
    TurnRecord,
    locate_turn,
)
from core.domain.errors import ActiveConsultationExists, SessionNotFound, TurnSuperseded
from core.domain.usage import Charge
from storage.idempotency import Statement
from storage.rows import (
    MESSAGE_READ_COLUMNS,
    consultation_from_row,
    consultation_values,
    message_values,
    summary_from_row,
)
from storage.sqlite.placeholders import sqlite_sql
from storage.sqlite.usage import add_usage
from storage.statements.consultations import (
    INSERT_CONSULTATION,
    INSERT_MESSAGE,
    INSERT_MESSAGE_VALUES,
    SELECT_ACTIVE,
    SELECT_BY_ID,
    SELECT_CHAT_SETTINGS,
    SELECT_LATEST,
    SELECT_LATEST_STATUS,
    SELECT_RECENT,
    UPSERT_CHAT_SETTINGS,
    WITHDRAW_EMPTY,
    WITHDRAW_FIRST,
    WITHDRAW_MESSAGE,
)

_SELECT_ACTIVE = sqlite_sql(SELECT_ACTIVE)
_SELECT_BY_ID = sqlite_sql(SELECT_BY_ID)
_SELECT_LATEST = sqlite_sql(SELECT_LATEST)
_SELECT_MESSAGES = (
    f"SELECT {MESSAGE_READ_COLUMNS} FROM messages WHERE consultation_id = ? ORDER BY seq"
)
# The consultation of the chat holding a user message with a turn id (the partial index on
# turn_id finds the message; an update id is handled in one chat, so at most one matches).
_SELECT_TURN = (
    "SELECT c.id FROM messages m JOIN consultations c ON c.id = m.consultation_id"
    " WHERE m.turn_id = ? AND m.role = 'user' AND c.chat_key = ?"
    " ORDER BY c.created_at DESC LIMIT 1"
)
_SELECT_RECENT = sqlite_sql(SELECT_RECENT)
_SELECT_LATEST_STATUS = sqlite_sql(SELECT_LATEST_STATUS)
_SELECT_CHAT_SETTINGS = sqlite_sql(SELECT_CHAT_SETTINGS)
_UPSERT_CHAT_SETTINGS = sqlite_sql(UPSERT_CHAT_SETTINGS)
_INSERT_CONSULTATION = sqlite_sql(INSERT_CONSULTATION)
_INSERT_MESSAGE_VALUES = sqlite_sql(INSERT_MESSAGE_VALUES)
_WITHDRAW_MESSAGE = sqlite_sql(WITHDRAW_MESSAGE)
_WITHDRAW_EMPTY = sqlite_sql(WITHDRAW_EMPTY)
_WITHDRAW_FIRST = sqlite_sql(WITHDRAW_FIRST)

# The position is the consultation's `last_seq`, advanced by the UPDATE of its row that comes
# first in the same transaction; writes never interleave, so it is race-free.
_NEXT_POSITION = "last_seq = last_seq + 1"
"""Advances the consultation's `last_seq` to the position of the message appended next."""
_APPEND_MESSAGE = (
    f"{INSERT_MESSAGE} SELECT ?, last_seq, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
    " FROM consultations WHERE id = ?"
)


# -- writes (run on the connection's thread, inside a transaction) -----------------------


def insert_consultation(db: sqlite3.Connection, c: Consultation) -> None:
    try:
        db.execute(_INSERT_CONSULTATION, (*consultation_values(c), len(c.messages)))
    except sqlite3.IntegrityError as error:
        if c.status is Status.ACTIVE and "chat_key" in str(error):
            raise ActiveConsultationExists(c.chat_key) from error
        raise
    db.executemany(
        _INSERT_MESSAGE_VALUES,
        [(c.id, seq, *message_values(m)) for seq, m in enumerate(c.messages, start=1)],
    )


def append_message(
    db: sqlite3.Connection, consultation_id: str, message: Message, **columns: Any
) -> None:
    """Append `message` and set `columns` on its consultation."""
    _update(db, consultation_id, _NEXT_POSITION, **columns)
    db.execute(_APPEND_MESSAGE, (consultation_id, *message_values(message), consultation_id))


def record_reply(
    db: sqlite3.Connection,
    consultation_id: str,
    message: Message,
    *,
    expected_round: int,
    charge: Charge | None = None,
    **columns: Any,
) -> None:
    """Append the reply and set `columns` only if the consultation is still ACTIVE at
    `expected_round`; otherwise write nothing and raise `TurnSuperseded`.

    The check and the update are one UPDATE inside the write transaction, so two
    writers (two processes) recording the same round cannot both succeed.
    """
    assignments = ", ".join([_NEXT_POSITION, *(f"{name} = ?" for name in columns)])
    cursor = db.execute(
        f"UPDATE consultations SET {assignments}"
        " WHERE id = ? AND current_round = ? AND status = 'active'",
        (*columns.values(), consultation_id, expected_round),
    )
    if cursor.rowcount == 0:
        if db.execute("SELECT 1 FROM consultations WHERE id = ?", (consultation_id,)).fetchone():
            raise TurnSuperseded(
                f"consultation {consultation_id} moved on from round {expected_round}"
            )
        raise SessionNotFound(consultation_id)
    db.execute(_APPEND_MESSAGE, (consultation_id, *message_values(message), consultation_id))
    if charge is not None:
        add_usage(db, [charge])


def record_follow_up(
    db: sqlite3.Connection,
    consultation_id: str,
    message: Message,
    *,
    expected_follow_ups: int,
    last_activity_at: float,
    charge: Charge | None = None,
) -> None:
    """Append a follow-up's answer and count it only if the consultation is still COMPLETE
    with `expected_follow_ups` answered; otherwise write nothing and raise
    `TurnSuperseded` (one UPDATE checks and counts, as `record_reply` does)."""
    cursor = db.execute(
        f"UPDATE consultations SET {_NEXT_POSITION}, follow_ups = follow_ups + 1,"
        " last_activity_at = ? WHERE id = ? AND follow_ups = ? AND status = 'complete'",
        (last_activity_at, consultation_id, expected_follow_ups),
    )
    if cursor.rowcount == 0:
        if db.execute("SELECT 1 FROM consultations WHERE id = ?", (consultation_id,)).fetchone():
            raise TurnSuperseded(
                f"consultation {consultation_id} moved on from follow-up {expected_follow_ups}"
            )
        raise SessionNotFound(consultation_id)
    db.execute(_APPEND_MESSAGE, (consultation_id, *message_values(message), consultation_id))
    if charge is not None:
        add_usage(db, [charge])


def update_consultation(db: sqlite3.Connection, consultation_id: str, **columns: Any) -> None:
    """UPDATE the given columns (fixed names from this package, never user input)."""
    _update(db, consultation_id, **columns)


def _update(db: sqlite3.Connection, consultation_id: str, *fixed: str, **columns: Any) -> None:
    """UPDATE the consultation: the `fixed` assignments (SQL written in this module) and the
    given columns; `SessionNotFound` when it is gone."""
    assignments = ", ".join([*fixed, *(f"{name} = ?" for name in columns)])
    cursor = db.execute(
        f"UPDATE consultations SET {assignments} WHERE id = ?",
        (*columns.values(), consultation_id),
    )
    if cursor.rowcount == 0:
        raise SessionNotFound(consultation_id)


def upsert_chat_settings(db: sqlite3.Connection, chat_key: str, s: ChatSettings) -> None:
    db.execute(
        _UPSERT_CHAT_SETTINGS,
        (chat_key, s.max_rounds, s.role, s.system_prompt, s.language, s.model, time.time()),
    )


# -- reads (run on the reader's thread, inside one read transaction) ---------------------


def load_active(db: sqlite3.Connection, chat_key: str) -> Consultation | None:
    return _load(db, _SELECT_ACTIVE, chat_key)


def load_by_id(db: sqlite3.Connection, consultation_id: str) -> Consultation | None:
    return _load(db, _SELECT_BY_ID, consultation_id)


def load_latest(db: sqlite3.Connection, chat_key: str) -> Consultation | None:
    return _load(db, _SELECT_LATEST, chat_key)


def recent(db: sqlite3.Connection, chat_key: str, limit: int) -> list[ConsultationSummary]:
    """The chat's newest consultations, read backwards along `consultations_chat_created`."""
    rows = db.execute(_SELECT_RECENT, (SUMMARY_CHARS, chat_key, limit)).fetchall()
    return [summary_from_row(row) for row in rows]


def find_turn(db: sqlite3.Connection, chat_key: str, turn_id: str) -> TurnRecord | None:
    """The chat's consultation holding the turn, and where the turn stands (one snapshot)."""
    row = db.execute(_SELECT_TURN, (turn_id, chat_key)).fetchone()
    if row is None:
        return None
    consultation = load_by_id(db, row[0])
    return None if consultation is None else locate_turn(consultation, turn_id)


def load_turn(
    db: sqlite3.Connection, chat_key: str, turn_id: str | None
) -> tuple[TurnRecord | None, Consultation | None]:
    """The turn (when a turn id is given) and the active consultation (one snapshot)."""
    found = None if turn_id is None else find_turn(db, chat_key, turn_id)
    return found, None if found is not None else load_active(db, chat_key)


def latest_status(db: sqlite3.Connection, chat_key: str) -> Status | None:
    row = db.execute(_SELECT_LATEST_STATUS, (chat_key,)).fetchone()
    return None if row is None else Status(row[0])


def load_chat_settings(db: sqlite3.Connection, chat_key: str) -> ChatSettings:
    row = db.execute(_SELECT_CHAT_SETTINGS, (chat_key,)).fetchone()
    if row is None:
        return ChatSettings()
    max_rounds, role, system_prompt, language, model = row
    return ChatSettings(
        max_rounds=max_rounds,
        role=role,
        system_prompt=system_prompt,
        language=language,
        model=model,
    )


def _load(db: sqlite3.Connection, select: str, key: str) -> Consultation | None:
    """One query for the consultation, one for its messages (run inside one read snapshot)."""
    row = db.execute(select, (key,)).fetchone()
    if row is None:
        return None
    return consultation_from_row(row, db.execute(_SELECT_MESSAGES, (row[0],)))


# -- the statements both stores share (`storage.statements`) --------------------------------


def withdraw_turn(db: sqlite3.Connection, consultation_id: str, turn_id: str) -> bool:
    """Take back the turn's user message if nothing answered it (the withdrawing statements
    of `storage.statements.consultations`); True when one was taken back."""
    row = db.execute(_WITHDRAW_MESSAGE, (consultation_id, turn_id)).fetchone()
    if row is None:
        return False
    db.execute(_WITHDRAW_EMPTY, (consultation_id,))
    db.execute(_WITHDRAW_FIRST, (consultation_id, row[0]))
    return True


def run_key_statements(
    statements: Sequence[Statement], db: sqlite3.Connection
) -> Sequence[Any] | None:
    """Run idempotency-key statements in order (within the caller's transaction); the
    first row the last one returned. A session the key names that is gone (purged
    meanwhile) raises `SessionNotFound`."""
    row = None
    for text, args in statements:
        try:
            row = db.execute(sqlite_sql(text), args).fetchone()
        except sqlite3.IntegrityError as error:
            raise SessionNotFound("session not found") from error
    return row
