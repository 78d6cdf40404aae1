"""The inbox: Telegram updates accepted by any worker, waiting to be handled, on PostgreSQL.

Invariants:
- An update id is accepted at most once, ever: `put` records the id in `telegram_updates`
  (the table the webhook's de-duplication uses) and queues the row in the same
  statement (one transaction), so a redelivery is refused while the row waits AND after
  it was handled and deleted (a new polling leader fetches again what the old one had
  not acknowledged).
- Group commit (`storage.postgres.batch`): the `put`s (and the `finish`es) made while one is
  being written are written together by the next statement (one round trip and one
  commit for all of them); each caller returns only once its own row is committed.
  The ids are kept as long as the store keeps them (`storage.statements.telegram_updates` bounds).
- A row stays until `finish` deletes it or `bury` moves it to `dead_letters`: a worker
  that dies mid-update leaves its row for another worker (at least once). `begin` counts
  each handling in the row's `attempts` and commits before the handling starts, so a
  handling cut short by a crash counts too, and `refund` uncounts one that ended because
  the store was unavailable (an outage is not the update's fault); `bury` moves the row
  (with its attempts and the reason) in one statement, so an update is either waiting or
  dead, never both or neither.
- Rows of one chat come out lowest update_id first (`next`, `finish`); which worker works a chat is
  decided elsewhere (an advisory lock per chat), not here.
- Each new row is announced with a NOTIFY carrying its chat key on commit, so listening
  workers pick it up at once; a missed notification only costs a poll interval. The
  channel is named after the schema (notifications are database-wide, and deployments in
  other schemas of the same database must not wake these workers) and the bot (each
  bot's listeners hear its rows only: with one channel for all, every row woke every
  bot's inbox on every worker, and a bot's worker could claim another bot's chat, find
  none of its rows and keep the owner's worker waiting for its next look; the
  deployment's bot keeps the schema's channel, as before bots had scopes).
- `interrupt` (a /reset) names the chat's update whose handling started (its attempts
  counted) before a given update, on a second channel named after the schema and the bot,
  in the statement that finds it; whichever worker runs that handling hears it
  (`on_interrupt`).

- Every row is one bot's (`bot`, its scope, `core.domain.telegram_keys`): an inbox reads
  and writes the rows of the bot it was opened for (`for_bot` gives another bot's view of
  the same pool), so two bots' update ids never collide and one bot's chats never wait
  behind another's; `depth` and `backlog` count every bot's.

The inbox has its own small pool rather than the store's: accepting an update (the
webhook's 200 waits for it) never queues behind model turns holding store connections,
and the store's pool stays private to the store.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, NamedTuple, TypeVar

import asyncpg

from storage.postgres.batch import BatchedStatement
from storage.postgres.cluster.listener import SharedListener
from storage.postgres.pool import call, open_pool
from storage.statements.telegram_updates import KEEP_IDS, KEEP_SECONDS

log = logging.getLogger(__name__)

T = TypeVar("T")

CHANNEL_PREFIX = "consult_inbox_"
STOP_CHANNEL_PREFIX = "consult_stop_"


class Backlog(NamedTuple):
    """Updates waiting, counted up to a bound: `waiting` (the bound when `more`), and the
    earliest arrival among the rows counted (None when none waits)."""

    waiting: int
    more: bool  # more than `waiting` wait
    oldest_received_at: float | None


class Row(NamedTuple):
    """A waiting update: its id, its JSON as it was accepted, when (epoch seconds), and how
    many handlings of it started."""

    update_id: int
    payload: str
    received_at: float
    attempts: int = 0


class PostgresInbox:
    """Open with `await PostgresInbox.open(url)` after the schema is migrated; `close()`."""

    def __init__(self, pool: asyncpg.Pool, url: str, schema: str, bot: int = 0) -> None:
        self._bot = bot
        self._pool = pool
        self._url = url
        self._schema = schema
        self._channel = channel_of(schema, CHANNEL_PREFIX, bot)
        self._stop_channel = channel_of(schema, STOP_CHANNEL_PREFIX, bot)
        self._listening = SharedListener(url)  # every bot's view shares this one's
        self._callback: Callable[[str], object] | None = None
        self._on_interrupt: Callable[[str, int], object] | None = None
        self._put: BatchedStatement[tuple[int, str, str], bool] = BatchedStatement(self._put_batch)
        self._finish: BatchedStatement[tuple[int, str], Row | None] = BatchedStatement(
            self._finish_batch
        )
        self._next: BatchedStatement[str, Row | None] = BatchedStatement(self._next_batch)
        self._begin: BatchedStatement[int, int | None] = BatchedStatement(self._begin_batch)

    def for_bot(self, bot: int) -> PostgresInbox:
        """The inbox of the bot of scope `bot` on this one's pool and LISTEN connection
        (closed with this one; closing the view stops only its channels)."""
        view = PostgresInbox(self._pool, self._url, self._schema, bot)
        view._owns_pool = False
        view._listening = self._listening  # one LISTEN connection per worker, not per bot
        return view

    _owns_pool = True

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 4, bot: int = 0) -> PostgresInbox:
        pool = await open_pool(url, size=pool_size, purpose="inbox")
        try:
            schema = await pool.fetchval("SELECT current_schema()")
        except BaseException:
            await pool.close()
            raise
        return cls(pool, url, str(schema), bot)

    async def close(self) -> None:
        await self._listening.forget((self._channel, self._stop_channel))
        if self._owns_pool:
            await self._listening.close()
            await self._pool.close()

    async def put(self, update_id: int, chat_key: str, payload: str) -> bool:
        """Queue an update for its chat; False (nothing queued) for an id seen before.

        Returns once the row is committed, together with the rows put meanwhile.
        """
        return await self._put((update_id, chat_key, payload))

    async def _put_batch(self, batch: Sequence[tuple[int, str, str]]) -> list[bool]:
        ids, chats, payloads = (list(column) for column in zip(*batch, strict=True))
        now = time.time()
        rows = await self._call(
            lambda c: c.fetch(
                _PUT_MANY,
                ids,
                chats,
                payloads,
                now,
                KEEP_SECONDS,
                KEEP_IDS,
                self._channel,
                self._bot,
            )
        )
        new = {int(row["update_id"]) for row in rows}
        queued = []
        for update_id in ids:
            queued.append(update_id in new)
            new.discard(update_id)  # the same id twice in one batch: queued once
        return queued

    async def remember(self, update_id: int) -> bool:
        """Record an update handled without queueing it; False for an id seen before."""
        new = await self._call(
            lambda c: c.fetchval(
                _REMEMBER, update_id, time.time(), KEEP_SECONDS, KEEP_IDS, self._bot
            )
        )
        return bool(new)

    async def pending_chats(self, exclude: Collection[str] = (), limit: int = 100) -> list[str]:
        """Chats with waiting rows, the one whose oldest row is oldest first."""
        rows = await self._call(
            lambda c: c.fetch(
                "SELECT chat_key FROM inbox WHERE bot = $3 AND NOT (chat_key = ANY($1::text[]))"
                " GROUP BY chat_key ORDER BY MIN(update_id) LIMIT $2",
                list(exclude),
                limit,
                self._bot,
            )
        )
        return [row["chat_key"] for row in rows]

    async def next(self, chat_key: str) -> Row | None:
        """The chat's waiting row with the lowest update_id, left in place (with the looks
        made meanwhile by other chats, in one statement)."""
        return await self._next(chat_key)

    async def _next_batch(self, chats: Sequence[str]) -> list[Row | None]:
        rows = await self._call(
            lambda c: c.fetch(
                "SELECT DISTINCT ON (chat_key) chat_key, update_id, payload, received_at, attempts"
                " FROM inbox WHERE bot = $2 AND chat_key = ANY($1::text[])"
                " ORDER BY chat_key, update_id",
                list(chats),
                self._bot,
            )
        )
        first = {str(row["chat_key"]): _row(row) for row in rows}
        return [first.get(chat) for chat in chats]

    async def finish(self, update_id: int, chat_key: str) -> Row | None:
        """The update was handled: delete its row (its id stays recorded) and return the
        chat's next waiting row (with the finishes made meanwhile, in one statement)."""
        return await self._finish((update_id, chat_key))

    async def _finish_batch(self, batch: Sequence[tuple[int, str]]) -> list[Row | None]:
        ids, chats = (list(column) for column in zip(*batch, strict=True))
        rows = await self._call(lambda c: c.fetch(_FINISH_MANY, ids, chats, self._bot))
        following = {str(row["chat_key"]): _row(row) for row in rows}
        return [following.get(chat) for chat in chats]

    async def begin(self, update_id: int) -> int | None:
        """Count a handling of the row as started, committed before it starts (with the
        begins made meanwhile, in one statement); the row's attempts so far, this one
        included, or None when the row is gone (dropped or replayed by an operator)."""
        return await self._begin(update_id)

    async def _begin_batch(self, ids: Sequence[int]) -> list[int | None]:
        rows = await self._call(
            lambda c: c.fetch(
                "UPDATE inbox SET attempts = attempts + 1"
                " WHERE bot = $2 AND update_id = ANY($1::bigint[]) RETURNING update_id, attempts",
                list(ids),
                self._bot,
            )
        )
        attempts = {int(row["update_id"]): int(row["attempts"]) for row in rows}
        return [attempts.get(update_id) for update_id in ids]

    async def refund(self, update_ids: Collection[int]) -> None:
        """Uncount the last started handling of each row (one that ended because the store
        was unavailable: not the update's fault), in one statement; rows gone are skipped."""
        await self._call(
            lambda c: c.execute(
                "UPDATE inbox SET attempts = attempts - 1"
                " WHERE bot = $2 AND update_id = ANY($1::bigint[]) AND attempts > 0",
                list(update_ids),
                self._bot,
            )
        )

    async def bury(self, update_id: int, chat_key: str, payload: str, reason: str) -> None:
        """Give the update up: move its row, if waiting, to `dead_letters` with `reason`, in
        one statement; an update never queued (handled at once) is recorded as it is given."""
        await self._call(
            lambda c: c.execute(_BURY, update_id, chat_key, payload, reason, time.time(), self._bot)
        )

    async def interrupt(self, chat_key: str, before: int) -> bool:
        """Tell every worker to stop the chat's update older than `before` whose handling
        started (the chat's oldest row: rows are handled in order); True when there was one."""
        found = await self._call(
            lambda c: c.fetchval(_INTERRUPT, chat_key, before, self._stop_channel, self._bot)
        )
        return found is not None

    def on_interrupt(self, callback: Callable[[str, int], object]) -> None:
        """Call `callback(chat_key, update_id)` for each update an `interrupt` names, from
        any worker (heard on the `listen` connection)."""
        self._on_interrupt = callback

    async def depth(self) -> int:
        """Rows waiting in all chats."""
        return int(await self._call(lambda c: c.fetchval("SELECT count(*) FROM inbox")))

    async def listen(self, callback: Callable[[str], object]) -> None:
        """Call `callback(chat_key)` for each new row of this bot, on the connection every
        bot's view of this pool shares (`SharedListener`).

        Calling again while that connection is up does nothing; after it broke, it
        connects again (the caller's periodic look at `pending_chats` covers the gap).
        """
        self._callback = callback
        await self._listening.listen(
            {self._channel: self._notified, self._stop_channel: self._interrupted}
        )

    def _notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._callback is not None:
            self._callback(payload)

    def _interrupted(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        update_id, _, chat_key = payload.partition(":")
        if self._on_interrupt is not None and update_id.isdigit() and chat_key:
            self._on_interrupt(chat_key, int(update_id))

    async def _call(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        return await call(self._pool, work, "inbox")


async def backlog(connection: asyncpg.Connection, bound: int = 10_000) -> Backlog:
    """The rows waiting in all chats, counted up to `bound` (one statement reading at most
    `bound` + 1 rows, whatever the depth), with the earliest arrival among them: the
    oldest waiting update's, unless more than `bound` wait."""
    row = await connection.fetchrow(
        "SELECT count(*) AS n, min(received_at) AS oldest"
        " FROM (SELECT received_at FROM inbox LIMIT $1) AS waiting",
        bound + 1,
    )
    counted = int(row["n"])
    oldest = row["oldest"]
    return Backlog(min(counted, bound), counted > bound, None if oldest is None else float(oldest))


def _row(row: asyncpg.Record | None) -> Row | None:
    if row is None:
        return None
    return Row(
        int(row["update_id"]),
        str(row["payload"]),
        float(row["received_at"]),
        int(row["attempts"]),
    )


def channel_of(schema: str, prefix: str = CHANNEL_PREFIX, bot: int = 0) -> str:
    """A notification channel of the inbox of the bot of scope `bot` in `schema` (at most
    50 characters for any schema name and scope: identifiers take 63)."""
    name = prefix + hashlib.blake2b(schema.encode(), digest_size=8).hexdigest()
    return name if bot == 0 else f"{name}_{bot}"


_RECORD = (
    # Record the bot's ($5) id as received ($1 id, $2 now), pruning ids past the kept bounds
    # ($3 seconds, $4 ids). Every data-modifying part of a WITH runs, read or not, in one
    # transaction.
    "WITH recorded AS (INSERT INTO telegram_updates (bot, update_id, received_at)"
    " VALUES ($5, $1, $2) ON CONFLICT (bot, update_id) DO NOTHING RETURNING update_id),"
    " too_old AS (DELETE FROM telegram_updates WHERE received_at < $2 - $3),"
    " too_far AS (DELETE FROM telegram_updates WHERE bot = $5 AND update_id <= $1 - $4)"
)
_REMEMBER = f"{_RECORD} SELECT count(*) FROM recorded"
_PUT_MANY = (
    # Record the ids ($1 ids, $4 now), prune ids past the kept bounds ($5 seconds, $6 ids),
    # queue the rows ($2 chat keys, $3 payloads) whose id was new, announce each on the
    # channel ($7) at commit, and return the ids queued; all of them the bot's ($8). Every
    # data-modifying part of a WITH runs, read or not, in one transaction; none sees the
    # rows another one writes.
    "WITH incoming AS (SELECT DISTINCT ON (update_id) * FROM unnest($1::bigint[],"
    " $2::text[], $3::text[]) AS i (update_id, chat_key, payload) ORDER BY update_id),"
    " recorded AS (INSERT INTO telegram_updates (bot, update_id, received_at)"
    " SELECT $8, update_id, $4 FROM incoming ON CONFLICT (bot, update_id) DO NOTHING"
    " RETURNING update_id),"
    " too_old AS (DELETE FROM telegram_updates WHERE received_at < $4 - $5),"
    " too_far AS (DELETE FROM telegram_updates"
    " WHERE bot = $8 AND update_id <= (SELECT max(update_id) FROM incoming) - $6),"
    " queued AS (INSERT INTO inbox (bot, update_id, chat_key, payload, received_at)"
    " SELECT $8, i.update_id, i.chat_key, i.payload, $4 FROM incoming i"
    " JOIN recorded USING (update_id) RETURNING update_id, chat_key)"
    " SELECT update_id, pg_notify($7, chat_key) FROM queued"
)
_FINISH_MANY = (
    # Delete the handled rows ($1) and read the next row of each of their chats ($2, one
    # chat per row: a chat is worked by one task at a time); the read does not see the
    # delete (one snapshot), hence the explicit exclusion; all of them the bot's ($3).
    "WITH gone AS (DELETE FROM inbox WHERE bot = $3 AND update_id = ANY($1::bigint[]))"
    " SELECT chat.chat_key, following.* FROM unnest($2::text[]) AS chat (chat_key)"
    " CROSS JOIN LATERAL (SELECT update_id, payload, received_at, attempts FROM inbox"
    " WHERE inbox.bot = $3 AND inbox.chat_key = chat.chat_key"
    " AND NOT (update_id = ANY($1::bigint[]))"
    " ORDER BY update_id LIMIT 1) AS following"
)
_BURY = (
    # Move the row ($1) to the dead letters with its attempts and arrival, or, for an update
    # never queued, record it as given ($2 chat key, $3 payload, one attempt, arrived now);
    # $4 reason, $5 now. A letter already there for the id (buried before, then replayed)
    # is replaced. All of it the bot's ($6).
    "WITH gone AS (DELETE FROM inbox WHERE bot = $6 AND update_id = $1"
    " RETURNING update_id, chat_key, payload, attempts, received_at),"
    " letter AS (SELECT * FROM gone UNION ALL"
    " SELECT $1::bigint, $2::text, $3::text, 1, $5::double precision"
    " WHERE NOT EXISTS (SELECT 1 FROM gone))"
    " INSERT INTO dead_letters (bot, update_id, chat_key, payload, attempts, reason,"
    " received_at, dead_at) SELECT $6, update_id, chat_key, payload, attempts, $4::text,"
    " received_at, $5 FROM letter"
    " ON CONFLICT (bot, update_id) DO UPDATE SET chat_key = EXCLUDED.chat_key,"
    " payload = EXCLUDED.payload, attempts = EXCLUDED.attempts, reason = EXCLUDED.reason,"
    " received_at = EXCLUDED.received_at, dead_at = EXCLUDED.dead_at"
)
_INTERRUPT = (
    # The chat's ($1) oldest row before the command ($2), if its handling started, announced
    # on the stop channel ($3) as "<update_id>:<chat key>" at commit; its id, else no row.
    # The bot's ($4) rows only.
    "SELECT update_id, pg_notify($3, update_id || ':' || chat_key) FROM (SELECT update_id,"
    " chat_key, attempts FROM inbox WHERE bot = $4 AND chat_key = $1 AND update_id < $2"
    " ORDER BY update_id LIMIT 1) AS oldest WHERE attempts > 0"
)
