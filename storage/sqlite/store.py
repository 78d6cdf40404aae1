"""`ConsultationStore` on one SQLite file through aiosqlite.

Invariants:
- Transactions never interleave. All writes go through one writer connection,
  each as one synchronous function run on that connection's thread by
  `storage.sqlite.batch.BatchedConnection` (concurrent writes share a commit, each under
  its own savepoint), so no await can split a write and a failed or cancelled
  write leaves nothing half done.
- Reads never see half a transaction. They use a second connection, which in
  WAL mode sees only committed data; a consultation and its messages are read
  in one read transaction, so from one snapshot. A write that returned is visible to
  every read that starts after it.
- Durability: WAL with ``synchronous=NORMAL``. A commit that returned survives
  the process being killed (it is in the WAL file, in the OS page cache); only
  an OS crash or power loss can lose the most recent commits — never corrupt
  the database.
- A database that cannot be used (folder not writable, not a SQLite file,
  corrupt by ``PRAGMA quick_check``) stops `open` with `DatabaseUnusable` and a
  one-line reason; later faults of the file or disk reach callers as
  `StoreUnavailable` (see `storage.sqlite.faults` and `storage.sqlite.health`).
- The file gives space back: ``auto_vacuum = INCREMENTAL`` (an older file is
  converted by one VACUUM when opened) and every purge frees the pages it
  emptied; the WAL is truncated to `JOURNAL_SIZE_LIMIT` after checkpoints.
- Deleted words are unreadable in the file and the WAL once a deletion returned
  (`storage.sqlite.erasure`): zeroed pages, a search index without their trigrams,
  and the WAL truncated.
- Each connection caches at most `CACHE_KIB` of pages (SQLite's default is 2,000 KiB),
  so the process does not keep a copy of a growing database: the writer's cache would
  fill with every page it touches, and pages it no longer holds are read from the
  operating system's cache in microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from core.domain.audit import AuditEntry
from core.domain.clarifying import Picks
from core.domain.consultation import (
    ChatSettings,
    Consultation,
    ConsultationSummary,
    Message,
    ModelOptions,
    Status,
    TurnRecord,
)
from core.domain.facts import MAX_FACT_ID, Fact, MemoryPreferences, MemoryState
from core.domain.listing import ConsultationQuery, ListedConsultation
from core.domain.people import PeopleQuery, PersonRow
from core.domain.ports import ConsultationStore
from core.domain.quotas import QuotaOverride, Standing, TokenHold
from core.domain.stats import DayFigures, Period, Stats
from core.domain.telegram_keys import check_scope
from core.domain.tool_usage import ToolCalls
from core.domain.usage import Charge, ScopeKind, UsageTotal, day_of
from storage.errors import DatabaseUnusable
from storage.idempotency import IdempotencyKeys, Statement
from storage.rows import options_value, picks_value
from storage.sqlite import (
    admin,
    daily,
    keyboards,
    memory,
    people,
    quotas,
    sql,
    stats,
    upkeep,
    usage,
)
from storage.sqlite.batch import BatchedConnection, run_reads, run_writes
from storage.sqlite.bots import SqliteBots
from storage.sqlite.erasure import Erasing, merge_step, nothing, secure_search_index
from storage.sqlite.health import FileIdentity, StoreHealth
from storage.sqlite.knowledge import SqliteKnowledge
from storage.sqlite.payments import SqlitePayments
from storage.sqlite.schema import migrate

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
CACHE_KIB = 512
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
HEALTH_PROBE_INTERVAL = 5.0
_AUTO_VACUUM_INCREMENTAL = 2


class SqliteStore(IdempotencyKeys, ConsultationStore):
    """The consultation store; open with `await SqliteStore.open(path)`, then `close()`."""

    def __init__(
        self,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        identity: FileIdentity,
        *,
        probe_interval: float = HEALTH_PROBE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._writer_db = writer
        self._reader_db = reader
        self._closed = False
        self._writer = BatchedConnection(writer, run_writes, guard=identity.check)
        self._reader = BatchedConnection(reader, run_reads)
        self._health = StoreHealth(self._writer, identity, interval=probe_interval, clock=clock)
        self.knowledge = SqliteKnowledge(self._reader, self._writer)
        """The operator's knowledge base, in this file, on these connections."""
        self.bots = SqliteBots(self._reader, self._writer)
        self.payments = SqlitePayments(self._reader, self._writer)
        """The bots the operator added (`core.domain.ports.BotRegistry`), in this file."""

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        probe_interval: float = HEALTH_PROBE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> SqliteStore:
        """Open (creating the file and its folder if needed), check and migrate the database.

        Raises `DatabaseUnusable` with a one-line reason when that cannot be done.
        `probe_interval` is how long a proof of writability is trusted (`ping`).
        """
        if str(path) == ":memory:":
            raise ValueError("SqliteStore needs a file: its reader is a second connection")
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DatabaseUnusable(
                f"cannot create the folder of the database {path}: {error.strerror}"
            ) from error
        # Checked first with a plain connection: aiosqlite leaves a thread behind
        # when its connect fails.
        await asyncio.to_thread(_check_file, path)
        try:
            # isolation_level=None: no implicit BEGINs; transactions are explicit.
            writer = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as error:  # the file changed since the check
            raise DatabaseUnusable(_describe(path, error)) from error
        reader: aiosqlite.Connection | None = None
        try:
            identity = FileIdentity(path)
            await _configure(writer)
            await migrate(writer)
            await secure_search_index(writer)
            await _shrinkable(writer, path)
            reader = await aiosqlite.connect(path, isolation_level=None)
            await reader.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await reader.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            await reader.execute("PRAGMA query_only = ON")
        except BaseException as error:
            if reader is not None:
                await reader.close()
            await writer.close()
            if isinstance(error, sqlite3.Error | OSError):
                raise DatabaseUnusable(_describe(path, error)) from error
            raise
        return cls(writer, reader, identity, probe_interval=probe_interval, clock=clock)

    async def close(self) -> None:
        """Commit what was submitted, then close both connections; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        await self._writer.flush()
        await self._reader.flush()
        await self._reader_db.close()
        with contextlib.suppress(sqlite3.Error):
            await self._writer_db.execute("PRAGMA optimize")
        await self._writer_db.close()

    async def ping(self) -> bool:
        """True if the database reads, writes and is still the file that was opened.

        Cheap to poll: the write is proven at most every `probe_interval` seconds,
        the rest on every call; a reason for failing is logged once, when it appears.
        """
        try:
            rows = await self._reader_db.execute_fetchall("SELECT 1")
        except (sqlite3.Error, ValueError):  # ValueError: the connection is closed
            return False
        return list(rows) == [(1,)] and await self._health.problem() is None

    # -- reads ---------------------------------------------------------------------------

    async def load_active(self, chat_key: str) -> Consultation | None:
        return await self._reader.run(functools.partial(sql.load_active, chat_key=chat_key))

    async def get(self, consultation_id: str) -> Consultation | None:
        return await self._reader.run(
            functools.partial(sql.load_by_id, consultation_id=consultation_id)
        )

    async def recent(self, chat_key: str, limit: int) -> list[ConsultationSummary]:
        return await self._reader.run(functools.partial(sql.recent, chat_key=chat_key, limit=limit))

    async def load_turn(
        self, chat_key: str, turn_id: str | None
    ) -> tuple[TurnRecord | None, Consultation | None]:
        """The turn and the active consultation, from one read transaction."""
        return await self._reader.run(
            functools.partial(sql.load_turn, chat_key=chat_key, turn_id=turn_id)
        )

    async def latest_status(self, chat_key: str) -> Status | None:
        return await self._reader.run(functools.partial(sql.latest_status, chat_key=chat_key))

    async def load_chat_settings(self, chat_key: str) -> ChatSettings:
        return await self._reader.run(functools.partial(sql.load_chat_settings, chat_key=chat_key))

    # -- writes --------------------------------------------------------------------------

    async def create(
        self, consultation: Consultation, *, starter: str | None = None, start_limit: int = 0
    ) -> None:
        """Insert it with its messages atomically (and count it as `starter`'s start,
        within `start_limit`: `StartRefused`, nothing stored, at it).

        Raises `core.domain.errors.ActiveConsultationExists` for a second ACTIVE one in its chat,
        whichever store (or process) created the first.
        """
        await self._writer.run(
            functools.partial(_create, c=consultation, starter=starter, limit=start_limit)
        )

    async def add_message(
        self, consultation_id: str, message: Message, *, last_activity_at: float
    ) -> None:
        """Append and commit; raises `core.domain.errors.SessionNotFound` for an unknown id."""
        await self._writer.run(
            functools.partial(
                sql.append_message,
                consultation_id=consultation_id,
                message=message,
                last_activity_at=last_activity_at,
            )
        )

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
        """Append the reply and advance the round if it still stands at `expected_round`;
        raises `TurnSuperseded` (storing nothing) if another writer moved it on. The
        charge is counted in the same commit; a reply that ends it sets `ended_at`."""
        ended: dict[str, Any] = {} if status is Status.ACTIVE else {"ended_at": last_activity_at}
        await self._writer.run(
            functools.partial(
                sql.record_reply,
                consultation_id=consultation_id,
                message=reply,
                expected_round=expected_round,
                current_round=current_round,
                status=status.value,
                last_activity_at=last_activity_at,
                charge=charge,
                **ended,
            )
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
        """Append a follow-up's answer and count it while the consultation is COMPLETE
        with `expected_follow_ups`; raises `TurnSuperseded` (storing nothing) otherwise."""
        await self._writer.run(
            functools.partial(
                sql.record_follow_up,
                consultation_id=consultation_id,
                message=reply,
                expected_follow_ups=expected_follow_ups,
                last_activity_at=last_activity_at,
                charge=charge,
            )
        )

    async def add_usage(self, charges: Sequence[Charge]) -> None:
        if charges:
            await self._writer.run(functools.partial(usage.add_usage, charges=charges))

    async def usage_of(
        self, scope: ScopeKind, key: str, *, since_day: str, until_day: str
    ) -> list[UsageTotal]:
        return await self._reader.run(
            functools.partial(
                usage.usage_of, scope=scope, key=key, since_day=since_day, until_day=until_day
            )
        )

    async def tool_calls_of(self, scope: ScopeKind, key: str, *, day: str) -> ToolCalls:
        return await self._reader.run(
            functools.partial(usage.tool_calls_of, scope=scope, key=key, day=day)
        )

    async def load_latest(self, chat_key: str) -> Consultation | None:
        return await self._reader.run(functools.partial(sql.load_latest, chat_key=chat_key))

    async def stats(self, period: Period, *, scope: int | None = None) -> Stats:
        if scope is not None:
            check_scope(scope)
        return await self._reader.run(functools.partial(stats.stats_of, period=period, scope=scope))

    async def daily_stats(self, period: Period, *, scope: int | None = None) -> list[DayFigures]:
        if scope is not None:
            check_scope(scope)
        return await self._reader.run(functools.partial(daily.daily_of, period=period, scope=scope))

    async def set_status(self, consultation_id: str, status: Status, *, at: float) -> None:
        """Change the status; `at` becomes the last activity (a /reset is activity).

        Except for EXPIRED: expiring is the absence of activity, so the retention
        period keeps counting from the last real activity. Any status but ACTIVE ends the
        consultation at `at` (`ended_at`).
        """
        activity: dict[str, Any] = {} if status is Status.EXPIRED else {"last_activity_at": at}
        if status is not Status.ACTIVE:
            activity["ended_at"] = at
        await self._writer.run(
            functools.partial(
                sql.update_consultation,
                consultation_id=consultation_id,
                status=status.value,
                **activity,
            )
        )

    async def set_max_rounds(self, consultation_id: str, max_rounds: int) -> None:
        await self._writer.run(
            functools.partial(
                sql.update_consultation, consultation_id=consultation_id, max_rounds=max_rounds
            )
        )

    async def set_options(self, consultation_id: str, options: ModelOptions) -> None:
        value = options_value(options)
        await self._writer.run(
            functools.partial(
                sql.update_consultation, consultation_id=consultation_id, options=value
            )
        )

    async def save_picks(self, consultation_id: str, picks: Picks | None) -> None:
        """Replace the consultation's unsent picks (None clears them); `SessionNotFound`
        for an unknown id."""
        await self._writer.run(
            functools.partial(
                sql.update_consultation, consultation_id=consultation_id, picks=picks_value(picks)
            )
        )

    async def save_chat_settings(self, chat_key: str, settings: ChatSettings) -> None:
        await self._writer.run(
            functools.partial(sql.upsert_chat_settings, chat_key=chat_key, s=settings)
        )

    async def withdraw_turn(self, consultation_id: str, turn_id: str) -> bool:
        return await self._writer.run(
            functools.partial(sql.withdraw_turn, consultation_id=consultation_id, turn_id=turn_id)
        )

    async def move_chat(self, old_key: str, new_key: str) -> int:
        return await self._writer.run(
            functools.partial(upkeep.move_chat, old_key=old_key, new_key=new_key)
        )

    async def expire_idle(self, *, inactive_since: float, at: float) -> int:
        """Expire idle ACTIVE consultations, as `set_status(EXPIRED, at=at)` would each.

        Their last activity stays as it was: retention counts from it, not from now.
        """
        return await self._writer.run(
            functools.partial(upkeep.expire_idle, inactive_since=inactive_since, at=at)
        )

    async def remember_update(
        self, update_id: int, *, at: float | None = None, bot: int = 0
    ) -> bool:
        """Record the bot's Telegram update id; True the first time, False for a redelivery."""
        received = time.time() if at is None else at
        return await self._writer.run(
            functools.partial(upkeep.remember_update, update_id=update_id, at=received, bot=bot)
        )

    async def purge(self, *, older_than: float) -> int:
        """Delete ended consultations last active before `older_than`; settings are kept.

        The pages they used are given back to the file system.
        """
        return await self._erase(functools.partial(upkeep.purge, older_than=older_than))

    async def forget_chat(self, chat_key: str) -> int:
        return await self._erase(functools.partial(upkeep.forget_chat, chat_key=chat_key))

    async def forget_bot(self, scope: int) -> int:
        return await self._erase(functools.partial(upkeep.forget_bot, scope=check_scope(scope)))

    async def _erase(self, delete: Callable[[sqlite3.Connection], T]) -> T:
        """Run `delete` (a deletion of consultations), finish the request index's merge it
        started, then truncate the WAL: its words are then nowhere in the file
        (`storage.sqlite.erasure`). Other writes run between the merge's steps."""
        result = await self._writer.run(delete)
        while await self._writer.run(merge_step):
            pass
        await self._writer.run(Erasing(nothing))
        return result

    # -- round keyboards (`bot.transport.round_keyboards`) --------------------------------

    async def swap_round_keyboard(
        self, chat_id: int, thread_id: int | None, message_id: int | None, *, bot: int = 0
    ) -> int | None:
        return await self._writer.run(
            functools.partial(
                keyboards.swap_round_keyboard,
                chat_id=chat_id,
                thread_id=thread_id,
                message_id=message_id,
                bot=bot,
            )
        )

    async def forget_round_keyboards(self, chat_id: int, *, bot: int = 0) -> int:
        return await self._writer.run(
            functools.partial(keyboards.forget_round_keyboards, chat_id=chat_id, bot=bot)
        )

    # -- client memory (`core.domain.facts`) ---------------------------------------------------

    async def load_memory(self, owner: str, person: str) -> MemoryState:
        return await self._reader.run(
            functools.partial(memory.load_memory, owner=owner, person=person)
        )

    async def add_facts(
        self, owner: str, person: str, facts: Sequence[str], *, at: float
    ) -> tuple[Fact, ...]:
        return await self._writer.run(
            functools.partial(memory.add_facts, owner=owner, person=person, facts=facts, at=at)
        )

    async def delete_fact(self, owner: str, fact_id: int) -> bool:
        if not 0 < fact_id <= MAX_FACT_ID:
            return False
        return await self._writer.run(
            Erasing(functools.partial(memory.delete_fact, owner=owner, fact_id=fact_id))
        )

    async def save_memory_preferences(self, person: str, preferences: MemoryPreferences) -> None:
        await self._writer.run(
            functools.partial(memory.save_preferences, person=person, p=preferences)
        )

    async def forget_memory(self, person: str) -> int:
        return await self._writer.run(
            Erasing(functools.partial(memory.forget_memory, person=person))
        )

    async def load_language(self, person: str) -> str | None:
        return await self._reader.run(functools.partial(memory.load_language, person=person))

    async def save_language(self, person: str, language: str) -> None:
        await self._writer.run(
            functools.partial(memory.save_language, person=person, language=language)
        )

    async def delete_language(self, person: str) -> bool:
        return await self._writer.run(functools.partial(memory.delete_language, person=person))

    # -- the operator's console (`storage.sqlite.admin`) -----------------------------------

    async def list_consultations(self, query: ConsultationQuery) -> list[ListedConsultation]:
        return await self._reader.run(functools.partial(admin.list_consultations, query=query))

    async def list_people(self, query: PeopleQuery) -> list[PersonRow]:
        return await self._reader.run(functools.partial(people.list_people, query=query))

    async def person_facts(self, person: str, *, limit: int) -> list[Fact]:
        return await self._reader.run(
            functools.partial(people.person_facts, person=person, limit=limit)
        )

    async def set_person_override(
        self, person: str, override: QuotaOverride | None, *, at: float, audit: AuditEntry
    ) -> bool:
        return await self._writer.run(
            functools.partial(
                people.set_override, person=person, override=override, at=at, audit=audit
            )
        )

    async def is_blocked(self, person: str) -> bool:
        return await self._reader.run(functools.partial(people.is_blocked, person=person))

    async def set_blocked(
        self, person: str, blocked: bool, *, at: float, audit: AuditEntry
    ) -> bool:
        return await self._writer.run(
            functools.partial(
                people.set_blocked, person=person, blocked=blocked, at=at, audit=audit
            )
        )

    async def forget_person_memory(self, person: str, audit: AuditEntry) -> int:
        return await self._writer.run(
            Erasing(functools.partial(people.forget_memory, person=person, audit=audit))
        )

    async def delete_consultation(self, consultation_id: str, audit: AuditEntry) -> bool:
        return await self._erase(
            functools.partial(
                admin.delete_consultation, consultation_id=consultation_id, audit=audit
            )
        )

    async def add_admin_session(
        self, token_hash: str, *, expires_at: float, audit: AuditEntry
    ) -> None:
        await self._writer.run(
            functools.partial(
                admin.add_admin_session, token_hash=token_hash, expires_at=expires_at, audit=audit
            )
        )

    async def admin_session_expiry(self, token_hash: str) -> float | None:
        return await self._reader.run(
            functools.partial(admin.admin_session_expiry, token_hash=token_hash)
        )

    async def end_admin_session(self, token_hash: str, audit: AuditEntry) -> bool:
        return await self._writer.run(
            functools.partial(admin.end_admin_session, token_hash=token_hash, audit=audit)
        )

    async def add_audit(self, entry: AuditEntry) -> None:
        await self._writer.run(functools.partial(admin.add_audit, entry=entry))

    async def audit_log(self, *, before_id: int | None, limit: int) -> list[AuditEntry]:
        return await self._reader.run(
            functools.partial(admin.audit_log, before_id=before_id, limit=limit)
        )

    # -- quotas (`core.domain.quotas`) -----------------------------------------------------------

    async def consultations_started(self, person: str, day: str) -> int:
        return await self._reader.run(
            functools.partial(quotas.consultations_started, person=person, day=day)
        )

    async def hold_tokens(
        self, hold: TokenHold, *, month: str, now: float, admit: Callable[[Standing], bool]
    ) -> tuple[Standing, bool]:
        return await self._writer.run(
            functools.partial(quotas.hold_tokens, hold=hold, month=month, now=now, admit=admit)
        )

    async def resize_hold(self, hold_id: str, tokens: int, expires_at: float) -> None:
        await self._writer.run(
            functools.partial(
                quotas.resize_hold, hold_id=hold_id, tokens=tokens, expires_at=expires_at
            )
        )

    async def release_hold(self, hold_id: str) -> None:
        await self._writer.run(functools.partial(quotas.release_hold, hold_id=hold_id))

    async def load_quota_override(self, person: str) -> QuotaOverride | None:
        return await self._reader.run(functools.partial(quotas.load_override, person=person))

    async def save_quota_override(self, override: QuotaOverride, *, at: float) -> None:
        await self._writer.run(functools.partial(quotas.save_override, override=override, at=at))

    async def delete_quota_override(self, person: str) -> bool:
        return await self._writer.run(functools.partial(quotas.delete_override, person=person))

    # -- idempotency keys of API requests (`IdempotencyKeys`; deleted with their session) --

    async def _key_read(self, statement: Statement) -> Sequence[Any] | None:
        return await self._reader.run(functools.partial(sql.run_key_statements, (statement,)))

    async def _key_write(self, *statements: Statement) -> Sequence[Any] | None:
        return await self._writer.run(functools.partial(sql.run_key_statements, statements))


