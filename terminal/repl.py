"""`consultation-bot console` (`python -m bot console`): the same consultation in a
terminal, for trying prompts.

Uses the configured model and the same store as the bot, under its own chat key,
so a console consultation also survives a restart. Replies stream as they come
(`terminal.replies`).

`/file PATH` queues a local file (document, voice recording, photo) for the next
message (`terminal.files`); typing the message — or an empty line, to send the files
alone — sends them together, read by the same `media.intake.Intake` as the bot's and the
API's files. A refused file is named with the reason and the queue is emptied; nothing
is sent.

A round asked with options shows them as `1a) …`; a line starting with such labels
(`1a 2c`, the rest of the line typed text sent with them) answers by option
(`terminal.answers`). A label the round does not have gets one line, and nothing of
the line is sent. The round answered is the last reply's, read from the store on start.

`/followup TEXT` asks about the last final answer, and so does a line starting with `>`
typed right after one (`terminal.follow_ups`).

Ctrl-C (SIGINT) while a reply streams stops that reply and returns to the prompt (the
message stays saved for /retry, as after a model error; `terminal.interrupts`).
SIGTERM, or Ctrl-C at the prompt, stops the console: what is running is cancelled, the
store is closed, one line says so, and the exit code is 0, a requested stop being a clean
end. Log records (warnings) logged while a line is handled are written after its reply,
never inside the streamed text (`terminal.logs`). Lines are read by a
daemon thread, so a stop never waits for Enter; when that thread is still blocked in its
read, the process ends with `os._exit` once everything is closed (the interpreter could
not finish with a thread holding stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import threading

from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from core.domain.asking import UserMessage
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
from core.turns.engine import Engine
from core.turns.round_answers import asked_round
from i18n.translate import t
from terminal.answers import NoSuchOption, TypedLine, read_line
from terminal.files import ConsoleFiles, refusal
from terminal.follow_ups import ask_follow_up, quoted_follow_up
from terminal.history import ExportRefused, export_files, history_lines
from terminal.interrupts import INTERRUPTED, Interrupts
from terminal.logs import HeldLogs
from terminal.memory import console_scope, memory_command, remember_after
from terminal.model_choice import model_command
from terminal.replies import StreamPrinter, model_error_line
from terminal.roles import role_command
from terminal.stats import stats_command
from terminal.usage import usage_command

CONSOLE_KEY = "console:local"

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

STOPPED = "[stopped: the consultation is kept; start the console again to go on]"

COMMAND = re.compile(r"/[A-Za-z]\w*")

log = logging.getLogger(__name__)


async def run_console(settings: Settings, *, key: str = CONSOLE_KEY) -> int:
    """Run the console until /quit, end of input, SIGTERM or SIGINT at the prompt; the
    exit code."""
    interrupts = Interrupts()
    logs = HeldLogs.install()
    lines = _Lines()
    session = asyncio.ensure_future(_session(settings, key, lines, interrupts, logs))
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
    settings: Settings, key: str, lines: _Lines, interrupts: Interrupts, logs: HeldLogs
) -> int:
    async with open_runtime(settings) as runtime:
        engine = runtime.engine
        await check_model_endpoint(runtime)  # warnings go to stderr, before the first prompt
        print(HELP)
        status = await engine.turns.status(key)
        if status.active:
            print(f"(resuming: {status.rounds_done} of {status.max_rounds} rounds answered)")
        active = await runtime.store.load_active(key) if status.active else None
        asked = _Asked(asked_round(active) if active is not None else None)
        files = ConsoleFiles(runtime.intake)
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
    files: ConsoleFiles,
    asked: _Asked,
    settings: Settings,
    interrupts: Interrupts,
) -> None:
    """One typed line: its command or turn, then the one line an error or Ctrl-C gets."""
    try:
        if not await interrupts.run(_handle(engine, key, text, files, asked)):
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


def did_not_happen_line(exc: TurnDidNotHappen, settings: Settings) -> str:
    """The console's line for a turn that did not happen (a model error too long for the
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
    if isinstance(exc, TurnSuperseded):  # two consoles share one chat key in one store
        return (
            "[another console on the same store answered this round meanwhile;"
            " /status shows where it stands]"
        )
    raise TypeError(f"no wording for {type(exc).__name__}")


