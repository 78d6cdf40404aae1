"""What the terminal prints of a reply: the text as it streams, then its state line; and
a model error as a line for the person at the terminal, who is also the operator.

Invariants: the reply's text reaches the terminal once: what did not stream of it (a
round's last options) is printed after what did. The engine hands on a shorter
prefix of what it showed only when it cut a loop's repetitions (`core.llm.collect`): that
text is not printed again, and one line says the repeated part above was dropped. Any
other revision is printed whole on a new line. A structured round is shown with each
question's options under it, as `1a) …`, as it streams (`core.domain.typed_answers.round_text`).
Under a reply, a provider's sources, the knowledge-base passages it cites and the tools it
used ("Looked up", failed ones marked) are listed, one a line, before its state line. While
a tool runs, a line says so ("[Looking up: time · get_current_time…]"); the reply's text
goes on below it.
A model error names the setting or the server to check, never an operator to wait for.

While no text has come `WAITING_AFTER` seconds into a turn, a line says the terminal is
waiting for the model: on a tty it counts the seconds in place and is wiped when the
first text arrives; into a pipe or a file it is written once, so a log stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Protocol

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.outcomes import Notice, Reply
from core.domain.tool_uses import server_tool, used_line
from core.domain.tools import ToolSpec
from core.domain.typed_answers import round_text
from core.prompting.clarifying_stream import RoundText
from i18n.translate import t

WAITING_AFTER = 1.0
"""Seconds without text before the terminal says it is waiting for the model."""
WAITING = "[waiting for the model…"
_WIPE = "\r\x1b[K"  # back to the line's start, erase it

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where the openai SDK sends requests when OPENAI_BASE_URL is not set."""


class StreamPrinter:
    """Prints each new piece of the streamed reply, then the round line."""

    def __init__(self) -> None:
        self._printed = ""  # what the terminal shows of this reply
        self._kept = ""  # what of it the reply keeps: shorter once a loop was cut
        self.reply: Reply | None = None  # the reply once it is done
        self._waiting: asyncio.Task[None] | None = None
        self._counting = False  # a terminal shows the waiting line, to be wiped
        self._after_tool = False  # a tool's line ends the screen: no blank lines after it

    def start_waiting(self, *, terminal: bool | None = None) -> None:
        """Say the terminal waits for the model if no text comes within `WAITING_AFTER`."""
        live = sys.stdout.isatty() if terminal is None else terminal
        self._waiting = asyncio.ensure_future(self._wait_line(live))

    async def stop_waiting(self) -> None:
        """Stop the waiting line (wiped on a terminal); the turn has text or is over."""
        task, self._waiting = self._waiting, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._counting:
            sys.stdout.write(_WIPE)
            sys.stdout.flush()
            self._counting = False

    async def _wait_line(self, live: bool) -> None:
        await asyncio.sleep(WAITING_AFTER)
        if not live:
            print(WAITING + "]", flush=True)
            return
        seconds = WAITING_AFTER
        self._counting = True
        while True:
            sys.stdout.write(f"{_WIPE}{WAITING} {seconds:.0f} s]")
            sys.stdout.flush()
            await asyncio.sleep(1.0)
            seconds += 1.0

    async def feed(self, text: str) -> None:
        if self._waiting is not None:
            await self.stop_waiting()
        if isinstance(text, RoundText):  # a structured round: laid out with its options
            text = round_text(text.round)
        if len(text) < len(self._printed) and self._printed.startswith(text):
            self._kept = text  # a loop's repetitions cut: the kept text is on the screen
            return
        if text.startswith(self._printed):
            piece = text[len(self._printed) :]
            if self._after_tool:  # the line breaks before the text after the tool: dropped
                piece = piece.lstrip("\n")
                self._after_tool = not piece
            sys.stdout.write(piece)
        else:  # the text was revised (e.g. an overlap removed): print it again
            sys.stdout.write("\n" + text)
        sys.stdout.flush()
        self._printed = self._kept = text

    async def tool_started(self, spec: ToolSpec) -> None:
        """Say on a line of its own that a tool the model called runs."""
        if self._waiting is not None:
            await self.stop_waiting()
        name = server_tool(spec.server, spec.tool)
        lead = "\n" if self._printed and not self._printed.endswith("\n") else ""
        sys.stdout.write(f"{lead}[{t('en', 'tool_running', tool=name)}]\n")
        sys.stdout.flush()
        self._after_tool = True

    def done(self, reply: Reply) -> None:
        self.reply = reply
        text = round_text(reply.questions) if reply.questions is not None else reply.text
        if self._kept == self._printed and text.startswith(self._printed):
            print(text[len(self._printed) :], end="")  # what did not stream (a round's options)
        elif text != self._kept:
            print(("\n" if self._printed else "") + text, end="")
        elif len(self._kept) < len(self._printed):
            dropped = len(self._printed) - len(self._kept)
            print(
                "\n[the answer began repeating itself: the repeated part above "
                f"({dropped} characters) was dropped]",
                end="",
            )
        options = reply.questions is not None and reply.questions.has_options
        if reply.sources:
            print(f"\n{t('en', 'sources')}:", end="")
            for source in reply.sources:
                shown = f"{source.title} — {source.url}" if source.title else source.url
                print(f"\n[{source.index}] {shown}", end="")
        if reply.knowledge_sources:
            print(f"\n{t('en', 'knowledge_sources')}:", end="")
            for cited in reply.knowledge_sources:
                where = cited.title + (f" › {cited.section}" if cited.section else "")
                if cited.page is not None:
                    where += ", " + t("en", "knowledge_page", page=cited.page)
                print(f"\n[{cited.ref}] {where}", end="")
        if reply.tool_uses:
            print(f"\n{t('en', 'tools_used')}:", end="")
            for use in reply.tool_uses:
                line = used_line(use)
                print("\n" + (line if use.ok else t("en", "tool_failed", call=line)), end="")
        if reply.follow_up:
            limit = reply.follow_up + (reply.follow_ups_left or 0)
            state = f"follow-up {reply.follow_up} of {limit}"
        elif reply.is_final:
            state = "final answer"
        else:
            state = f"round {reply.round} of {reply.max_rounds}"
        if Notice.ANSWER_INCOMPLETE in reply.notices:
            state += " (it may be incomplete: it was cut off before its end)"
        if reply.is_final and reply.is_complete:
            state += ", consultation complete"
            if reply.follow_ups_left:
                state += "; ask about it with > TEXT or /followup TEXT"
        if options:
            state += "; answer by option, e.g. 1a, words may follow"
        print(f"\n[{state}]")