def _create(db: sqlite3.Connection, c: Consultation, starter: str | None, limit: int) -> None:
    """The consultation and, with a starter, its start counted (within `limit`): one
    transaction."""
    sql.insert_consultation(db, c)
    if starter is not None:
        quotas.count_start(db, starter, day_of(c.created_at), limit)


def _check_file(path: Path) -> None:
    """Refuse a path that cannot be opened, or a file that is not a sound SQLite database."""
    try:
        db = sqlite3.connect(path)
    except sqlite3.Error as error:
        raise DatabaseUnusable(_describe(path, error)) from error
    try:
        rows = [row[0] for row in db.execute("PRAGMA quick_check")]
    except sqlite3.Error as error:
        raise DatabaseUnusable(_describe(path, error)) from error
    finally:
        db.close()
    if rows != ["ok"]:
        raise DatabaseUnusable(f"the database {path} is corrupt (quick_check: {rows[0]})")


async def _configure(db: aiosqlite.Connection) -> None:
    for pragma in (
        "auto_vacuum = INCREMENTAL",  # takes effect on a new file; see `_shrinkable`
        "secure_delete = ON",  # deleted bytes are zeroed: `storage.sqlite.erasure`
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "foreign_keys = ON",
        f"busy_timeout = {BUSY_TIMEOUT_MS}",
        f"journal_size_limit = {JOURNAL_SIZE_LIMIT}",
        f"cache_size = -{CACHE_KIB}",
    ):
        await db.execute(f"PRAGMA {pragma}")


