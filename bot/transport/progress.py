"""Showing a reply while the model still writes it.

Invariants:
- progress is best effort (drafts in private chats, throttled edits elsewhere) and
  never blocks the answer: a failed or refused update is dropped, and the final
  delivery (`bot.transport.delivery.Sender`) decides what the chat keeps;
- each update renders a bounded window of the reply (`PROGRESS_WINDOW` characters),
  so its cost does not grow with the reply;
- while tools the model called run, the progress shows one line naming them under the
  reply so far ("Looking up: time · get_current_time…", `tool_started`), their names as
  text, never Markdown; the reply's next text replaces it;
- `close()` lets a progress request already on its way finish, so the final delivery
  edits a progress message that reached the chat instead of leaving a stray copy;
- progress is shed first when the bot is overloaded: an update whose turn came more
  than `SHED_AFTER` seconds late (the event loop was that far behind), or that finds
  the bot's progress budget spent (`bot.transport.progress_budget`: typing actions and
  drafts of all chats together, about 30 a second), is not sent, and the next one is
  tried an interval later. Every chat's answer waits for the loop, so under a burst
  the loop's time goes to answers, not to drafts of them; a typing action so put off
  is tried again every `TYPING_DEFERRAL` until it goes or the reply comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from telegram import Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, RetryAfter

from bot.transport.flood import retry_seconds
from bot.transport.progress_budget import ProgressBudget, progress_budget
from bot.transport.render import Part, markdown_text, plain_parts, render
from bot.transport.target import NO_RETRIES, AnyBot, Target
from core.domain.ports import OnText
from core.domain.tool_uses import server_tool
from core.domain.tools import OnToolStart, ToolSpec

log = logging.getLogger(__name__)

PROGRESS_LIMIT = 4000  # room for the " …" that marks a cut progress message
TYPING_DEFERRAL = 1.0
"""How long a typing action put off (its turn came late, or the budget was spent) waits
before it is tried again: a reply that comes meanwhile needs none."""
SHED_AFTER = 0.025
"""How late (seconds) a progress update's turn may come before it is skipped: the event
loop's lag when it is that far behind every chat."""
PROGRESS_WINDOW = 2 * PROGRESS_LIMIT
"""Characters of a long reply that a progress update renders: enough for one message."""
_draft_ids = itertools.count(1)
MAX_TOOLS_SHOWN = 6
"""Tools named in one progress line at most (a turn runs few: TOOLS_MAX_CALLS)."""

ToolText = Callable[[Sequence[ToolSpec]], str]
"""The line shown while tools run (those started since the text last moved, in the order
they started), in the reader's language."""


@dataclass(frozen=True, slots=True)
class Live:
    """What an engine call is given to show its reply while it is written: the reply's
    text so far (`on_text`) and each tool the model called as it starts (`on_tool`)."""

    on_text: OnText
    on_tool: OnToolStart


def _no_tool_text(specs: Sequence[ToolSpec]) -> str:
    return ", ".join(server_tool(spec.server, spec.tool) for spec in specs) + "…"


def progress_window(text: str, *, from_end: bool) -> tuple[str, bool]:
    """The slice of a growing reply that one progress update renders, and whether it is cut.

    Progress shows one message: the end of the reply in a draft, its start in an
    edited message. Rendering only a window of `PROGRESS_WINDOW` characters keeps
    each update's cost bounded however long the reply grows. The window starts (or
    ends) at a line break where one is near, and a window starting inside a code
    block reopens it, so the slice renders like the same lines of the whole text.
    """
    if len(text) <= PROGRESS_WINDOW:
        return text, False
    if not from_end:
        end = text.rfind("\n", PROGRESS_LIMIT, PROGRESS_WINDOW)
        return text[: end if end != -1 else PROGRESS_WINDOW], True
    start = len(text) - PROGRESS_WINDOW
    newline = text.find("\n", start, start + PROGRESS_LIMIT)
    if newline != -1:
        start = newline + 1
    window = text[start:]
    if text.count("```", 0, start) % 2:
        window = "```\n" + window
    return window, True


