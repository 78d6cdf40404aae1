"""`consultation-bot console` (`python -m bot console`): the same consultation in a
terminal, for trying prompts.

Uses the configured model and the same store as the bot, under its own chat key,
so a console consultation also survives a restart. Replies stream as they come.

`/file PATH` queues a local file (document, voice recording, photo) for the next
message; typing the message — or an empty line, to send the files alone — sends them
together, read by the same `media.intake.Intake` as the bot's and the API's files. A
file is checked (kind, size) from its size on disk and its first bytes before it is
read whole, so a huge file is refused at once. A refused file is named with the reason
and the queue is emptied; nothing is sent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import sys
from pathlib import Path

from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from bot.i18n import t
from core.attachments import Attachment
from core.errors import (
    NOT_RETRYABLE,
    AttachmentProblem,
    AttachmentRefused,
    ConsultationError,
    InvalidMaxRounds,
    ModelError,
    StoreUnavailable,
)
from core.outcomes import Notice, Reply
from core.service import ConsultationService
from media.intake import SUPPORTED_DOCUMENTS, Intake

CONSOLE_KEY = "console:local"

HELP = """Type your question. Commands:
  /rounds N   rounds per consultation     /answer   final answer now
  /reset      start over                  /retry    answer the last message again
  /status     where it stands             /quit     leave (Ctrl-D too)
  /file PATH  attach a file to your next message (an empty line sends files alone)
  /file       list the attached files     /drop     forget them
  /help       this list"""

COMMAND = re.compile(r"/[A-Za-z]\w*")

log = logging.getLogger(__name__)


async def run_console(settings: Settings, *, key: str = CONSOLE_KEY) -> int:
    async with open_runtime(settings) as runtime:
        service = runtime.service
        await check_model_endpoint(runtime)  # warnings go to stderr, before the first prompt
        print(HELP)
        status = await service.status(key)
        if status.active:
            print(f"(resuming: {status.rounds_done} of {status.max_rounds} rounds answered)")
        files = _Files(runtime.intake)
        while True:
            line = await asyncio.to_thread(_read_line)
            if line is None:
                print()  # end the prompt line before the shell takes over
                return 0
            if line.strip() in {"/quit", "/exit"}:
                return 0
            text = line.strip()
            if not text and not files.queued:
                continue
            try:
                await _handle(service, key, text, files)
            except AttachmentRefused as exc:
                print(
                    f"[{_refusal(exc, runtime.intake)}; nothing was sent,"
                    " the attached files were dropped]"
                )
            except ModelError as exc:
                if exc.kind not in NOT_RETRYABLE:
                    print(f"\n[model error: {exc}; your message is saved, /retry to try again]")
                else:  # the user is told what helps; the log (stderr) names the setting
                    log.warning("model error: %s", exc)
                    print(f"\n[{t('en', f'model_{exc.kind.value}')}]")
            except ConsultationError as exc:
                print(f"[{exc}]")
            except StoreUnavailable as exc:
                print(f"\n[{t('en', 'store_unavailable')} ({exc})]")


async def _handle(service: ConsultationService, key: str, text: str, files: _Files) -> None:
    printer = _StreamPrinter()
    command, _, argument = text.partition(" ")
    if command == "/file":
        files.command(argument.strip())
    elif command == "/drop":
        print(f"[{len(files.queued)} attached file(s) dropped]")
        files.queued.clear()
    elif command == "/rounds":
        await _rounds(service, key, argument.strip())
    elif command == "/reset":
        print("[reset]" if await service.reset(key) else "[nothing to reset]")
    elif command == "/status":
        print(await _status_line(service, key))
    elif command == "/help":
        print(HELP)
    elif command == "/answer":
        printer.done(await service.answer_now(key, on_text=printer.feed))
    elif command == "/retry":
        printer.done(await service.retry(key, on_text=printer.feed))
    elif COMMAND.fullmatch(command):  # a typo'd command is not a question for the model
        print(f"[unknown command {command}: /help lists the commands]")
    elif files.queued:
        await _send_with_files(service, key, text, files, printer)
    else:
        printer.done(await service.ask(key, text, on_text=printer.feed))


async def _send_with_files(
    service: ConsultationService, key: str, text: str, files: _Files, printer: _StreamPrinter
) -> None:
    """Read the queued files with the message, echo what was heard, then ask."""
    queued = tuple(files.queued)
    files.queued.clear()  # sent or refused, they are not sent twice
    turn = await files.intake.read(text, queued)
    if turn.transcript is not None:
        print(f'[heard: "{turn.transcript}"]')
    if turn.omitted_chars:
        print(f"[the documents were cut: {turn.omitted_chars} characters left out]")
    reply = await service.ask(key, turn.stored_text, images=turn.images, on_text=printer.feed)
    printer.done(reply)
    if Notice.IMAGES_NOT_SEEN in reply.notices:
        print("[the model could not see the photo; describe it in words if it matters]")


HEAD_BYTES = 4096
"""Bytes read before the size check, to tell a file's kind by its magic bytes."""


