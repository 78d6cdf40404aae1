"""The terminal (`consultation-bot console`, `python -m bot console`): the same
consultation as the bot, typed at a prompt, for trying prompts.

It runs on the engine the composition root opens for it (`app.serve_terminal`: the
configured model and the same store as the bot), under its own chat key, so a
consultation at the terminal also survives a restart. Each line typed is one command
or one turn (`terminal.commands`); replies stream as they come (`terminal.replies`).

`/file PATH` queues a local file (document, voice recording, photo) for the next
message (`terminal.files`); typing the message — or an empty line, to send the files
alone — sends them together, read by the same `media.intake.Intake` as the bot's and the
API's files. A refused file is named with the reason and the queue is emptied; nothing
is sent.

A round asked with options shows them as `1a) …`; a line starting with such labels
(`1a 2c`, the rest of the line typed text sent with them) answers by option
(`core.domain.typed_answers`). A label the round does not have gets one line, and nothing of
the line is sent. The round answered is the last reply's, read through the engine's
history on start.

`/followup TEXT` asks about the last final answer, and so does a line starting with `>`
typed right after one (`terminal.follow_ups`).

Ctrl-C (SIGINT) while a reply streams stops that reply and returns to the prompt (the
message stays saved for /retry, as after a model error; `terminal.interrupts`).
SIGTERM, or Ctrl-C at the prompt, stops the terminal: what is running is cancelled, the
engine (and its store) is closed, one line says so, and the exit code is 0, a requested
stop being a clean end. Log records (warnings) logged while a line is handled are written
after its reply, never inside the streamed text (`terminal.logs`). Lines are read by a
daemon thread (`terminal.lines`), so a stop never waits for Enter; when that thread is
still blocked in its read, the process ends with `os._exit` once everything is closed
(the interpreter could not finish with a thread holding stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from core.domain.errors import (
    AttachmentRefused,
    ConsultationError,
    ModelError,
    ModelErrorKind,
    StoreUnavailable,
    TurnCancelled,
    TurnDidNotHappen,
    TurnSuperseded,
)
from core.domain.typed_answers import NoSuchOption
from core.turns.engine import Engine
from i18n.translate import t
from media.intake import Intake
from terminal.commands import HELP, Asked, handle
from terminal.files import TerminalFiles, refusal
from terminal.interrupts import INTERRUPTED, Interrupts
from terminal.lines import TypedLines
from terminal.logs import HeldLogs
from terminal.replies import ModelSettings, model_error_line

TERMINAL_KEY = "console:local"
"""The terminal's chat key, as stored: a consultation begun before survives under it."""

STOPPED = "[stopped: the consultation is kept; start the terminal again to go on]"


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TerminalRuntime:
    """What the terminal runs on: the engine, and the reader of the files it queues."""

    engine: Engine
    intake: Intake


OpenRuntime = Callable[[], AbstractAsyncContextManager[TerminalRuntime]]
"""Opens the engine for one session and closes it (the store with it) at its end."""


async def run_terminal(
    open_runtime: OpenRuntime, settings: ModelSettings, *, key: str = TERMINAL_KEY
) -> int:
    """Run the terminal until /quit, end of input, SIGTERM or SIGINT at the prompt; the
    exit code. `settings` are the model settings a model error's line names."""
    interrupts = Interrupts()
    logs = HeldLogs.install()
    lines = TypedLines()
    session = asyncio.ensure_future(_session(open_runtime, settings, key, lines, interrupts, logs))
    stopping = asyncio.ensure_future(interrupts.stop.wait())
    await asyncio.wait({session, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if session.done():
        return session.result()
    session.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await session
    print("\n" + STOPPED, flush=True)
    if lines.reading:  # blocked in a read no one can interrupt: end here, all is closed
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _session(
    open_runtime: OpenRuntime,
    settings: ModelSettings,
    key: str,
    lines: TypedLines,
    interrupts: Interrupts,
    logs: HeldLogs,
) -> int:
    async with open_runtime() as opened:
        engine = opened.engine
        print(HELP)
        status = await engine.turns.status(key)
        if status.active:
            print(f"(resuming: {status.rounds_done} of {status.max_rounds} rounds answered)")
        asked = Asked(await engine.history.round_asked(key) if status.active else None)
        files = TerminalFiles(opened.intake)
        while True:
            line = await lines.next()
            if line is None:
                print()  # end the prompt line before the shell takes over
                return 0
            if line.strip() in {"/quit", "/exit"}:
                return 0
            text = line.strip()
            if not text and not files.queued:
                continue
            with logs.held():  # a warning is written after the reply, never inside it
                await _line(engine, key, text, files, asked, settings, interrupts)


async def _line(
    engine: Engine,
    key: str,
    text: str,
    files: TerminalFiles,
    asked: Asked,
    settings: ModelSettings,
    interrupts: Interrupts,
) -> None:
    """One typed line: its command or turn, then the one line an error or Ctrl-C gets."""
    try:
        if not await interrupts.run(handle(engine, key, text, files, asked)):
            saved = (await engine.turns.status(key)).open_turn
            print("\n" + (INTERRUPTED if saved else "[stopped by Ctrl-C]"))
    except NoSuchOption as exc:
        print(f"[{exc}; nothing was sent]")
    except AttachmentRefused as exc:
        print(f"[{refusal(exc, files.intake)}; nothing was sent, the attached files were dropped]")
    except TurnDidNotHappen as exc:
        print("\n" + did_not_happen_line(exc, settings))
    except ConsultationError as exc:
        print(f"[{exc}]")


def did_not_happen_line(exc: TurnDidNotHappen, settings: ModelSettings) -> str:
    """The terminal's line for a turn that did not happen (a model error too long for the
    context is also logged: stderr names the setting). Every member of the family is
    worded here."""
    if isinstance(exc, ModelError):
        if exc.kind is ModelErrorKind.CONTEXT_TOO_LONG:
            log.warning("model error: %s", exc)
        return model_error_line(exc, settings)
    if isinstance(exc, StoreUnavailable):
        return f"[{t('en', 'store_unavailable')} ({exc})]"
    if isinstance(exc, TurnCancelled):
        return "[stopped by a reset: nothing was answered]"
    if isinstance(exc, TurnSuperseded):  # two terminals share one chat key in one store
        return (
            "[another terminal on the same store answered this round meanwhile;"
            " /status shows where it stands]"
        )
    raise TypeError(f"no wording for {type(exc).__name__}")
