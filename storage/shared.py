"""What both stores share: the row mapping, the start-up failure, the update-id bounds and
the API's idempotency keys (their records, statements and methods: `IdempotencyKeys`, which
each store runs in its own dialect).

Row mapping: both stores keep the same columns in the same order: `CONSULTATION_COLUMNS`
for a consultation, `MESSAGE_INSERT_COLUMNS` for writing a message, and the message read
order of `message_from_row`. Only the SQL dialect around them differs. Text is written
without NUL characters on every store: PostgreSQL cannot hold them in text and SQLite
can, so dropping them here makes a text read back the same anywhere. A message's
`ready_for_final` is a boolean on PostgreSQL and 0 or 1 on SQLite. A message's
clarifying round (`questions`) and a consultation's unsent picks (`picks`) are kept as
the JSON their `to_json` writes; a value that does not read back as one (damaged, or
written by a version that stored another shape) loads as None, never failing the read.

Telegram update ids (the webhook's de-duplication, table `telegram_updates`): recording an
id answers "new" in the same write, so two deliveries of one update, even at the same
moment, are answered "new" exactly once. Ids are kept for `KEEP_SECONDS` and at most
`KEEP_IDS` of them; each write deletes what fell out of both bounds through indexes, so it
costs O(log n) and the table never grows past the bounds.

Idempotency keys (table `idempotency_keys`):
- a key is claimed by one attempt at a time, in one statement (`INSERT … ON CONFLICT DO
  UPDATE … WHERE … RETURNING`): the first claim inserts the row, and a later attempt
  with the same request takes it over only when no reply is stored and no live lease
  holds it (its owner failed and released it, or died and let the lease run out);
- the row's `owner` and `lease_until` name the attempt answering it; only that owner
  renews, releases or attaches a session to it;
- its response is written at most once and never changed, so a retry always gets the
  reply of the round the key first answered. It is the body as it was sent, with what
  the session does not keep (the provider's model name, citations, notices, what was
  read from files); a reply the session holds but the key never got (the process
  stopped in between) is found in the session by its message's turn id;
- rows belong to a session and go with it (`ON DELETE CASCADE` when the retention purge
  deletes it); a claim released before any session was opened is deleted at once, and
  one whose holder died before opening a session goes with the retention purge.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

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
from core.domain.errors import StoreUnavailable
from core.domain.facts import facts_from_value, facts_value
from core.domain.listing import ListedConsultation


class DatabaseUnusable(StoreUnavailable):
    """The database cannot be opened at all: start-up must stop with this message."""


# -- rows ----------------------------------------------------------------------------------

CONSULTATION_COLUMNS = (
    "id, chat_key, status, max_rounds, current_round, initial_request, role,"
    " system_prompt, options, created_at, last_activity_at, started_by, picks,"
    " memory_owner, memory_facts, follow_ups, person"
)
MESSAGE_INSERT_COLUMNS = (
    "consultation_id, seq, role, author, text, created_at,"
    " prompt_tokens, completion_tokens, tokens_estimated, turn_id, questions, ready_for_final"
)
MESSAGE_READ_COLUMNS = (
    "role, text, created_at, author, prompt_tokens, completion_tokens, tokens_estimated,"
    " turn_id, questions, ready_for_final"
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
    )


def _text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", "")


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from the values of `MESSAGE_READ_COLUMNS`."""
    role, text, created_at, author, prompt, completion, estimated, turn_id, questions, ready = row
    return Message(
        role=Role(role),
        text=text,
        created_at=created_at,
        author=author,
        usage=None if prompt is None else Usage(prompt, completion or 0, bool(estimated)),
        turn_id=turn_id,
        questions=ClarifyingRound.from_json(questions),
        ready_for_final=bool(ready),
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


# -- Telegram update ids ------------------------------------------------------------------

KEEP_SECONDS = 24 * 3600
"""Telegram gives up redelivering an update well within a day."""

KEEP_IDS = 1_000_000
"""update_ids are consecutive, so this keeps the last million (~40 MB at most)."""


# -- forgotten memory -----------------------------------------------------------------------

FORGET_IN_CONSULTATIONS = (
    "UPDATE consultations SET memory_owner = NULL, memory_facts = NULL"
    " WHERE person = $1 AND memory_owner IS NOT NULL"
)
"""A person's memory forgotten leaves none in their consultations, whatever their status:
the facts one read when it started are no longer sent to the model in its later rounds,
and it notes no new ones when it completes (it uses no memory from then on). One read of
`consultations_person`."""


# -- withdrawn turns ------------------------------------------------------------------------

WITHDRAW_MESSAGE = (
    "DELETE FROM messages WHERE consultation_id = $1 AND turn_id = $2 AND role = 'user'"
    " AND NOT EXISTS (SELECT 1 FROM messages a WHERE a.consultation_id = $1"
    " AND a.role = 'assistant' AND a.seq > messages.seq)"
    " RETURNING seq"
)
"""Delete a turn's user message if no reply followed it; its position when one went."""
WITHDRAW_EMPTY = (
    "DELETE FROM consultations WHERE id = $1"
    " AND NOT EXISTS (SELECT 1 FROM messages WHERE consultation_id = $1)"
)
"""A consultation whose only message was withdrawn goes too (nothing of it is left)."""
WITHDRAW_FIRST = (
    "UPDATE consultations SET initial_request = (SELECT text FROM messages"
    " WHERE consultation_id = $1 AND role = 'user' ORDER BY seq LIMIT 1)"
    " WHERE id = $1 AND $2 < (SELECT MIN(seq) FROM messages"
    " WHERE consultation_id = $1 AND role = 'user')"
)
"""When the withdrawn message was the first one ($2 its position), the next user message
becomes the request the final round is reminded of."""


# -- idempotency keys -----------------------------------------------------------------------


class KeyRecord(NamedTuple):
    """A claimed key: the request it was first sent with, its session (None before one was
    opened), its reply (or None), and until when its current owner's lease runs (None:
    nobody is answering it)."""

    fingerprint: str
    session_id: str | None
    response: str | None
    lease_until: float | None


class Claimed(NamedTuple):
    """A key this attempt now holds: the session an earlier attempt opened (or None)."""

    session_id: str | None


CLAIM = (
    "INSERT INTO idempotency_keys (client, key, fingerprint, created_at, owner, lease_until)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (client, key) DO UPDATE"
    " SET owner = excluded.owner, lease_until = excluded.lease_until"
    " WHERE idempotency_keys.fingerprint = excluded.fingerprint"
    " AND idempotency_keys.response IS NULL"
    " AND (idempotency_keys.lease_until IS NULL OR idempotency_keys.lease_until < $4)"
    " RETURNING session_id"
)
"""Claim a key, or take over an abandoned claim of the same request (both stores)."""

FIND = (
    "SELECT fingerprint, session_id, response, lease_until FROM idempotency_keys"
    " WHERE client = $1 AND key = $2"
)

RENEW = (
    "UPDATE idempotency_keys SET lease_until = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL RETURNING 1"
)

ATTACH = (
    "UPDATE idempotency_keys SET session_id = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL RETURNING 1"
)

RELEASE_UNOPENED = (
    "DELETE FROM idempotency_keys"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND session_id IS NULL"
)

RELEASE = (
    "UPDATE idempotency_keys SET owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND owner = $3"
)

MOVE_CHAT_USAGE = (
    "INSERT INTO usage_daily (scope_kind, scope_key, day, model, kind, prompt_tokens,"
    " completion_tokens, calls, estimated_calls, cost)"
    " SELECT scope_kind, $2, day, model, kind, prompt_tokens, completion_tokens, calls,"
    " estimated_calls, cost FROM usage_daily WHERE scope_kind = 'chat' AND scope_key = $1"
    " ON CONFLICT (scope_kind, scope_key, day, model, kind) DO UPDATE SET"
    " prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,"
    " calls = usage_daily.calls + excluded.calls,"
    " estimated_calls = usage_daily.estimated_calls + excluded.estimated_calls,"
    " cost = usage_daily.cost + excluded.cost"
)
"""A re-keyed chat's daily usage ($1 the old key, $2 the new), added to the new key's rows
of the same day, model and kind; `MOVE_CHAT_USAGE_DELETE` then drops the old rows."""

MOVE_CHAT_USAGE_DELETE = "DELETE FROM usage_daily WHERE scope_kind = 'chat' AND scope_key = $1"

PURGE_UNOPENED = (
    "DELETE FROM idempotency_keys WHERE session_id IS NULL AND created_at < $1"
    " AND (lease_until IS NULL OR lease_until < $1)"
)
"""Claims whose holder died before opening a session (the retention purge drops them)."""

SAVE = (
    "UPDATE idempotency_keys SET response = $3, owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND response IS NULL"
)

Statement = tuple[str, tuple[Any, ...]]
"""A statement above (PostgreSQL's `$n` parameters) and its parameters."""


class IdempotencyKeys:
    """The API's idempotency keys, the same on both stores: each store inherits these and
    runs the statements with `_key_read` and `_key_write` (its own dialect, connections
    and transactions)."""

    async def find_idempotency_key(self, client: str, key: str) -> KeyRecord | None:
        row = await self._key_read((FIND, (client, key)))
        return None if row is None else KeyRecord(*row)

    async def claim_idempotency_key(
        self,
        client: str,
        key: str,
        *,
        fingerprint: str,
        owner: str,
        at: float,
        lease_until: float,
    ) -> Claimed | None:
        """Hold the key for `owner` (a new claim, or one abandoned by an earlier attempt at
        the same request); None when another attempt holds it, answered it, or it was first
        sent with another request (`find_idempotency_key` tells which)."""
        row = await self._key_write((CLAIM, (client, key, fingerprint, at, owner, lease_until)))
        return None if row is None else Claimed(*row)

    async def renew_idempotency_key(
        self, client: str, key: str, *, owner: str, lease_until: float
    ) -> bool:
        """Extend `owner`'s lease; False when the key is no longer its own."""
        return await self._key_write((RENEW, (client, key, owner, lease_until))) is not None

    async def attach_idempotency_session(
        self, client: str, key: str, *, owner: str, session_id: str
    ) -> bool:
        """Record the session `owner` answers the key in; False when the key is not its own,
        `SessionNotFound` when the session is gone (purged meanwhile)."""
        return await self._key_write((ATTACH, (client, key, owner, session_id))) is not None

    async def release_idempotency_key(self, client: str, key: str, *, owner: str) -> None:
        """`owner` gives the key up unanswered: the next attempt with it really retries."""
        mine = (client, key, owner)
        await self._key_write((RELEASE_UNOPENED, mine), (RELEASE, mine))

    async def save_idempotent_response(self, client: str, key: str, response: str) -> None:
        """Store the reply a key answered with (once; a stored reply is never replaced)."""
        await self._key_write((SAVE, (client, key, response)))

    async def _key_read(self, statement: Statement) -> Sequence[Any] | None:
        """The first row `statement` reads, from committed data."""
        raise NotImplementedError

    async def _key_write(self, *statements: Statement) -> Sequence[Any] | None:
        """Run `statements` in one transaction, committed before this returns; the first row
        the last one returned (None: none). A session the table's foreign key no longer
        finds raises `SessionNotFound`."""
        raise NotImplementedError


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
