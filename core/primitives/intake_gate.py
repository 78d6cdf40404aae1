"""A gate that lets a few turns at a time through their intake: the work between an update's
arrival and its model call (the store's reads, the user's message committed, the prompt).

Why: every step of an intake awaits the store, and the store serves its callers in order.
A burst of 500 turns entering together therefore advances in lockstep: each waits for all
500 first reads before its second one, so no model call starts before most of the intake
is done, and the model's wait overlaps none of it. Through a gate of a few slots the first
turns reach the model at once, and the rest of the intake runs while they wait for it.

Invariants:
- at most `slots` tickets are held at once; waiters enter in arrival order (asyncio's
  semaphore is FIFO);
- a ticket is given back exactly once, at the first of: `leave_intake()` in its context
  (the model call starts), the end of the `enter()` block (the turn ended without a model
  call: a command, a refusal, an error, a cancellation), or `hold_limit` seconds after it
  was taken, so a slow intake (a large file, a slow knowledge search, a database outage)
  makes the gate wider, never the turns behind it wait for it;
- a turn entered through a gate cannot enter it again inside the same context (it would
  wait for itself): a nested `enter()` passes straight through.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

DEFAULT_SLOTS = 64
DEFAULT_HOLD_LIMIT = 0.25
"""Seconds a turn may keep its slot before the next turn may enter anyway."""


class _Ticket:
    __slots__ = ("_gate", "_timer", "held")

    def __init__(self, gate: IntakeGate) -> None:
        self._gate = gate
        self.held = True
        self._timer: asyncio.TimerHandle | None = None

    def start_timer(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self.give_back)

    def give_back(self) -> None:
        if not self.held:
            return
        self.held = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._gate._release()


_current: ContextVar[_Ticket | None] = ContextVar("intake_ticket", default=None)


class IntakeGate:
    """At most `slots` turns in their intake at once (0: no gate, everyone enters)."""

    def __init__(self, slots: int = DEFAULT_SLOTS, hold_limit: float = DEFAULT_HOLD_LIMIT):
        if slots < 0:
            raise ValueError(f"an intake gate has 0 (no gate) or more slots, not {slots}")
        if hold_limit <= 0:
            raise ValueError(f"a slot's hold limit is a positive number of seconds: {hold_limit}")
        self.slots = slots
        self.hold_limit = hold_limit
        self._free = asyncio.Semaphore(slots) if slots else None

    @property
    def inside(self) -> int:
        """Turns holding a slot now."""
        return 0 if self._free is None else self.slots - self._free._value

    @asynccontextmanager
    async def enter(self) -> AsyncIterator[None]:
        """Hold a slot for the block or until the turn leaves its intake, whichever is first."""
        if self._free is None or _current.get() is not None:
            yield
            return
        await self._free.acquire()
        ticket = _Ticket(self)
        token = _current.set(ticket)
        try:
            ticket.start_timer(self.hold_limit)
            yield
        finally:
            _current.reset(token)
            ticket.give_back()

    async def through(self, turn: Awaitable[T]) -> T:
        """`turn` run through the gate (what a task of its own runs: an API round)."""
        async with self.enter():
            return await turn

    def _release(self) -> None:
        assert self._free is not None
        self._free.release()


def leave_intake() -> None:
    """The current turn's intake is over (its model call starts): its slot goes to the next
    turn. Outside a gated turn, or called again, it does nothing."""
    ticket = _current.get()
    if ticket is not None:
        ticket.give_back()
