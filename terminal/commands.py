"""One line typed at the terminal: its command, or the turn it sends, and what is
printed of it (`HELP` lists the commands).

Invariants: a line is one command or one turn; a typo'd command (`/xyz`) is never sent
to the model; a line of option labels the last round lacks sends nothing (`NoSuchOption`
from `core.domain.typed_answers`); queued files are sent once, with the line, or dropped when
refused. Errors are the caller's to word (`terminal.repl`).
"""

from __future__ import annotations

import re

from core.domain.asking import UserMessage
from core.domain.clarifying import ClarifyingRound
from core.domain.errors import AnswerStale, InvalidMaxRounds
from core.domain.outcomes import Notice
from core.domain.typed_answers import TypedLine, read_line
from core.turns.engine import Engine
from terminal.files import TerminalFiles
from terminal.follow_ups import ask_follow_up, quoted_follow_up
from terminal.history import ExportRefused, export_files, history_lines
from terminal.memory import memory_command, remember_after, terminal_scope
from terminal.model_choice import model_command
from terminal.replies import StreamPrinter
from terminal.roles import role_command
from terminal.stats import stats_command
from terminal.usage import usage_command

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

COMMAND = re.compile(r"/[A-Za-z]\w*")


class Asked:
    """The questions of the last reply, which option labels answer (None: it asked none
    with options, or there is no consultation)."""

    def __init__(self, round_: ClarifyingRound | None) -> None:
        self.round = round_
        self.final = False  # the last reply printed was a final answer (or a follow-up's)


async def handle(engine: Engine, key: str, text: str, files: TerminalFiles, asked: Asked) -> None:
    """Run the line's command or turn; `asked` then holds what the reply printed asked
    (cleared when the consultation moved on elsewhere)."""
    printer = StreamPrinter()
    printer.start_waiting()
    try:
        await _command_or_turn(engine, key, text, files, asked, printer)
    except AnswerStale:  # the consultation moved on elsewhere (expired, another terminal)
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
    files: TerminalFiles,
    asked: Asked,
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
        printer.done(
            reply := await engine.turns.answer_now(
                key, on_text=printer.feed, on_tool=printer.tool_started
            )
        )
        await remember_after(engine, reply)
    elif command == "/retry":
        printer.done(
            await engine.turns.retry(key, on_text=printer.feed, on_tool=printer.tool_started)
        )
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
                    on_tool=printer.tool_started,
                    memory=terminal_scope(key),
                )
            )
            printer.done(reply)
            await remember_after(engine, reply)


async def _send_with_files(
    engine: Engine,
    key: str,
    typed: TypedLine,
    files: TerminalFiles,
    printer: StreamPrinter,
) -> None:
    """Read the queued files with the message, echo what was heard, then ask."""
    queued = tuple(files.queued)
    files.queued.clear()  # sent or refused, they are not sent twice
    message_input = await files.intake.read(typed.text, queued, owner="terminal")
    if message_input.transcription is not None:
        await engine.figures.charge_transcription(key, message_input.transcription)
    if message_input.transcript is not None:
        print(f'[heard: "{message_input.transcript}"]')
    if not all(document.complete for document in message_input.documents):
        print("[the documents were cut: only their beginning was read]")
    elif message_input.omitted_chars:
        print(f"[the documents were cut: {message_input.omitted_chars} characters left out]")
    reply = await engine.turns.ask(
        UserMessage(
            key,
            message_input.stored_text,
            images=message_input.images,
            answers=typed.answers,
            on_text=printer.feed,
            on_tool=printer.tool_started,
            memory=terminal_scope(key),
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
