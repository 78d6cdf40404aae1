"""Working the shared inbox: each chat's updates in order, by one worker process at a time.

Invariants:
- A chat is worked by the worker holding its claim (`try_hold("inbox:" + chat)`, an
  advisory lock across processes); that worker hands its rows to `process` lowest
  update_id first, one at a time, and deletes each only after `process` returned. A
  worker that dies mid-update leaves the row: its lock connection closes, and another
  worker claims the chat at its next look (a notification or the periodic poll), so
  every queued update is processed at least once.
- One bad update never holds its chat: each handling is counted in its row before it
  starts (`Inbox.begin`, committed, so a crash mid-update counts too), and a row whose
  handlings reached `max_attempts` is not handled again; a handling that runs past
  `deadline` is cancelled, and one that raised is not retried. In each case the update
  is moved to the dead letters with the reason ("attempts", "deadline", "error"), the
  user is told once (`on_dead`, after the move: at most once) and the chat's next update
  goes on.
- An outage loses no update: a handling that ended because the store was unavailable
  (`StoreUnavailable` raised, or swallowed by a handler that told the user: see
  `bot.transport.outage.store_failed`) leaves the row, its attempt uncounted (`Inbox.refund`, kept
  and made again at each look while the database refuses it), and the chat is looked at
  again after a back-off growing from `outage_retry` to `outage_retry_max` seconds, by
  this worker (another worker's look may take it earlier: each backs off on its own);
  nothing else of the chat runs before it. The inbox's own statements failing leave the
  row as they found it.
- No row waits for a chat nobody works: a worker ends its claim only after its last look
  at the chat's rows found none and no notification for the chat arrived since that look
  (a notification arriving while the chat is worked marks it to be looked at again; one
  arriving after the claim ended starts a new claim), and a missed notification is made
  up for by the periodic look.
- The worker outlives any failure of its looks: a look that fails (the database down,
  anything else) is logged and made again with back-off (`telemetry.supervision`), and a
  chat whose work failed is claimed again at a later look; the looks' heartbeats tell
  `/healthz` whether the worker is still doing its job.
- An update accepted by this worker is parsed once: the parsed update is kept (a bounded
  number of them) for when this worker processes it.
- Different chats run in parallel, up to `concurrency` chats per worker.
- /reset and /status (`unordered_commands`) are processed at once by the worker that
  accepts them, never queued behind the chat's running turn; their ids are recorded so a
  redelivery is dropped. Like any update accepted that way they are handled at most once:
  a worker that dies between accepting one and processing it loses that one command.
- An `interrupting_commands` command (/reset), once its handler allows it
  (`bot.updates.in_flight.stop_earlier`), stops the chat's update being handled, if it came before
  the command, on whichever worker handles it: this worker stops its own at once, and
  `Inbox.interrupt` names the chat's started update to every worker (one whose
  notification connection is down misses it; its handling then ends as it would have).
  The stopped update is deleted like a handled one (the user asked to start over); what
  it had stored stays, as after any turn a /reset stops (`bot.updates.in_flight`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from telegram import Bot, Update

from bot.transport.chat import conversation_key
from bot.transport.outage import keep_update
from bot.updates.in_flight import Ended, Handlings, offer_stop_earlier
from bot.updates.ordering import command_of
from core.domain.errors import StoreUnavailable
from telemetry.supervision import LoopRegistry, Pace, supervise

log = logging.getLogger(__name__)

CLAIM_PREFIX = "inbox:"
POLL_INTERVAL = 1.0
MAX_RETRY = 5.0  # the longest wait between looks while they fail (the database is down)
LONGEST_LOOK = 60.0  # a look (connect, LISTEN, one query) taking longer is stuck
CONCURRENCY = 1000
STOP_GRACE = 30.0
MAX_ATTEMPTS = 3
OUTAGE_RETRY = 1.0  # seconds before a chat whose update met an unavailable store is tried again
OUTAGE_RETRY_MAX = 30.0  # ... doubling after each such failure in a row, up to this
DEADLINE = 2700.0  # seconds; the settings derive it from the model's timeouts

PARSED_KEPT = 10_000

Process = Callable[[str, Update | None], Awaitable[object]]
"""Handle one update given as its JSON text, with its parsed form when this worker has it
(else None); returns once the update was fully handled."""

OnDead = Callable[[str, Update | None, str], Awaitable[object]]
"""Hear of an update given up (its JSON, its parsed form or None, the reason), once it
was moved to the dead letters: tell its chat."""


class Inbox(Protocol):
    """The shared queue of accepted updates
    (`storage.postgres.cluster.inbox.PostgresInbox`)."""

    async def put(self, update_id: int, chat_key: str, payload: str) -> bool: ...
    async def remember(self, update_id: int) -> bool: ...
    async def pending_chats(self, exclude: Collection[str] = (), limit: int = 100) -> list[str]: ...
    async def next(self, chat_key: str) -> tuple[int, str, float, int] | None:
        """The chat's oldest row: (update_id, payload, received_at in epoch seconds,
        handlings started)."""
        ...

    async def finish(self, update_id: int, chat_key: str) -> tuple[int, str, float, int] | None:
        """Delete the handled row, then give the chat's next row (as `next`)."""
        ...

    async def begin(self, update_id: int) -> int | None:
        """Count a handling as started (committed); the count, or None if the row is gone."""
        ...

    async def refund(self, update_ids: Collection[int]) -> None:
        """Uncount the last started handling of each row (it ended in a store outage)."""
        ...

    async def bury(self, update_id: int, chat_key: str, payload: str, reason: str) -> None:
        """Move the update (its row, or as given) to the dead letters."""
        ...

    async def interrupt(self, chat_key: str, before: int) -> bool:
        """Tell every worker to stop the chat's started update older than `before`; True
        when there was one."""
        ...

    def on_interrupt(self, callback: Callable[[str, int], object]) -> None:
        """Hear `(chat_key, update_id)` for each update an `interrupt` names."""
        ...

    async def listen(self, callback: Callable[[str], object]) -> None: ...


