"""`python -m bot console`: the same consultation in a terminal, for trying prompts.

Uses the configured model and the same store as the bot, under its own chat key,
so a console consultation also survives a restart. Replies stream as they come.
"""

from __future__ import annotations

import asyncio
import sys

from bot.runtime import open_runtime
from core.errors import ConsultationError, ModelError
from core.outcomes import Reply
from core.settings import Settings

CONSOLE_KEY = "console:local"

HELP = """Type your question. Commands:
  /rounds N   rounds per consultation     /answer   final answer now
  /reset      start over                  /retry    answer the last message again
  /status     where it stands             /quit     leave (Ctrl-D too)"""


async def run_console(settings: Settings, *, key: str = CONSOLE_KEY) -> int:
    async with open_runtime(settings) as runtime:
        service = runtime.service
        print(HELP)
        status = await service.status(key)
        if status.active:
            print(f"(resuming: {status.rounds_done} of {status.max_rounds} rounds answered)")
        while True:
            line = await asyncio.to_thread(_read_line)
            if line is None or line.strip() in {"/quit", "/exit"}:
                return 0
            text = line.strip()
            if not text:
                continue
            try:
                await _handle(service, key, text)
            except ModelError as exc:
                print(f"\n[model error: {exc}; your message is saved, /retry to try again]")
            except (ConsultationError, ValueError) as exc:
                print(f"[{exc}]")


async def _handle(service, key: str, text: str) -> None:  # type: ignore[no-untyped-def]
    printer = _StreamPrinter()
    command, _, argument = text.partition(" ")
    if command == "/rounds":
        change = await service.set_max_rounds(key, int(argument))
        print(
            f"[rounds: {change.max_rounds}"
            + (", next answer is final]" if change.next_is_final else "]")
        )
    elif command == "/reset":
        print("[reset]" if await service.reset(key) else "[nothing to reset]")
    elif command == "/status":
        status = await service.status(key)
        rounds = f"{status.rounds_done} of {status.max_rounds}"
        print(f"[active: {status.active}, rounds {rounds}, role {status.role}]")
    elif command == "/answer":
        printer.done(await service.answer_now(key, on_text=printer.feed))
    elif command == "/retry":
        printer.done(await service.retry(key, on_text=printer.feed))
    else:
        printer.done(await service.ask(key, text, on_text=printer.feed))


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
        state = (
            "final answer, consultation complete"
            if reply.is_complete
            else (f"round {reply.round} of {reply.max_rounds}")
        )
        print(f"\n[{state}]")


def _read_line() -> str | None:
    try:
        return input("\n> ")
    except EOFError:
        return None