class ModelSettings(Protocol):
    """The settings a model error's line names (the composition root's settings have them)."""

    @property
    def openai_base_url(self) -> str | None: ...

    @property
    def llm_model(self) -> str: ...

    @property
    def llm_timeout_seconds(self) -> float: ...


def model_error_line(exc: ModelError, settings: ModelSettings) -> str:
    """The terminal's line for a model error: what to check, and whether /retry helps."""
    base_url = settings.openai_base_url or DEFAULT_BASE_URL
    server = f"the model server at {base_url}"
    saved = "your message is saved, /retry to try again"
    kind = exc.kind
    if kind is ModelErrorKind.MISCONFIGURED:  # the detail names the setting to check
        return (
            f"[the model cannot be used as configured: {exc.detail}. In use: "
            f"OPENAI_BASE_URL={base_url}, LLM_MODEL={settings.llm_model}. Your message is "
            "saved: fix the setting, start the terminal again and send /retry]"
        )
    if kind is ModelErrorKind.UNAVAILABLE:
        return f"[model error: {server} (OPENAI_BASE_URL) is unavailable ({exc.detail}); {saved}]"
    if kind is ModelErrorKind.TIMEOUT:
        return (
            f"[model error: {server} (OPENAI_BASE_URL) did not answer within "
            f"LLM_TIMEOUT_SECONDS ({settings.llm_timeout_seconds:g} s); {saved}]"
        )
    if kind in (ModelErrorKind.CONTEXT_TOO_LONG, ModelErrorKind.IMAGES_REJECTED):
        return f"[{t('en', f'model_{kind.value}')}]"  # what helps is the user's to do
    return f"[model error: {exc}; {saved}]"