async def _shrinkable(db: aiosqlite.Connection, path: Path) -> None:
    """Make sure the file can give freed pages back (``auto_vacuum = INCREMENTAL``).

    A new file takes the setting before its first table; an older file needs one
    VACUUM, which rewrites it (it takes a while on a large file, once).
    """
    rows = list(await db.execute_fetchall("PRAGMA auto_vacuum"))
    if rows[0][0] == _AUTO_VACUUM_INCREMENTAL:
        return
    await db.execute("PRAGMA auto_vacuum = INCREMENTAL")
    log.info("converting %s to incremental auto-vacuum (one VACUUM)", path)
    await db.execute("VACUUM")


def _describe(path: Path, error: BaseException) -> str:
    """One line saying why the database at `path` cannot be used."""
    if isinstance(error, DatabaseUnusable):
        return str(error)
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary == sqlite3.SQLITE_NOTADB:
        return f"{path} is not a SQLite database"
    if primary == sqlite3.SQLITE_CANTOPEN:
        return f"cannot open the database {path}: check that its folder exists and is writable"
    if primary == sqlite3.SQLITE_READONLY:
        return f"the database {path} is read-only: the process needs write access to it"
    if isinstance(error, OSError):
        return f"cannot use the database {path}: {error.strerror or error}"
    return f"cannot use the database {path}: {error}"