class _Lines:
    """Lines typed at the prompt, read one at a time when asked for by a daemon thread,
    so that the prompt follows the output and a stop never waits for Enter."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._asked = threading.Semaphore(0)
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.reading = False  # the thread is blocked in a read of stdin
        threading.Thread(target=self._read, name="console-input", daemon=True).start()

    async def next(self) -> str | None:
        """The next line typed; None at the end of input."""
        self._asked.release()
        return await self._lines.get()

    def _read(self) -> None:
        while True:
            self._asked.acquire()
            self.reading = True
            line = _read_line()
            self.reading = False
            try:
                self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
            except RuntimeError:  # the loop is closed: the console has ended
                return
            if line is None:
                return


class _Asked:
    """The questions of the last reply, which option labels answer (None: it asked none
    with options, or there is no consultation)."""

    def __init__(self, round_: ClarifyingRound | None) -> None:
        self.round = round_
        self.final = False  # the last reply printed was a final answer (or a follow-up's)


async def _handle(engine: Engine, key: str, text: str, files: ConsoleFiles, asked: _Asked) -> None:
    printer = StreamPrinter()
    printer.start_waiting()
    try:
        await _command_or_turn(engine, key, text, files, asked, printer)
    except AnswerStale:  # the consultation moved on elsewhere (expired, another console)
        asked.round = None
        raise
    finally:
        await printer.stop_waiting()
        if printer.reply is not None:
            asked.round = printer.reply.questions
            asked.final = printer.reply.is_complete


async def _command_or_turn(
    engine: Engine,
    key: str,
    text: str,
    files: ConsoleFiles,
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
        await _rounds(engine, key, argument.strip())
    elif command == "/reset":
        print("[reset]" if await engine.lifecycle.reset(key) else "[nothing to reset]")
        asked.round = None
    elif command == "/status":
        print(await _status_line(engine, key))
    elif command == "/history":
        print(await history_lines(engine, key))
    elif command == "/export":
        await _export(engine, key, argument)
    elif command == "/help":
        print(HELP)
    elif command == "/memory":
        await memory_command(engine, key, argument)
    elif command == "/usage":
        await usage_command(engine, key)
    elif command == "/stats":
        await stats_command(engine, argument)
    elif command == "/role":
        print(await role_command(engine, key, argument))
    elif command == "/model":
        print(await model_command(engine, key, argument))
    elif command == "/answer":
        printer.done(reply := await engine.turns.answer_now(key, on_text=printer.feed))
        await remember_after(engine, reply)
    elif command == "/retry":
        printer.done(await engine.turns.retry(key, on_text=printer.feed))
    elif command == "/followup":
        await ask_follow_up(engine, key, argument, printer)
    elif COMMAND.fullmatch(command):  # a typo'd command is not a question for the model
        print(f"[unknown command {command}: /help lists the commands]")
    elif (question := quoted_follow_up(text, after_final=asked.final)) is not None:
        await ask_follow_up(engine, key, question, printer)
    else:
        typed = read_line(text, asked.round)  # NoSuchOption: nothing is sent
        if files.queued:
            await _send_with_files(engine, key, typed, files, printer)
        else:
            reply = await engine.turns.ask(
                UserMessage(
                    key,
                    typed.text,
                    answers=typed.answers,
                    on_text=printer.feed,
                    memory=console_scope(key),
                )
            )
            printer.done(reply)
            await remember_after(engine, reply)


async def _send_with_files(
    engine: Engine,
    key: str,
    typed: TypedLine,
    files: ConsoleFiles,
    printer: StreamPrinter,
) -> None:
    """Read the queued files with the message, echo what was heard, then ask."""
    queued = tuple(files.queued)
    files.queued.clear()  # sent or refused, they are not sent twice
    turn = await files.intake.read(typed.text, queued, owner="console")
    if turn.transcription is not None:
        await engine.figures.charge_transcription(key, turn.transcription)
    if turn.transcript is not None:
        print(f'[heard: "{turn.transcript}"]')
    if not all(document.complete for document in turn.documents):
        print("[the documents were cut: only their beginning was read]")
    elif turn.omitted_chars:
        print(f"[the documents were cut: {turn.omitted_chars} characters left out]")
    reply = await engine.turns.ask(
        UserMessage(
            key,
            turn.stored_text,
            images=turn.images,
            answers=typed.answers,
            on_text=printer.feed,
            memory=console_scope(key),
        )
    )
    printer.done(reply)
    await remember_after(engine, reply)
    if Notice.IMAGES_NOT_SEEN in reply.notices:
        print("[the model could not see the photo; describe it in words if it matters]")


async def _export(engine: Engine, key: str, argument: str) -> None:
    try:
        written = await export_files(engine, key, argument)
    except ExportRefused as exc:
        print(f"[{exc}]")
        return
    except OSError as exc:  # a folder we may not write to, a full disk
        print(f"[could not write the files: {exc}]")
        return
    print(f"[wrote {written.docx} and {written.markdown}]")


async def _rounds(engine: Engine, key: str, argument: str) -> None:
    """Show the limit, or set it; a bad value gets one line, never a Python error text."""
    limit = engine.config.max_rounds_limit
    if not argument:
        print(f"[rounds: {(await engine.turns.status(key)).max_rounds} (1–{limit})]")
        return
    try:
        change = await engine.settings.set_max_rounds(key, int(argument))
    except (ValueError, InvalidMaxRounds):
        print(f"[rounds must be a whole number from 1 to {limit}]")
        return
    print(
        f"[rounds: {change.max_rounds}"
        + (", next answer is final]" if change.next_is_final else "]")
    )


async def _status_line(engine: Engine, key: str) -> str:
    status = await engine.turns.status(key)
    role = engine.settings.roles().get(status.role)
    expert = role.title if role is not None else status.role
    if not status.active:
        return f"[no active consultation; {status.max_rounds} rounds, expert: {expert}]"
    waiting = "; your last message awaits an answer: /retry" if status.open_turn else ""
    done = f"{status.rounds_done} of {status.max_rounds} rounds answered"
    return f"[{done}, expert: {expert}{waiting}]"


def _read_line() -> str | None:
    try:
        return input("\n> ")
    except EOFError:
        return None
