"""`ConsultationStore` on PostgreSQL through an asyncpg connection pool.

Invariants:
- Every statement is parameterised; the only text formatted into SQL is fixed
  column names written in this module.
- Each write is one transaction, and the hot ones (appending a message, recording a
  reply) are one statement: one round trip, no BEGIN/COMMIT. Appending a message updates
  (and so locks) its consultation's row and takes the next position from that row's
  newest version (`last_seq`), so concurrent appends to one consultation from several
  processes take turns and never compute the same position.
- `record_reply` is a compare-and-set on the round: the reply is stored and the round
  advanced only while the stored round is still the one the turn started from, so two
  writers can never both advance one consultation (`TurnSuperseded` for the second).
- At most one ACTIVE consultation per chat key (a partial unique index); a second one
  raises `ActiveConsultationExists`.
- A lost connection, a database that does not answer, or a full disk reaches callers as
  `StoreUnavailable` (nothing half-written: the transaction rolled back); a server that
  cannot be reached or a URL that is wrong stops `open` with `DatabaseUnusable`.

The store is put together from modules next to this one: `storage.postgres.calls` (the
base class: counting calls so `close` waits for them, one transaction per write, writes to
one consultation in order), `storage.postgres.sql` with `storage.postgres.batch` (the hot
statements, batched), `storage.postgres.upkeep` (re-keying a chat, expiring, purging,
Telegram update ids), with the API's idempotency keys from `storage.idempotency` (run by
`storage.postgres.sql`). `PostgresStore` is the one class callers use.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from core.domain.audit import AuditEntry
from core.domain.clarifying import Picks
from core.domain.consultation import (
    SUMMARY_CHARS,
    ChatSettings,
    Consultation,
    ConsultationSummary,
    Message,
    ModelOptions,
    Status,
    TurnRecord,
)
from core.domain.errors import ActiveConsultationExists, SessionNotFound, TurnSuperseded
from core.domain.facts import MAX_FACT_ID, Fact, MemoryPreferences, MemoryState
from core.domain.listing import ConsultationQuery, ListedConsultation
from core.domain.people import PeopleQuery, PersonRow
from core.domain.ports import ConsultationStore
from core.domain.quotas import QuotaOverride, Standing, TokenHold
from core.domain.stats import DayFigures, Period, Stats
from core.domain.telegram_keys import check_scope
from core.domain.tool_usage import ToolCalls
from core.domain.usage import Charge, ScopeKind, UsageTotal, day_of
from storage.idempotency import IdempotencyKeys, Statement
from storage.postgres import (
    admin,
    daily,
    keyboards,
    memory,
    people,
    quotas,
    stats,
    upkeep,
    usage,
)
from storage.postgres.batch import BatchedStatement
from storage.postgres.bots import PostgresBots
from storage.postgres.calls import StoreCalls
from storage.postgres.faults import is_unavailable
from storage.postgres.knowledge import PostgresKnowledge
from storage.postgres.payments import PostgresPayments
from storage.postgres.pool import open_pool
from storage.postgres.schema import migrate
from storage.postgres.sql import (
    RECORD_FOLLOW_UP,
    Append,
    Appended,
    RoundGuard,
    append_messages,
    load_consultation,
    load_turns,
    run_key_statements,
    update_consultation,
    withdraw_turn,
)
from storage.postgres.usage import charge_values
from storage.rows import (
    consultation_values,
    message_values,
    options_value,
    picks_value,
    summary_from_row,
)
from storage.statements.consultations import (
    INSERT_CONSULTATION,
    INSERT_MESSAGE_VALUES,
    SELECT_ACTIVE,
    SELECT_BY_ID,
    SELECT_CHAT_SETTINGS,
    SELECT_LATEST,
    SELECT_LATEST_STATUS,
    SELECT_RECENT,
    UPSERT_CHAT_SETTINGS,
)

log = logging.getLogger(__name__)

PING_TIMEOUT = 2.0


class PostgresStore(StoreCalls, IdempotencyKeys, ConsultationStore):
    """The consultation store on PostgreSQL; `await PostgresStore.open(url)`, then `close()`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        # The hot statements, one round trip for all the calls made meanwhile.
        self._turns: BatchedStatement[
            tuple[str, str | None], tuple[TurnRecord | None, Consultation | None]
        ]
        self._turns = BatchedStatement(lambda batch: self._call(lambda c: load_turns(c, batch)))
        self._appends: BatchedStatement[Append, Appended]
        self._appends = BatchedStatement(
            lambda batch: self._call(lambda c: append_messages(c, batch))
        )
        self.knowledge = PostgresKnowledge(self._call, self._write)
        """The operator's knowledge base, in this database, through this pool."""
        self.bots = PostgresBots(self._call, self._write)
        self.payments = PostgresPayments(self._call, self._write)
        """The bots the operator added (`core.domain.ports.BotRegistry`), in this database."""

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 10) -> PostgresStore:
        """Connect, apply missing migrations (one process at a time) and return the store."""
        return cls(await open_pool(url, size=pool_size, migrate=migrate))

    async def ping(self) -> bool:
        """True if the database answers a query within `PING_TIMEOUT` seconds."""
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                return bool(await self._pool.fetchval("SELECT 1") == 1)
        except Exception as error:
            if is_unavailable(error) or isinstance(error, asyncpg.PostgresError):
                return False
            raise

    # -- reads ---------------------------------------------------------------------------

    async def load_active(self, chat_key: str) -> Consultation | None:
        return await self._load(SELECT_ACTIVE, chat_key)

    async def get(self, consultation_id: str) -> Consultation | None:
        return await self._load(SELECT_BY_ID, consultation_id)

    async def recent(self, chat_key: str, limit: int) -> list[ConsultationSummary]:
        rows = await self._call(lambda c: c.fetch(SELECT_RECENT, SUMMARY_CHARS, chat_key, limit))
        return [summary_from_row(row) for row in rows]

    async def load_turn(
        self, chat_key: str, turn_id: str | None
    ) -> tuple[TurnRecord | None, Consultation | None]:
        """The turn and the active consultation, in one statement (with the loads made
        meanwhile by other chats)."""
        async with self._tracked():
            return await self._turns((chat_key, turn_id))

    async def latest_status(self, chat_key: str) -> Status | None:
        value = await self._call(lambda c: c.fetchval(SELECT_LATEST_STATUS, chat_key))
        return None if value is None else Status(value)

    async def load_chat_settings(self, chat_key: str) -> ChatSettings:
        row = await self._call(lambda c: c.fetchrow(SELECT_CHAT_SETTINGS, chat_key))
        if row is None:
            return ChatSettings()
        return ChatSettings(
            max_rounds=row["max_rounds"],
            role=row["role"],
            system_prompt=row["system_prompt"],
            language=row["language"],
            model=row["model"],
        )

    # -- writes --------------------------------------------------------------------------

    async def create(
        self, consultation: Consultation, *, starter: str | None = None, start_limit: int = 0
    ) -> None:
        """Insert it with its messages (and count it as `starter`'s start, within
        `start_limit`: `StartRefused`, nothing stored, at it); raises
        `ActiveConsultationExists` for a 2nd ACTIVE."""
        c = consultation

        async def insert(connection: asyncpg.Connection) -> None:
            try:
                await connection.execute(
                    INSERT_CONSULTATION, *consultation_values(c), len(c.messages)
                )
            except asyncpg.UniqueViolationError as error:
                if error.constraint_name == "consultations_one_active":
                    raise ActiveConsultationExists(c.chat_key) from error
                raise
            await connection.executemany(
                INSERT_MESSAGE_VALUES,
                [(c.id, seq, *message_values(m)) for seq, m in enumerate(c.messages, start=1)],
            )
            if starter is not None:
                await quotas.count_start(connection, starter, day_of(c.created_at), start_limit)

        await self._write(insert)

    async def add_message(
        self, consultation_id: str, message: Message, *, last_activity_at: float
    ) -> None:
        """Append and commit; raises `core.domain.errors.SessionNotFound` for an unknown id."""
        outcome = await self._append(Append(consultation_id, message, last_activity_at))
        if not outcome.stored:
            raise SessionNotFound(consultation_id)

    async def record_reply(
        self,
        consultation_id: str,
        reply: Message,
        *,
        expected_round: int,
        current_round: int,
        status: Status,
        last_activity_at: float,
        charge: Charge | None = None,
    ) -> None:
        """Store the reply and advance the round, only while the consultation is still ACTIVE
        at `expected_round`; otherwise store nothing and raise `TurnSuperseded`. The charge
        goes in the same statement."""

        guard = RoundGuard(expected_round, current_round, status)
        append = Append(consultation_id, reply, last_activity_at, guard, charge)
        outcome = await self._append(append)
        if outcome.stored:
            return
        if not outcome.known:
            raise SessionNotFound(consultation_id)
        raise TurnSuperseded(
            f"consultation {consultation_id} is no longer active at round {expected_round}"
        )

    async def record_follow_up(
        self,
        consultation_id: str,
        reply: Message,
        *,
        expected_follow_ups: int,
        last_activity_at: float,
        charge: Charge | None = None,
    ) -> None:
        """Store a follow-up's answer and count it, only while the consultation is COMPLETE
        with `expected_follow_ups`; otherwise store nothing and raise `TurnSuperseded`.
        One statement, in this process's order of writes to the consultation."""
        values = (*message_values(reply), *charge_values(charge))
        outcome = await self._write(
            lambda c: c.fetchrow(
                RECORD_FOLLOW_UP, consultation_id, last_activity_at, expected_follow_ups, *values
            ),
            consultation=consultation_id,
        )
        if outcome is None or outcome["stored"]:
            return
        if not outcome["known"]:
            raise SessionNotFound(consultation_id)
        raise TurnSuperseded(
            f"consultation {consultation_id} moved on from follow-up {expected_follow_ups}"
        )

    async def load_latest(self, chat_key: str) -> Consultation | None:
        return await self._load(SELECT_LATEST, chat_key)

    async def set_status(self, consultation_id: str, status: Status, *, at: float) -> None:
        """Change the status; `at` becomes the last activity, except for EXPIRED (expiring
        is the absence of activity: retention keeps counting from the last real one). Any
        status but ACTIVE ends the consultation at `at` (`ended_at`)."""
        activity: dict[str, Any] = {} if status is Status.EXPIRED else {"last_activity_at": at}
        if status is not Status.ACTIVE:
            activity["ended_at"] = at
        await self._write(
            lambda c: update_consultation(c, consultation_id, status=status.value, **activity)
        )

    async def set_max_rounds(self, consultation_id: str, max_rounds: int) -> None:
        await self._write(
            lambda c: update_consultation(c, consultation_id, max_rounds=max_rounds),
            consultation=consultation_id,
        )

    async def set_options(self, consultation_id: str, options: ModelOptions) -> None:
        value = options_value(options)
        await self._write(
            lambda c: update_consultation(c, consultation_id, options=value),
            consultation=consultation_id,
        )

    async def save_picks(self, consultation_id: str, picks: Picks | None) -> None:
        """Replace the consultation's unsent picks (None clears them); `SessionNotFound`
        for an unknown id. One statement, one round trip (no transaction around it), in
        this process's order of writes to the consultation."""
        value = picks_value(picks)
        async with self._tracked(), self._ordered.hold(consultation_id):
            await self._call(lambda c: update_consultation(c, consultation_id, picks=value))

    async def save_chat_settings(self, chat_key: str, settings: ChatSettings) -> None:
        s = settings
        await self._write(
            lambda c: c.execute(
                UPSERT_CHAT_SETTINGS,
                chat_key,
                s.max_rounds,
                s.role,
                s.system_prompt,
                s.language,
                s.model,
                time.time(),
            )
        )

    async def withdraw_turn(self, consultation_id: str, turn_id: str) -> bool:
        return await self._write(lambda c: withdraw_turn(c, consultation_id, turn_id))

    async def move_chat(self, old_key: str, new_key: str) -> int:
        """Re-key a chat's consultations and settings; the new key's own data wins."""
        return await self._write(lambda c: upkeep.move_chat(c, old_key, new_key))

    async def expire_idle(self, *, inactive_since: float, at: float) -> int:
        """Expire idle ACTIVE consultations; their last activity stays (retention counts
        from it)."""
        return await self._write(lambda c: upkeep.expire_idle(c, inactive_since, at))

    async def purge(self, *, older_than: float) -> int:
        """Delete ended consultations last active before `older_than` (messages and
        idempotency keys go with them); settings are kept."""
        return await self._write(lambda c: upkeep.purge(c, older_than))

    async def forget_chat(self, chat_key: str) -> int:
        """Delete the chat's consultations (messages and idempotency keys with them) and
        its settings, in one transaction."""
        return await self._write(lambda c: upkeep.forget_chat(c, chat_key))

    async def forget_bot(self, scope: int) -> int:
        """Everything the bot keeps, in one transaction (see `upkeep.forget_bot`)."""
        return await self._write(lambda c: upkeep.forget_bot(c, check_scope(scope)))

    async def remember_update(
        self, update_id: int, *, at: float | None = None, bot: int = 0
    ) -> bool:
        """Record the bot's Telegram update id; True the first time, False for a redelivery."""
        received = time.time() if at is None else at
        return await self._write(lambda c: upkeep.remember_update(c, update_id, received, bot))

    # -- round keyboards (`bot.transport.round_keyboards`) --------------------------------

    async def swap_round_keyboard(
        self, chat_id: int, thread_id: int | None, message_id: int | None, *, bot: int = 0
    ) -> int | None:
        """One statement, one round trip (see `storage.postgres.keyboards`)."""
        return await self._call(
            lambda c: keyboards.swap_round_keyboard(c, chat_id, thread_id, message_id, bot)
        )

    async def forget_round_keyboards(self, chat_id: int, *, bot: int = 0) -> int:
        return await self._write(lambda c: keyboards.forget_round_keyboards(c, chat_id, bot))

    # -- client memory (`core.domain.facts`) ---------------------------------------------------

    async def load_memory(self, owner: str, person: str) -> MemoryState:
        return await self._call(lambda c: memory.load_memory(c, owner, person))

    async def add_facts(
        self, owner: str, person: str, facts: Sequence[str], *, at: float
    ) -> tuple[Fact, ...]:
        return await self._write(lambda c: memory.add_facts(c, owner, person, facts, at))

    async def delete_fact(self, owner: str, fact_id: int) -> bool:
        if not 0 < fact_id <= MAX_FACT_ID:
            return False
        return await self._write(lambda c: memory.delete_fact(c, owner, fact_id))

    async def save_memory_preferences(self, person: str, preferences: MemoryPreferences) -> None:
        await self._write(lambda c: memory.save_preferences(c, person, preferences))

    async def forget_memory(self, person: str) -> int:
        return await self._write(lambda c: memory.forget_memory(c, person))

    async def load_language(self, person: str) -> str | None:
        return await self._call(lambda c: memory.load_language(c, person))

    async def save_language(self, person: str, language: str) -> None:
        await self._write(lambda c: memory.save_language(c, person, language))

    async def delete_language(self, person: str) -> bool:
        return await self._write(lambda c: memory.delete_language(c, person))

    # -- usage (`core.domain.usage`) ------------------------------------------------------------

    async def add_usage(self, charges: Sequence[Charge]) -> None:
        if charges:
            await self._write(lambda c: usage.add_usage(c, charges))

    async def usage_of(
        self, scope: ScopeKind, key: str, *, since_day: str, until_day: str
    ) -> list[UsageTotal]:
        return await self._call(lambda c: usage.usage_of(c, scope, key, since_day, until_day))

    async def tool_calls_of(self, scope: ScopeKind, key: str, *, day: str) -> ToolCalls:
        return await self._call(lambda c: usage.tool_calls_of(c, scope, key, day))

    # -- quotas (`core.domain.quotas`) -----------------------------------------------------------

    async def consultations_started(self, person: str, day: str) -> int:
        return await self._call(lambda c: quotas.consultations_started(c, person, day))

    async def hold_tokens(
        self, hold: TokenHold, *, month: str, now: float, admit: Callable[[Standing], bool]
    ) -> tuple[Standing, bool]:
        return await self._write(lambda c: quotas.hold_tokens(c, hold, month, now, admit))

    async def resize_hold(self, hold_id: str, tokens: int, expires_at: float) -> None:
        await self._write(lambda c: quotas.resize_hold(c, hold_id, tokens, expires_at))

    async def release_hold(self, hold_id: str) -> None:
        await self._write(lambda c: quotas.release_hold(c, hold_id))

    async def load_quota_override(self, person: str) -> QuotaOverride | None:
        return await self._call(lambda c: quotas.load_override(c, person))

    async def save_quota_override(self, override: QuotaOverride, *, at: float) -> None:
        await self._write(lambda c: quotas.save_override(c, override, at))

    async def delete_quota_override(self, person: str) -> bool:
        return await self._write(lambda c: quotas.delete_override(c, person))

    # -- the operator's figures (`core.domain.stats`) -------------------------------------------

    async def stats(self, period: Period, *, scope: int | None = None) -> Stats:
        if scope is not None:
            check_scope(scope)
        return await self._call(lambda c: stats.stats_of(c, period, scope))

    async def daily_stats(self, period: Period, *, scope: int | None = None) -> list[DayFigures]:
        if scope is not None:
            check_scope(scope)
        return await self._call(lambda c: daily.daily_of(c, period, scope))

    # -- the operator's console (`storage.postgres.admin`) ---------------------------------

    async def list_consultations(self, query: ConsultationQuery) -> list[ListedConsultation]:
        return await self._call(lambda c: admin.list_consultations(c, query))

    async def list_people(self, query: PeopleQuery) -> list[PersonRow]:
        return await self._call(lambda c: people.list_people(c, query))

    async def person_facts(self, person: str, *, limit: int) -> list[Fact]:
        return await self._call(lambda c: people.person_facts(c, person, limit))

    async def set_person_override(
        self, person: str, override: QuotaOverride | None, *, at: float, audit: AuditEntry
    ) -> bool:
        return await self._write(lambda c: people.set_override(c, person, override, at, audit))

    async def is_blocked(self, person: str) -> bool:
        return await self._call(lambda c: people.is_blocked(c, person))

    async def set_blocked(
        self, person: str, blocked: bool, *, at: float, audit: AuditEntry
    ) -> bool:
        return await self._write(lambda c: people.set_blocked(c, person, blocked, at, audit))

    async def forget_person_memory(self, person: str, audit: AuditEntry) -> int:
        return await self._write(lambda c: people.forget_memory(c, person, audit))

    async def delete_consultation(self, consultation_id: str, audit: AuditEntry) -> bool:
        return await self._write(
            lambda c: admin.delete_consultation(c, consultation_id, audit),
            consultation=consultation_id,
        )

    async def add_admin_session(
        self, token_hash: str, *, expires_at: float, audit: AuditEntry
    ) -> None:
        await self._write(lambda c: admin.add_admin_session(c, token_hash, expires_at, audit))

    async def admin_session_expiry(self, token_hash: str) -> float | None:
        return await self._call(lambda c: admin.admin_session_expiry(c, token_hash))

    async def end_admin_session(self, token_hash: str, audit: AuditEntry) -> bool:
        return await self._write(lambda c: admin.end_admin_session(c, token_hash, audit))

    async def add_audit(self, entry: AuditEntry) -> None:
        await self._write(lambda c: admin.add_audit(c, entry))

    async def audit_log(self, *, before_id: int | None, limit: int) -> list[AuditEntry]:
        return await self._call(lambda c: admin.audit_log(c, before_id, limit))

    # -- idempotency keys of API requests (`IdempotencyKeys`; deleted with their session) --

    async def _key_read(self, statement: Statement) -> Sequence[Any] | None:
        text, args = statement
        return await self._call(lambda c: c.fetchrow(text, *args))

    async def _key_write(self, *statements: Statement) -> Sequence[Any] | None:
        return await self._write(lambda c: run_key_statements(c, statements))

    # -- plumbing ------------------------------------------------------------------------

    async def _load(self, select: str, *args: object) -> Consultation | None:
        """The consultation `select` finds and its messages: one statement, so one snapshot
        and one round trip."""
        return await self._call(lambda c: load_consultation(c, select, *args))

    async def _append(self, append: Append) -> Appended:
        """One message appended, in this process's order for its consultation.

        A caller that is cancelled leaves the append to finish (it may already be in a
        statement shared with other calls): the consultation's order is held until then,
        so the next write to it never overtakes this one.
        """
        self._enter()  # counted from the call, so `close` waits for it
        return await asyncio.shield(self._append_in_order(append))

    async def _append_in_order(self, append: Append) -> Appended:
        try:
            async with self._ordered.hold(append.consultation_id):
                return await self._appends(append)
        finally:
            self._leave()
