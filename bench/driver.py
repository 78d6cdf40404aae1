"""The load driver: plays users against whichever bot is attached to the fake Bot API.

Invariant: a round is timed only from timestamps taken inside the fakes (the
fake records `time.monotonic()` when an update is queued and when each Bot API
call arrives), never from when the driver happened to notice, so the driver's
own speed does not enter the figures. A round is complete at the first
successful `sendMessage` to its chat after its update was pushed; its first
visible text is the first `sendMessage`, `sendMessageDraft` or `editMessageText`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

VISIBLE = frozenset({"sendMessage", "sendMessageDraft", "editMessageText"})


@dataclass
class Round:
    chat_id: int
    text: str
    pushed_at: float = 0.0
    first_at: float | None = None
    done_at: float | None = None

    @property
    def first_latency(self) -> float:
        assert self.first_at is not None
        return self.first_at - self.pushed_at

    @property
    def done_latency(self) -> float:
        assert self.done_at is not None
        return self.done_at - self.pushed_at


class Driver:
    """Pushes user messages and follows the bot's calls through the fakes' control endpoints."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        telegram_port: int,
        model_port: int,
        *,
        route: Callable[[int], str] | None = None,
    ):
        """`route` names the bot (its token) each chat id writes to, when the fake serves
        several; without it every chat writes to the one bot."""
        self._http = session
        self._route = route
        self._tg = f"http://127.0.0.1:{telegram_port}"
        self._model = f"http://127.0.0.1:{model_port}"
        self._cursor = 0
        self._pending: dict[int, Round] = {}
        self._on_done: dict[int, Callable[[Round], None]] = {}
        self.method_counts: Counter[str] = Counter()  # every Bot API call the bot made
        self.sent_by_bot: Counter[str] = Counter()  # sendMessage calls taken, by token
        self._follower: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._chat_ids = itertools.count(1000)

    def new_chat(self) -> int:
        return next(self._chat_ids)

    async def __aenter__(self) -> Driver:
        self._follower = asyncio.create_task(self._follow())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    # -- plumbing ------------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Long-poll the fake's calls and settle rounds as their replies arrive."""
        url = f"{self._tg}/_bench/calls"
        while True:
            try:
                async with self._http.get(
                    url, params={"since": self._cursor, "wait": "1"}
                ) as response:
                    body = await response.json()
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
                continue
            self._cursor = body["next"]
            for call in body["calls"]:
                self._see(call)
            self._changed.set()
            self._changed = asyncio.Event()

    def _see(self, call: dict[str, Any]) -> None:
        method = call["method"]
        self.method_counts[method] += 1
        if method not in VISIBLE or call["status"] != 200:
            return
        if method == "sendMessage":
            self.sent_by_bot[call.get("token", "")] += 1
        chat_id = call["chat_id"]
        round_ = self._pending.get(chat_id)
        if round_ is None or call["monotonic"] < round_.pushed_at:
            return
        if round_.first_at is None:
            round_.first_at = call["monotonic"]
        if method == "sendMessage":
            round_.done_at = call["monotonic"]
            del self._pending[chat_id]
            callback = self._on_done.pop(chat_id, None)
            if callback is not None:
                callback(round_)

    def track(self, round_: Round) -> None:
        """Time `round_`, whose message the caller pushes (and sets `pushed_at` for)."""
        round_.pushed_at = 0.0
        self._pending[round_.chat_id] = round_

    async def push(
        self, rounds: list[Round], callback: Callable[[Round], None] | None = None
    ) -> None:
        """Queue one message per round (one request) and start timing them."""
        for round_ in rounds:
            # Calls may be seen before the push answer: 0 accepts them (a chat's earlier
            # round ended with its sendMessage, and nothing visible follows that).
            round_.pushed_at = 0.0
            self._pending[round_.chat_id] = round_
            if callback is not None:
                self._on_done[round_.chat_id] = callback
        route = self._route
        by_bot: dict[str | None, list[Round]] = {}
        for round_ in rounds:
            by_bot.setdefault(None if route is None else route(round_.chat_id), []).append(round_)
        for token, some in by_bot.items():
            items = [{"chat_id": r.chat_id, "user_id": r.chat_id, "text": r.text} for r in some]
            params = {} if token is None else {"token": token}
            async with self._http.post(
                f"{self._tg}/_control/updates", json=items, params=params
            ) as response:
                pushed = await response.json()
            for round_, info in zip(some, pushed, strict=True):
                round_.pushed_at = info["monotonic"]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return True

    async def wait_ready(self, timeout: float = 30.0) -> bool:  # noqa: ASYNC109
        """The bot is polling once it has asked for updates."""
        return await self.wait_until(lambda: "getUpdates" in self.method_counts, timeout)

    async def model_mode(self, **mode: float | str) -> None:
        async with self._http.post(f"{self._model}/_bench/mode", json=mode) as response:
            await response.read()

    async def model_requests(self, since: int = 0) -> dict[str, Any]:
        async with self._http.get(
            f"{self._model}/_bench/requests", params={"since": since}
        ) as response:
            found: dict[str, Any] = await response.json()
        return found

    async def model_formats(self, since: int = 0) -> dict[str, Any]:
        """The model requests past index `since` by the response format they asked for,
        and the index the next request will have (`next`)."""
        async with self._http.get(
            f"{self._model}/_bench/formats", params={"since": since}
        ) as response:
            found: dict[str, Any] = await response.json()
        return found

    async def model_excerpts(self, since: int = 0) -> dict[str, int]:
        """The model requests past index `since` by how many knowledge-base excerpts they
        carried (as text: "0", "6")."""
        async with self._http.get(
            f"{self._model}/_bench/excerpts", params={"since": since}
        ) as response:
            found: dict[str, int] = (await response.json())["excerpts"]
        return found

    # -- scenarios -----------------------------------------------------------------------------

    async def one_round(self, chat_id: int, text: str, timeout: float = 30.0) -> Round:  # noqa: ASYNC109
        round_ = Round(chat_id, text)
        await self.push([round_])
        if not await self.wait_until(lambda: round_.done_at is not None, timeout):
            raise TimeoutError(f"no reply in chat {chat_id} within {timeout} s")
        return round_

    async def sequential(self, count: int, chats: int = 3, pause: float = 0.02) -> list[Round]:
        """`count` rounds one at a time (the bot idle otherwise), over a few chats."""
        ids = [self.new_chat() for _ in range(chats)]
        done = []
        for n in range(count):
            chat_id = ids[n % chats]
            done.append(await self.one_round(chat_id, message_text(chat_id, n)))
            await asyncio.sleep(pause)
        return done

    async def closed_loop(self, chats: int, seconds: float, drain: float = 15.0) -> LoopResult:
        """Each chat writes again as soon as its reply is complete, for `seconds`."""
        ids = [self.new_chat() for _ in range(chats)]
        counters = dict.fromkeys(ids, 0)
        finished: list[Round] = []
        ready: list[Round] = []
        wake = asyncio.Event()

        def on_done(round_: Round) -> None:
            finished.append(round_)
            chat = round_.chat_id
            counters[chat] += 1
            ready.append(Round(chat, message_text(chat, counters[chat])))
            wake.set()

        started = time.monotonic()
        end = started + seconds
        await self.push([Round(c, message_text(c, 0)) for c in ids], on_done)
        while time.monotonic() < end:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), end - time.monotonic())
            wake.clear()
            if ready and time.monotonic() < end:
                batch, ready[:] = list(ready), []
                await self.push(batch, on_done)
        in_window = [r for r in finished if r.done_at is not None and r.done_at <= end]
        drained = await self.wait_until(lambda: not self._pending, drain)
        return LoopResult(in_window, len(finished), seconds, drained)

    async def burst(self, chats: int, timeout: float = 60.0) -> tuple[list[Round], bool]:  # noqa: ASYNC109
        """`chats` new chats write at the same moment; wait until all are answered."""
        rounds = [Round(c, message_text(c, 0)) for c in (self.new_chat() for _ in range(chats))]
        await self.push(rounds)
        ok = await self.wait_until(lambda: all(r.done_at is not None for r in rounds), timeout)
        return rounds, ok


@dataclass
class LoopResult:
    rounds: list[Round]
    completed_total: int
    seconds: float
    drained: bool

    @property
    def per_second(self) -> float:
        return len(self.rounds) / self.seconds


def message_text(chat_id: int, n: int) -> str:
    """A user message of realistic length, unique per chat and round."""
    return (
        f"Message {n} from chat {chat_id}: we run a small online shop and want to choose "
        "between two payment providers; what should we look at first?"
    )