class Claims(Protocol):
    """Non-blocking claims across processes
    (`storage.postgres.cluster.locks.PostgresChatLocks`)."""

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
        interrupting_commands: Iterable[str] = (),
        max_attempts: int = MAX_ATTEMPTS,
        deadline: float = DEADLINE,
        on_dead: OnDead | None = None,
        loops: LoopRegistry | None = None,
        outage_retry: float = OUTAGE_RETRY,
        outage_retry_max: float = OUTAGE_RETRY_MAX,
        scope: int = 0,
    ) -> None:
        """`on_claim` hears, as each queued update starts, the seconds since it was accepted;
        `bot` is the one parsed updates are bound to (`Update.de_json(data, bot)`);
        `interrupting_commands` (among the unordered ones) may stop the chat's running update;
        an update is given up after `max_attempts` handlings or one running `deadline`
        seconds, or when its handling raised, and `on_dead` tells its chat; the looks report
        to `loops` as the loop "inbox" (what `/healthz` reads); a chat whose update met an
        unavailable store waits `outage_retry` seconds, doubling up to `outage_retry_max`;
        `scope` is the bot whose updates these are: their chats are keyed in it."""
        self._scope = scope
        self._inbox = inbox
        self._claims = claims
        self._process = process
        self._unordered = frozenset(unordered_commands)
        self._concurrency = concurrency
        self._poll_interval = poll_interval
        self._stop_grace = stop_grace
        self._on_claim = on_claim
        self._bot = bot
        self._loops = loops if loops is not None else LoopRegistry()
        self._chats: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()  # worked chats with a row announced since the last look
        self._parsed: dict[int, Update] = {}  # accepted here, not yet processed here
        self._immediate: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._interrupting = frozenset(interrupting_commands)
        self._max_attempts = max_attempts
        self._deadline = deadline
        self._on_dead = on_dead
        self._handlings = Handlings(deadline)
        self._outage_retry = outage_retry
        self._outage_retry_max = outage_retry_max
        self._deferred: dict[str, tuple[float, int]] = {}  # chat → (retry when, failures)
        self._refunds: set[int] = set()  # attempts to uncount, not written yet
        inbox.on_interrupt(self._handlings.stop)

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
        command = command_of(parsed)
        if command in self._unordered:
            if not await self._inbox.remember(update_id):
                return False
            interrupts = command in self._interrupting
            task = asyncio.create_task(self._at_once(update_id, payload, parsed, interrupts))
            self._immediate.add(task)
            task.add_done_callback(self._immediate.discard)
            return True
        chat = conversation_key(parsed, self._scope) or f"update:{update_id}"
        self._keep(update_id, parsed)
        queued = await self._inbox.put(update_id, chat, payload)
        if not queued:
            self._parsed.pop(update_id, None)
        return queued

    async def run(self) -> None:
        """Look for waiting chats every `poll_interval` until `stop()`; a look that fails
        (the database is down, anything else) is logged and made again, backing off."""
        pace = Pace(
            self._poll_interval,
            LONGEST_LOOK,
            first_retry=min(self._poll_interval, MAX_RETRY),
            max_retry=MAX_RETRY,
        )
        try:
            await supervise("inbox", self._look, pace, self._loops, stop=self._stopping)
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
        """Listen for new rows (again, if the connection broke), write the refunds owed and
        claim waiting chats (not those backing off)."""
        await self._inbox.listen(self._heard)
        if self._refunds:
            owed = set(self._refunds)
            await self._inbox.refund(owed)
            self._refunds -= owed
        now = time.monotonic()
        for chat, (when, _) in list(self._deferred.items()):
            if when < now - self._outage_retry_max:  # long over (handled elsewhere): forgotten
                del self._deferred[chat]
        free = self._concurrency - len(self._chats)
        if free > 0:
            waiting = {chat for chat, (when, _) in self._deferred.items() if when > now}
            busy = set(self._chats) | waiting
            for chat in await self._inbox.pending_chats(exclude=busy, limit=free):
                self._claim(chat)

    def _heard(self, chat: str) -> None:
        if chat in self._chats:
            self._again.add(chat)
        elif self._backing_off(chat):  # the look after the back-off takes it
            return
        elif not self._stopping.is_set() and len(self._chats) < self._concurrency:
            self._claim(chat)

    def _backing_off(self, chat: str) -> bool:
        deferred = self._deferred.get(chat)
        return deferred is not None and deferred[0] > time.monotonic()

    async def _defer(self, chat: str, update_id: int) -> None:
        """The chat's update met an unavailable store: uncount its attempt (or owe it) and
        back off before the chat is tried again."""
        failures = self._deferred.get(chat, (0.0, 0))[1] + 1
        delay = min(self._outage_retry * 2 ** (failures - 1), self._outage_retry_max)
        self._deferred[chat] = (time.monotonic() + delay, failures)
        try:
            await self._inbox.refund([update_id])
        except StoreUnavailable:  # made at the next look that gets through
            self._refunds.add(update_id)

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
        except Exception:  # its rows stay: the next look claims the chat again
            log.exception("inbox: chat %s failed; left for later", chat)
        finally:
            # Synchronously with the last check: from here a notification starts a new claim.
            if (task := asyncio.current_task()) is not None:
                self._forget(chat, task)

    async def _drain(self, chat: str) -> None:
        row = await self._inbox.next(chat)
        while row is not None and not self._stopping.is_set():
            update_id, payload, received_at, attempts = row
            parsed = self._parsed.pop(update_id, None)
            if attempts >= self._max_attempts:  # each of them died or hung up its worker
                await self._give_up(update_id, chat, payload, parsed, "attempts")
                row = await self._inbox.next(chat)
                continue
            if await self._inbox.begin(update_id) is None:  # dropped or replayed meanwhile
                row = await self._inbox.next(chat)
                continue
            if self._on_claim is not None:
                self._on_claim(max(time.time() - received_at, 0.0))
            try:
                failure = await self._handle(chat, update_id, payload, parsed, queued=True)
            except StoreUnavailable:
                await self._defer(chat, update_id)
                raise
            self._deferred.pop(chat, None)
            if failure is None:
                row = await self._inbox.finish(update_id, chat)
            else:
                await self._give_up(update_id, chat, payload, parsed, failure)
                row = await self._inbox.next(chat)

    async def _handle(
        self, chat: str, update_id: int, payload: str, parsed: Update | None, *, queued: bool
    ) -> str | None:
        """Process one update within the deadline; None when it was handled (or stopped by
        an interrupting command), else why it is given up ("deadline" or "error"); raises
        StoreUnavailable when the store failed it. A `queued` update is the chat's running
        one (an interrupting command stops it) and kept on an outage (`keep_update`)."""

        async def kept() -> None:  # in the handling's own context (a task of its own)
            update = keep_update()
            await self._process(payload, parsed)
            if update.failed:  # a handler told the user and returned: handled again later
                raise StoreUnavailable("the store was unavailable while the update was handled")

        outcome = await self._handlings.run(
            chat if queued else None,
            update_id,
            kept if queued else (lambda: self._process(payload, parsed)),
        )
        if outcome.ended is Ended.STOPPED:
            log.info("inbox: update %d of chat %s stopped by a command", update_id, chat)
            return None
        if outcome.ended is Ended.PAST_DEADLINE:
            log.warning(
                "inbox: update %d of chat %s still running after %g s: stopped",
                update_id,
                chat,
                self._deadline,
            )
            return "deadline"
        if isinstance(outcome.error, StoreUnavailable):  # not the update's fault: later
            raise outcome.error
        if outcome.ended is Ended.FAILED:
            log.error("inbox: update %d failed", update_id, exc_info=outcome.error)
            return "error"
        return None

    async def _at_once(
        self, update_id: int, payload: str, parsed: Update, interrupts: bool
    ) -> None:
        """Process an unordered command; an interrupting one may stop the chat's running
        update, here or on another worker (`bot.updates.in_flight.stop_earlier`)."""
        chat = conversation_key(parsed, self._scope) or f"update:{update_id}"
        if interrupts:  # the context of this task and of its processing
            offer_stop_earlier(lambda: self._stop_earlier(chat, update_id))
        try:
            failure = await self._handle(chat, update_id, payload, parsed, queued=False)
        except StoreUnavailable as exc:  # never queued: nothing to try again
            log.warning("inbox: update %d failed: %s", update_id, exc)
            return
        if failure is not None:
            await self._give_up(update_id, chat, payload, parsed, failure)

    async def _stop_earlier(self, chat: str, before: int) -> bool:
        """Stop the chat's update older than update `before`, here and on every worker."""
        stopped = self._handlings.stop_before(chat, before)
        try:
            return await self._inbox.interrupt(chat, before) or stopped
        except StoreUnavailable as exc:
            log.warning("inbox: chat %s not interrupted elsewhere: %s", chat, exc)
            return stopped

    async def _give_up(
        self, update_id: int, chat: str, payload: str, parsed: Update | None, reason: str
    ) -> None:
        """Move the update to the dead letters, then tell its chat (once: after the move)."""
        await self._inbox.bury(update_id, chat, payload, reason)
        log.warning("inbox: update %d of chat %s given up (%s)", update_id, chat, reason)
        if self._on_dead is None:
            return
        try:
            await self._on_dead(payload, parsed, reason)
        except Exception:
            log.exception("inbox: chat %s not told that update %d was given up", chat, update_id)

    def _keep(self, update_id: int, parsed: Update) -> None:
        self._parsed[update_id] = parsed
        if len(self._parsed) > PARSED_KEPT:  # processed elsewhere: forget the oldest
            del self._parsed[next(iter(self._parsed))]