class Progress:
    """Streams partial text into the chat: drafts in private chats, edits elsewhere.

    The first update waits `first_delay` so a reply that completes at once costs no
    extra request; later ones are at least `interval` apart. The typing action is
    sent after `typing_delay` (put off by `TYPING_DEFERRAL` while its turn comes late or
    the progress budget is spent) and renewed every 4 s until `close()`. Until then each
    is a timer, not a task: a reply that completes at once starts neither.
    """

    def __init__(
        self,
        bot: AnyBot,
        target: Target,
        *,
        interval: float = 1.0,
        first_delay: float = 0.25,
        typing_delay: float = 0.3,
        shed_after: float = SHED_AFTER,
        budget: ProgressBudget | None = None,
        tool_text: ToolText = _no_tool_text,
    ) -> None:
        self._bot = bot
        self._tool_text = tool_text
        self._tools: list[ToolSpec] = []  # started since the text last moved
        self._target = target
        self._interval = interval
        self._first_delay = first_delay
        self._typing_delay = typing_delay
        self._shed_after = shed_after
        self._budget = budget
        self.shed = 0  # updates skipped because the loop was late
        self._latest = ""
        self._shown = ""
        self._changed = asyncio.Event()
        self._draft_id = next(_draft_ids)
        self.message: Message | None = None  # the progress message (edits mode)
        self._tasks: list[asyncio.Task[None]] = []
        self._timers: list[asyncio.TimerHandle] = []
        self._typing_timer: asyncio.TimerHandle | None = None
        self._pumping = False  # the first update's timer is set (or its pump runs)
        self._in_flight: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def message_id(self) -> int | None:
        """The progress message's id (edits mode), once one reached the chat."""
        return None if self.message is None else self.message.message_id

    def start(self) -> None:
        self._typing_after(self._typing_delay)

    @property
    def live(self) -> Live:
        """The callbacks an engine call is given (`update`, `tool_started`)."""
        return Live(self.update, self.tool_started)

    async def update(self, text: str) -> None:
        """Called with the whole reply so far; returns at once."""
        self._latest = text
        self._tools.clear()
        self._changed.set()
        self._begin()

    async def tool_started(self, spec: ToolSpec) -> None:
        """Called when a tool the model asked for starts: its line shows under the reply
        so far until the reply's text goes on, naming every tool started since (several
        run at once); returns at once."""
        if len(self._tools) < MAX_TOOLS_SHOWN and spec not in self._tools:
            self._tools.append(spec)
        self._changed.set()
        self._begin()

    def _begin(self) -> None:
        if not self._pumping and not self._closed:
            self._pumping = True
            self._after(self._first_delay, self._pump)

    def _showing(self) -> str:
        """The reply so far, with the running tool's line under it."""
        if not self._tools:
            return self._latest
        line = f"_{markdown_text(self._tool_text(self._tools))}_"
        if not self._latest.strip():
            return line
        return f"{self._latest.rstrip()}\n\n{line}"

    def _after(self, delay: float, work: Callable[[float], Coroutine[Any, Any, None]]) -> None:
        """Run `work` as a task of this progress `delay` seconds from now, unless closed;
        it is given how late (seconds) its timer fired."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay

        def begin() -> None:
            if not self._closed:
                self._tasks.append(asyncio.create_task(work(loop.time() - due)))

        self._timers.append(loop.call_later(delay, begin))

    async def close(self) -> None:
        """Stop typing and progress updates (the final delivery follows).

        A progress request already on its way is let finish, so the final delivery
        knows about a progress message that reached the chat and edits it instead
        of leaving a stray partial copy behind.
        """
        self._closed = True
        for timer in self._timers:
            timer.cancel()
        if self._typing_timer is not None:
            self._typing_timer.cancel()
        if self._in_flight is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._in_flight), timeout=10)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _spend(self) -> bool:
        """Take one request of the bot's progress budget (`bot.transport.progress_budget`);
        False when it is spent for now: answers go first."""
        if self._budget is None:
            self._budget = progress_budget()
        return self._budget.take()

    def _typing_after(self, delay: float) -> None:
        """The typing action `delay` seconds from now; put off by `TYPING_DEFERRAL` again
        while the loop is behind every chat or the budget is spent (a timer, not a task,
        until it goes), then renewed by `_keep_typing`."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay

        def begin() -> None:
            if self._closed:
                return
            if loop.time() - due > self._shed_after or not self._spend():
                self.shed += 1
                self._typing_after(TYPING_DEFERRAL)
                return
            self._typing_timer = None
            self._tasks.append(asyncio.create_task(self._keep_typing()))

        self._typing_timer = loop.call_later(delay, begin)

    async def _keep_typing(self) -> None:
        """The typing action (its budget paid), renewed every 4 s until `close()`; a
        renewal the budget cannot pay waits `TYPING_DEFERRAL` for it."""
        while True:
            with contextlib.suppress(Exception):
                await self._bot.send_chat_action(
                    self._target.chat_id,
                    ChatAction.TYPING,
                    message_thread_id=self._target.thread_id,
                    rate_limit_args=NO_RETRIES,
                )
            await asyncio.sleep(4.0)
            while not self._spend():
                self.shed += 1
                await asyncio.sleep(TYPING_DEFERRAL)

    async def _pump(self, late: float) -> None:
        """Show the reply as it grows, an update at least `interval` apart, each skipped
        when its turn came more than `shed_after` late; stops at a `Forbidden`."""
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            if late > self._shed_after:  # the loop is behind every chat: answers first
                self.shed += 1
            elif not await self._update_once():
                return
            due = loop.time() + self._interval
            await asyncio.sleep(self._interval)
            late = loop.time() - due

    async def _update_once(self) -> bool:
        """Show the reply so far unless it is shown already or progress is closed; False
        when the chat forbids the bot to write (no further update is worth trying)."""
        text = self._showing()
        if not text.strip() or text == self._shown or self._closed:
            self._changed.clear()
            return True
        if not self._spend():  # left changed: tried again an interval later
            self.shed += 1
            return True
        self._changed.clear()
        try:
            self._in_flight = asyncio.ensure_future(self._show(text))
            await asyncio.shield(self._in_flight)
            self._shown = text
        except RetryAfter as exc:
            await asyncio.sleep(retry_seconds(exc))
        except Forbidden:
            return False
        except Exception as exc:  # progress is cosmetic; the final delivery decides
            log.debug("progress update failed: %s", exc)
        finally:
            self._in_flight = None
        return True

    async def _show(self, text: str) -> None:
        """Show `text` formatted; if Telegram refuses the formatting, show it plain."""
        part = self._progress_part(text)
        try:
            await self._send_progress(part)
        except BadRequest as exc:
            if not part.entities or "entit" not in str(exc).lower():
                raise
            await self._send_progress(Part(part.text, ()))

    def _progress_part(self, text: str) -> Part:
        """The formatted slice worth showing: the end in a draft, the start in a message."""
        text, cut = progress_window(text, from_end=self._target.private)
        try:
            parts = render(text, limit=PROGRESS_LIMIT)
        except Exception:  # a half-written answer must never break the progress display
            log.debug("progress rendering failed; showing plain text", exc_info=True)
            parts = [Part(chunk, ()) for chunk in plain_parts(text, limit=PROGRESS_LIMIT)]
        if not parts:
            return Part(text[:PROGRESS_LIMIT], ())
        if self._target.private:
            return parts[-1]
        first = parts[0]
        return Part(first.text + " …", first.entities) if len(parts) > 1 or cut else first

    async def _send_progress(self, part: Part) -> None:
        target = self._target
        entities = list(part.entities) or None
        if target.private:
            await self._bot.send_message_draft(
                target.chat_id,
                self._draft_id,
                part.text,
                entities=entities,
                rate_limit_args=NO_RETRIES,
            )
            return
        if self.message is None:
            self.message = await self._bot.send_message(
                target.chat_id,
                part.text,
                entities=entities,
                message_thread_id=target.thread_id,
                reply_parameters=ReplyParameters(target.reply_to, allow_sending_without_reply=True)
                if target.reply_to
                else None,
                rate_limit_args=NO_RETRIES,
            )
            return
        try:
            await self._bot.edit_message_text(
                part.text,
                chat_id=self.message.chat_id,
                message_id=self.message.message_id,
                entities=entities,
                rate_limit_args=NO_RETRIES,
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise
