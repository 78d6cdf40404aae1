"""The terminal (`consultation-bot console`, `python -m bot console`): the same
consultation as the bot, typed at a prompt, for trying prompts.

It runs on the engine the composition root opens for it (`app.serve_terminal`: the
configured model and the same store as the bot), under its own chat key, so a
consultation at the terminal also survives a restart. Replies stream as they come
(`terminal.replies`).

`/file PATH` queues a local file (document, voice recording, photo) for the next
message (`terminal.files`); typing the message — or an empty line, to send the files
alone — sends them together, read by the same `media.intake.Intake` as the bot's and the
API's files. A refused file is named with the reason and the queue is emptied; nothing
is sent.

A round asked with options shows them as `1a) …`; a line starting with such labels
(`1a 2c`, the rest of the line typed text sent with them) answers by option
(`terminal.answers`). A label the round does not have gets one line, and nothing of
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
import re
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from core.domain.clarifying import ClarifyingRound
from core.domain.errors import (
    AnswerStale,
    AttachmentRefused,
    ConsultationError,
    InvalidMaxRounds,
    ModelError,
    ModelErrorKind,
    StoreUnavailable,
    TurnCancelled,
    TurnDidNotHappen,
    TurnSuperseded,
)
from core.domain.outcomes import Notice
from core.turns.service import ConsultationService
from i18n.translate import t
from media.intake import Intake
from terminal.answers import NoSuchOption, TypedLine, read_line
from terminal.files import TerminalFiles, refusal
from terminal.follow_ups import ask_follow_up, quoted_follow_up
from terminal.history import ExportRefused, export_files, history_lines
from terminal.interrupts import INTERRUPTED, Interrupts
from terminal.lines import TypedLines
from terminal.logs import HeldLogs
from terminal.memory import memory_command, remember_after, terminal_scope
from terminal.model_choice import model_command
from terminal.replies import ModelSettings, StreamPrinter, model_error_line
from terminal.roles import role_command
from terminal.stats import stats_command
from terminal.usage import usage_command

TERMINAL_KEY = "console:local"
"""The terminal's chat key, as stored: a consultation begun before survives under it."""

HELP = """Type your question. Commands:
  /rounds N   rounds per consultation     /answer   final answer now
  /reset      start over                  /retry    answer the last message again
  /status     where it stands             /quit     leave (Ctrl-D too)
  /role       the experts; /role NAME or /role SENTENCE chooses one
  /model      the models; /model NAME chooses one
  /history    your recent consultations
  /export [N] [PATH]  the latest consultation (or number N of /history) as DOCX and
              Markdown files in the directory PATH (default: the current one)
  /file PATH  attach a file to your next message (an empty line sends files alone)
  /file       list the attached files     /drop     forget them
  /memory     what I remember about you (/memory delete N, /memory off, /memory on)
  /usage      tokens and cost today and this month
  /stats [N]  the deployment's figures: today and the last 7 (or N) days
  1a 2c TEXT  answer questions by their options (1a: question 1, option a); TEXT is optional
  /followup TEXT  ask about the last final answer (right after one, "> TEXT" does too)
  /help       this list"""

STOPPED = "[stopped: the consultation is kept; start the terminal again to go on]"

COMMAND = re.compile(r"/[A-Za-z]\w*")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Engine:
    """What the terminal runs on: the engine, and the reader of the files it queues."""

    service: ConsultationService
    intake: Intake


OpenEngine = Callable[[], AbstractAsyncContextManager[Engine]]
"""Opens the engine for one session and closes it (the store with it) at its end."""


async def run_terminal(
    open_engine: OpenEngine, settings: ModelSettings, *, key: str = TERMINAL_KEY
) -> int:
    """Run the terminal until /quit, end of input, SIGTERM or SIGINT at the prompt; the
    exit code. `settings` are the model settings a model error's line names."""
    interrupts = Interrupts()
    logs = HeldLogs.install()
    lines = TypedLines()
    session = asyncio.ensure_future(_session(open_engine, settings, key, lines, interrupts, logs))
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
    open_engine: OpenEngine,
    settings: ModelSettings,
    key: str,
    lines: TypedLines,
    interrupts: Interrupts,
    logs: HeldLogs,
) -> int:
    async with open_engine() as engine:
        service = engine.service
        print(HELP)
        status = await service.status(key)
        if status.active:
            print(f"(resuming: {status.rounds_done} of {status.max_rounds} rounds answered)")
        asked = _Asked(await service.history.round_asked(key) if status.active else None)
        files = TerminalFiles(engine.intake)
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
                await _line(service, key, text, files, asked, settings, interrupts)


async def _line(
    service: ConsultationService,
    key: str,
    text: str,
    files: TerminalFiles,
    asked: _Asked,
    settings: ModelSettings,
    interrupts: Interrupts,
) -> None:
    """One typed line: its command or turn, then the one line an error or Ctrl-C gets."""
    try:
        if not await interrupts.run(_handle(service, key, text, files, asked)):
            saved = (await service.status(key)).open_turn
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


class _Asked:
    """The questions of the last reply, which option labels answer (None: it asked none
    with options, or there is no consultation)."""

    def __init__(self, round_: ClarifyingRound | None) -> None:
        self.round = round_
        self.final = False  # the last reply printed was a final answer (or a follow-up's)


