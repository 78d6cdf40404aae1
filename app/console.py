"""`consultation-bot console` (`python -m bot console`): the same consultation in a
terminal, for trying prompts.

Uses the configured model and the same store as the bot, under its own chat key,
so a console consultation also survives a restart. Replies stream as they come.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys

from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from bot.i18n import t
from core.errors import (
    NOT_RETRYABLE,
    ConsultationError,
    InvalidMaxRounds,
    ModelError,
    StoreUnavailable,
)
from core.outcomes import Notice, Reply
from core.service import ConsultationService

CONSOLE_KEY = "console:local"

HELP = """Type your question. Commands:
  /rounds N   rounds per consultation     /answer   final answer now
  /reset      start over                  /retry    answer the last message again
  /status     where it stands             /quit     leave (Ctrl-D too)
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
        while True:
            line = await asyncio.to_thread(_read_line)
            if line is None:
                print()  # end the prompt line before the shell takes over
                return 0
            if line.strip() in {"/quit", "/exit"}:
                return 0
            text = line.strip()
            if not text:
                continue
            try:
                await _handle(service, key, text)
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


async def _handle(service: ConsultationService, key: str, text: str) -> None:
    printer = _StreamPrinter()
    command, _, argument = text.partition(" ")
    if command == "/rounds":
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
    else:
        printer.done(await service.ask(key, text, on_text=printer.feed))


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


def _read_line() -> str | None:
    try:
        return input("\n> ")
    except EOFError:
        return None
