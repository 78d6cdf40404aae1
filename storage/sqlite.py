"""`ConsultationStore` on one SQLite file through aiosqlite.

Invariants:
- Transactions never interleave. All writes go through one writer connection,
  each as one synchronous function run on that connection's thread by
  `storage.writer.GroupWriter` (concurrent writes share a commit, each under
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
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from pathlib import Path

import aiosqlite

from core.models import ChatSettings, Consultation, Message, Status
from storage import idempotency
from storage import statements as sql
from storage.batch import Batcher, run_reads, run_writes
from storage.migrations import migrate

BUSY_TIMEOUT_MS = 5000


class SqliteStore:
    """The consultation store; open with `await SqliteStore.open(path)`, then `close()`."""

    def __init__(self, writer: aiosqlite.Connection, reader: aiosqlite.Connection) -> None:
        self._writer_db = writer
        self._reader_db = reader
        self._writer = Batcher(writer, run_writes)
        self._reader = Batcher(reader, run_reads)

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open (creating the file and its folder if needed) and migrate the database."""
        if str(path) == ":memory:":
            raise ValueError("SqliteStore needs a file: its reader is a second connection")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit BEGINs; transactions are explicit.
        writer = await aiosqlite.connect(path, isolation_level=None)
        reader: aiosqlite.Connection | None = None
        try:
            for pragma in (
                "journal_mode = WAL",
                "synchronous = NORMAL",
                "foreign_keys = ON",
                f"busy_timeout = {BUSY_TIMEOUT_MS}",
            ):
                await writer.execute(f"PRAGMA {pragma}")
            await migrate(writer)
            reader = await aiosqlite.connect(path, isolation_level=None)
            await reader.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await reader.execute("PRAGMA query_only = ON")
        except BaseException:
            if reader is not None:
                await reader.close()
            await writer.close()
            raise
        return cls(writer, reader)

    async def close(self) -> None:
        """Commit what was submitted, then close both connections."""
        await self._writer.flush()
        await self._reader.flush()
        await self._reader_db.close()
        with contextlib.suppress(sqlite3.Error):
            await self._writer_db.execute("PRAGMA optimize")
        await self._writer_db.close()

    async def ping(self) -> bool:
        """True if the database answers a trivial query (for a health check)."""
        try:
            rows = await self._reader_db.execute_fetchall("SELECT 1")
        except (sqlite3.Error, ValueError):  # ValueError: the connection is closed
            return False
        return list(rows) == [(1,)]

    # -- reads ---------------------------------------------------------------------------

    async def load_active(self, chat_key: str) -> Consultation | None:
        return await self._reader.run(functools.partial(sql.load_active, chat_key=chat_key))

    async def get(self, consultation_id: str) -> Consultation | None:
        return await self._reader.run(
            functools.partial(sql.load_by_id, consultation_id=consultation_id)
        )

    async def latest_status(self, chat_key: str) -> Status | None:
        return await self._reader.run(functools.partial(sql.latest_status, chat_key=chat_key))

    async def load_chat_settings(self, chat_key: str) -> ChatSettings:
        return await self._reader.run(functools.partial(sql.load_chat_settings, chat_key=chat_key))

    # -- writes --------------------------------------------------------------------------

    async def create(self, consultation: Consultation) -> None:
        """Insert it with its messages; raises `ActiveConsultationExists` for a 2nd ACTIVE."""
        await self._writer.run(functools.partial(sql.insert_consultation, c=consultation))

    async def add_message(
        self, consultation_id: str, message: Message, *, last_activity_at: float
    ) -> None:
        """Append and commit; raises `core.errors.SessionNotFound` for an unknown id."""
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
        current_round: int,
        status: Status,
        last_activity_at: float,
    ) -> None:
        await self._writer.run(
            functools.partial(
                sql.append_message,
                consultation_id=consultation_id,
                message=reply,
                current_round=current_round,
                status=status.value,
                last_activity_at=last_activity_at,
            )
        )

    async def set_status(self, consultation_id: str, status: Status, *, at: float) -> None:
        """Change the status; `at` becomes the last activity (a /reset is activity)."""
        await self._writer.run(
            functools.partial(
                sql.update_consultation,
                consultation_id=consultation_id,
                status=status.value,
                last_activity_at=at,
            )
        )

    async def set_max_rounds(self, consultation_id: str, max_rounds: int) -> None:
        await self._writer.run(
            functools.partial(
                sql.update_consultation, consultation_id=consultation_id, max_rounds=max_rounds
            )
        )

    async def save_chat_settings(self, chat_key: str, settings: ChatSettings) -> None:
        await self._writer.run(
            functools.partial(sql.upsert_chat_settings, chat_key=chat_key, s=settings)
        )

    async def move_chat(self, old_key: str, new_key: str) -> int:
        return await self._writer.run(
            functools.partial(sql.move_chat, old_key=old_key, new_key=new_key)
        )

    async def expire_idle(self, *, inactive_since: float, at: float) -> int:
        """Expire idle ACTIVE consultations, as `set_status(EXPIRED, at=at)` would each."""
        return await self._writer.run(
            functools.partial(sql.expire_idle, inactive_since=inactive_since, at=at)
        )

    async def purge(self, *, older_than: float) -> int:
        """Delete ended consultations last active before `older_than`; settings are kept."""
        return await self._writer.run(functools.partial(sql.purge, older_than=older_than))

    # -- idempotency keys of API requests (deleted with their session) ---------------------

    async def find_idempotency_key(self, client: str, key: str) -> idempotency.KeyRecord | None:
        return await self._reader.run(
            functools.partial(idempotency.find_key, client=client, key=key)
        )

    async def claim_idempotency_key(
        self, client: str, key: str, *, fingerprint: str, session_id: str, at: float
    ) -> None:
        """Record the key for the session (a key already claimed keeps its first claim)."""
        await self._writer.run(
            functools.partial(
                idempotency.claim_key,
                client=client,
                key=key,
                fingerprint=fingerprint,
                session_id=session_id,
                created_at=at,
            )
        )

    async def save_idempotent_response(self, client: str, key: str, response: str) -> None:
        """Store the reply a key answered with (once; a stored reply is never replaced)."""
        await self._writer.run(
            functools.partial(idempotency.save_response, client=client, key=key, response=response)
        )
