"""Working the shared inbox: each chat's updates in order, by one worker process at a time.

Invariants:
- A chat is worked by the worker holding its claim (`try_hold("inbox:" + chat)`, an
  advisory lock across processes); that worker hands its rows to `process` lowest
  update_id first, one at a time, and deletes each only after `process` returned. A
  worker that dies mid-update leaves the row: its lock connection closes, and another
  worker claims the chat at its next look (a notification or the periodic poll), so
  every queued update is processed at least once. An update whose processing raised is
  logged and deleted, so one bad update never blocks its chat.
- No row waits for a chat nobody works: a worker ends its claim only after its last look
  at the chat's rows found none and no notification for the chat arrived since that look
  (a notification arriving while the chat is worked marks it to be looked at again; one
  arriving after the claim ended starts a new claim), and a missed notification is made
  up for by the periodic look.
- An update accepted by this worker is parsed once: the parsed update is kept (a bounded
  number of them) for when this worker processes it.
- Different chats run in parallel, up to `concurrency` chats per worker.
- /reset and /status (`unordered_commands`) are processed at once by the worker that
  accepts them, never queued behind the chat's running turn; their ids are recorded so a
  redelivery is dropped. Like any update accepted that way they are handled at most once:
  a worker that dies between accepting one and processing it loses that one command.
  A /reset that reaches another worker than the one running the chat's turn cannot stop
  that turn early: the turn's reply then lands before the reset or is superseded by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from telegram import Bot, Update

from bot.chat import conversation_key
from bot.ordering import command_of
from core.errors import StoreUnavailable

log = logging.getLogger(__name__)

CLAIM_PREFIX = "inbox:"
POLL_INTERVAL = 1.0
CONCURRENCY = 1000
STOP_GRACE = 30.0

PARSED_KEPT = 10_000

Process = Callable[[str, Update | None], Awaitable[object]]
"""Handle one update given as its JSON text, with its parsed form when this worker has it
(else None); returns once the update was fully handled."""


class Inbox(Protocol):
    """The shared queue of accepted updates (`storage.pg_inbox.PostgresInbox`)."""

    async def put(self, update_id: int, chat_key: str, payload: str) -> bool: ...
    async def remember(self, update_id: int) -> bool: ...
    async def pending_chats(self, exclude: Collection[str] = (), limit: int = 100) -> list[str]: ...
    async def next(self, chat_key: str) -> tuple[int, str, float] | None:
        """The chat's oldest row: (update_id, payload, received_at in epoch seconds)."""
        ...

    async def finish(self, update_id: int, chat_key: str) -> tuple[int, str, float] | None:
        """Delete the handled row, then give the chat's next row (as `next`)."""
        ...

    async def listen(self, callback: Callable[[str], object]) -> None: ...


class Claims(Protocol):
    """Non-blocking claims across processes (`storage.pg_locks.PostgresChatLocks`)."""

    def try_hold(self, key: str) -> AbstractAsyncContextManager[bool]: ...