async def _handle(
    service: ConsultationService, key: str, text: str, files: TerminalFiles, asked: _Asked
) -> None:
    printer = StreamPrinter()
    printer.start_waiting()
    try:
        await _command_or_turn(service, key, text, files, asked, printer)
    except AnswerStale:  # the consultation moved on elsewhere (expired, another terminal)
        asked.round = None
        raise
    finally:
        await printer.stop_waiting()
        if printer.reply is not None:
            asked.round = printer.reply.questions
            asked.final = printer.reply.is_complete


async def _command_or_turn(
    service: ConsultationService,
    key: str,
    text: str,
    files: TerminalFiles,
    asked: _Asked,
    printer: StreamPrinter,
) -> None:
    command, _, argument = text.partition(" ")
    if command == "/file":
        files.command(argument.strip())
    elif command == "/drop":
        print(f"[{len(files.queued)} attached file(s) dropped]")
        files.queued.clear()
    elif command == "/rounds":
        await _rounds(service, key, argument.strip())
    elif command == "/reset":
        print("[reset]" if await service.lifecycle.reset(key) else "[nothing to reset]")
        asked.round = None
    elif command == "/status":
        print(await _status_line(service, key))
    elif command == "/history":
        print(await history_lines(service, key))
    elif command == "/export":
        await _export(service, key, argument)
    elif command == "/help":
        print(HELP)
    elif command == "/memory":
        await memory_command(service, key, argument)
    elif command == "/usage":
        await usage_command(service, key)
    elif command == "/stats":
        await stats_command(service, argument)
    elif command == "/role":
        print(await role_command(service, key, argument))
    elif command == "/model":
        print(await model_command(service, key, argument))
    elif command == "/answer":
        printer.done(reply := await service.answer_now(key, on_text=printer.feed))
        await remember_after(service, reply)
    elif command == "/retry":
        printer.done(await service.retry(key, on_text=printer.feed))
    elif command == "/followup":
        await ask_follow_up(service, key, argument, printer)
    elif COMMAND.fullmatch(command):  # a typo'd command is not a question for the model
        print(f"[unknown command {command}: /help lists the commands]")
    elif (question := quoted_follow_up(text, after_final=asked.final)) is not None:
        await ask_follow_up(service, key, question, printer)
    else:
        typed = read_line(text, asked.round)  # NoSuchOption: nothing is sent
        if files.queued:
            await _send_with_files(service, key, typed, files, printer)
        else:
            reply = await service.ask(
                key,
                typed.text,
                answers=typed.answers,
                on_text=printer.feed,
                memory=terminal_scope(key),
            )
            printer.done(reply)
            await remember_after(service, reply)


async def _send_with_files(
    service: ConsultationService,
    key: str,
    typed: TypedLine,
    files: TerminalFiles,
    printer: StreamPrinter,
) -> None:
    """Read the queued files with the message, echo what was heard, then ask."""
    queued = tuple(files.queued)
    files.queued.clear()  # sent or refused, they are not sent twice
    turn = await files.intake.read(typed.text, queued, owner="terminal")
    if turn.transcription is not None:
        await service.figures.charge_transcription(key, turn.transcription)
    if turn.transcript is not None:
        print(f'[heard: "{turn.transcript}"]')
    if not all(document.complete for document in turn.documents):
        print("[the documents were cut: only their beginning was read]")
    elif turn.omitted_chars:
        print(f"[the documents were cut: {turn.omitted_chars} characters left out]")
    reply = await service.ask(
        key,
        turn.stored_text,
        images=turn.images,
        answers=typed.answers,
        on_text=printer.feed,
        memory=terminal_scope(key),
    )
    printer.done(reply)
    await remember_after(service, reply)
    if Notice.IMAGES_NOT_SEEN in reply.notices:
        print("[the model could not see the photo; describe it in words if it matters]")


async def _export(service: ConsultationService, key: str, argument: str) -> None:
    try:
        written = await export_files(service, key, argument)
    except ExportRefused as exc:
        print(f"[{exc}]")
        return
    except OSError as exc:  # a folder we may not write to, a full disk
        print(f"[could not write the files: {exc}]")
        return
    print(f"[wrote {written.docx} and {written.markdown}]")


async def _rounds(service: ConsultationService, key: str, argument: str) -> None:
    """Show the limit, or set it; a bad value gets one line, never a Python error text."""
    limit = service.config.max_rounds_limit
    if not argument:
        print(f"[rounds: {(await service.status(key)).max_rounds} (1–{limit})]")
        return
    try:
        change = await service.settings.set_max_rounds(key, int(argument))
    except (ValueError, InvalidMaxRounds):
        print(f"[rounds must be a whole number from 1 to {limit}]")
        return
    print(
        f"[rounds: {change.max_rounds}"
        + (", next answer is final]" if change.next_is_final else "]")
    )


async def _status_line(service: ConsultationService, key: str) -> str:
    status = await service.status(key)
    role = service.settings.roles().get(status.role)
    expert = role.title if role is not None else status.role
    if not status.active:
        return f"[no active consultation; {status.max_rounds} rounds, expert: {expert}]"
    waiting = "; your last message awaits an answer: /retry" if status.open_turn else ""
    done = f"{status.rounds_done} of {status.max_rounds} rounds answered"
    return f"[{done}, expert: {expert}{waiting}]"