class _Files:
    """Local files queued for the next message, checked before they are read whole."""

    def __init__(self, intake: Intake) -> None:
        self.intake = intake
        self.queued: list[Attachment] = []

    def command(self, argument: str) -> None:
        """`/file PATH` queues a file; `/file` alone lists the queue."""
        if not argument:
            names = ", ".join(f.name for f in self.queued) or "none"
            print(f"[attached: {names}]")
            return
        try:
            attachment = self._load(Path(_unquoted(argument)).expanduser())
        except AttachmentRefused as exc:
            print(f"[{_refusal(exc, self.intake)}; not attached]")
            return
        except OSError as exc:
            print(f"[cannot read {argument}: {exc.strerror or exc}]")
            return
        self.queued.append(attachment)
        print(
            f"[attached {attachment.name} ({_size(len(attachment.data))}); it goes with "
            "your next message, or an empty line sends it alone]"
        )

    def _load(self, path: Path) -> Attachment:
        with path.open("rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise IsADirectoryError(0, "not a regular file")
            head = file.read(HEAD_BYTES)
            self.intake.check_head(Attachment(path.name, None, head), info.st_size)
            rest = file.read(max(0, info.st_size - len(head)))
        whole = Attachment(path.name, None, head + rest)
        self.intake.check_size(self.intake.kind_of(whole), len(whole.data), name=path.name)
        return whole


async def _rounds(service: ConsultationService, key: str, argument: str) -> None:
    """Show the limit, or set it; a bad value gets one line, never a Python error text."""
    limit = service.config.max_rounds_limit
    if not argument:
        print(f"[rounds: {(await service.status(key)).max_rounds} (1–{limit})]")
        return
    try:
        change = await service.set_max_rounds(key, int(argument))
    except (ValueError, InvalidMaxRounds):
        print(f"[rounds must be a whole number from 1 to {limit}]")
        return
    print(
        f"[rounds: {change.max_rounds}"
        + (", next answer is final]" if change.next_is_final else "]")
    )


async def _status_line(service: ConsultationService, key: str) -> str:
    status = await service.status(key)
    role = service.roles().get(status.role)
    expert = role.title if role is not None else status.role
    if not status.active:
        return f"[no active consultation; {status.max_rounds} rounds, expert: {expert}]"
    waiting = "; your last message awaits an answer: /retry" if status.open_turn else ""
    done = f"{status.rounds_done} of {status.max_rounds} rounds answered"
    return f"[{done}, expert: {expert}{waiting}]"


class _StreamPrinter:
    """Prints each new piece of the streamed reply, then the round line."""

    def __init__(self) -> None:
        self._printed = ""

    async def feed(self, text: str) -> None:
        if text.startswith(self._printed):
            sys.stdout.write(text[len(self._printed) :])
        else:  # the text was revised (e.g. an overlap removed): print it again
            sys.stdout.write("\n" + text)
        sys.stdout.flush()
        self._printed = text

    def done(self, reply: Reply) -> None:
        if reply.text != self._printed:
            print(("\n" if self._printed else "") + reply.text, end="")
        if reply.sources:
            print(f"\n{t('en', 'sources')}:", end="")
            for source in reply.sources:
                shown = f"{source.title} — {source.url}" if source.title else source.url
                print(f"\n[{source.index}] {shown}", end="")
        state = "final answer" if reply.is_final else f"round {reply.round} of {reply.max_rounds}"
        if Notice.ANSWER_INCOMPLETE in reply.notices:
            state += " (it may be incomplete: it was cut off before its end)"
        if reply.is_final and reply.is_complete:
            state += ", consultation complete"
        print(f"\n[{state}]")


def _refusal(exc: AttachmentRefused, intake: Intake) -> str:
    kinds = [SUPPORTED_DOCUMENTS]
    if intake.transcriber is not None:
        kinds.append("voice recordings")
    if intake.config.vision:
        kinds.append("photos")
    reasons = {
        AttachmentProblem.TOO_LARGE: f"over the limit of {_size(exc.limit or 0)}",
        AttachmentProblem.UNSUPPORTED: f"not a kind of file I read ({', '.join(kinds)})",
        AttachmentProblem.VOICE_OFF: "voice is off: set TRANSCRIPTION_MODEL to transcribe it",
        AttachmentProblem.VISION_OFF: "photos are off: set LLM_VISION=true for a model that "
        "sees images",
        AttachmentProblem.UNREADABLE: "cannot be read (broken or encrypted)",
        AttachmentProblem.NO_TEXT: "has no text to read (a scan, or silence)",
        AttachmentProblem.TRANSCRIPTION_FAILED: "the transcription failed; try again",
    }
    return f"{exc.name or 'file'}: {reasons[exc.problem]}"


def _size(count: int) -> str:
    return f"{count / 1_000_000:.1f} MB" if count >= 100_000 else f"{count} bytes"


def _unquoted(path: str) -> str:
    """A path as a terminal's drag and drop may paste it: in quotes."""
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        return path[1:-1]
    return path


def _read_line() -> str | None:
    try:
        return input("\n> ")
    except EOFError:
        return None