class InboxWorker:
    """`accept` is the update sink (webhook, polling leader); `run` works the inbox until
    `stop()` (then the updates being processed finish) or cancellation (nothing finishes)."""

    def __init__(
        self,
        inbox: Inbox,
        claims: Claims,
        process: Process,
        *,
        unordered_commands: Iterable[str] = (),
        concurrency: int = CONCURRENCY,
        poll_interval: float = POLL_INTERVAL,
        stop_grace: float = STOP_GRACE,
        on_claim: Callable[[float], object] | None = None,
        bot: Bot | None = None,
    ) -> None:
        """`on_claim` hears, as each queued update starts, the seconds since it was accepted;
        `bot` is the one parsed updates are bound to (`Update.de_json(data, bot)`)."""
        self._inbox = inbox
        self._claims = claims
        self._process = process
        self._unordered = frozenset(unordered_commands)
        self._concurrency = concurrency
        self._poll_interval = poll_interval
        self._stop_grace = stop_grace
        self._on_claim = on_claim
        self._bot = bot
        self._chats: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()  # worked chats with a row announced since the last look
        self._parsed: dict[int, Update] = {}  # accepted here, not yet processed here
        self._immediate: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    async def accept(self, update: dict[str, Any], parsed: Update | None = None) -> bool:
        """Queue (or, for an unordered command, start handling) a new update; False for a
        redelivery. Returns once the update is durably accepted.

        `parsed` is the update already parsed from `update` with this worker's bot, if the
        caller has it; else it is parsed here, once: for its command, its chat, processing.
        """
        update_id = int(update["update_id"])
        payload = json.dumps(update, ensure_ascii=False, separators=(",", ":"))
        if parsed is None:
            parsed = Update.de_json(update, self._bot)
        if command_of(parsed) in self._unordered:
            if not await self._inbox.remember(update_id):
                return False
            task = asyncio.create_task(self._handle(update_id, payload, parsed))
            self._immediate.add(task)
            task.add_done_callback(self._immediate.discard)
            return True
        chat = conversation_key(parsed) or f"update:{update_id}"
        self._keep(update_id, parsed)
        queued = await self._inbox.put(update_id, chat, payload)
        if not queued:
            self._parsed.pop(update_id, None)
        return queued

    async def run(self) -> None:
        try:
            while not self._stopping.is_set():
                await self._look()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self._poll_interval)
            busy = [*self._chats.values(), *self._immediate]
            if busy:
                await asyncio.wait(busy, timeout=self._stop_grace)
        finally:
            busy = [*self._chats.values(), *self._immediate]
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)

    def stop(self) -> None:
        """Claim nothing more; each chat ends after the update it is processing."""
        self._stopping.set()

    async def _look(self) -> None:
        """Listen for new rows (again, if the connection broke) and claim waiting chats."""
        try:
            await self._inbox.listen(self._heard)
            free = self._concurrency - len(self._chats)
            if free > 0:
                for chat in await self._inbox.pending_chats(exclude=set(self._chats), limit=free):
                    self._claim(chat)
        except StoreUnavailable as exc:
            log.warning("inbox: cannot look for updates now: %s", exc)

    def _heard(self, chat: str) -> None:
        if chat in self._chats:
            self._again.add(chat)
        elif not self._stopping.is_set() and len(self._chats) < self._concurrency:
            self._claim(chat)

    def _claim(self, chat: str) -> None:
        if chat in self._chats:
            return
        task = asyncio.create_task(self._work(chat))
        self._chats[chat] = task
        task.add_done_callback(lambda done: self._forget(chat, done))

    def _forget(self, chat: str, task: asyncio.Task[None]) -> None:
        if self._chats.get(chat) is task:
            del self._chats[chat]
            self._again.discard(chat)

    async def _work(self, chat: str) -> None:
        try:
            while not self._stopping.is_set():
                self._again.discard(chat)  # the drain's looks cover what was heard so far
                async with self._claims.try_hold(CLAIM_PREFIX + chat) as held:
                    if not held:  # another worker has it
                        return
                    await self._drain(chat)
                if chat not in self._again:
                    return
        except StoreUnavailable as exc:
            log.warning("inbox: chat %s left for later: %s", chat, exc)
        finally:
            # Synchronously with the last check: from here a notification starts a new claim.
            if (task := asyncio.current_task()) is not None:
                self._forget(chat, task)

    async def _drain(self, chat: str) -> None:
        row = await self._inbox.next(chat)
        while row is not None and not self._stopping.is_set():
            update_id, payload, received_at = row
            if self._on_claim is not None:
                self._on_claim(max(time.time() - received_at, 0.0))
            await self._handle(update_id, payload, self._parsed.pop(update_id, None))
            row = await self._inbox.finish(update_id, chat)

    async def _handle(self, update_id: int, payload: str, parsed: Update | None) -> None:
        try:
            await self._process(payload, parsed)
        except Exception:
            log.exception("inbox: update %d failed; it is dropped", update_id)

    def _keep(self, update_id: int, parsed: Update) -> None:
        self._parsed[update_id] = parsed
        if len(self._parsed) > PARSED_KEPT:  # processed elsewhere: forget the oldest
            del self._parsed[next(iter(self._parsed))]
