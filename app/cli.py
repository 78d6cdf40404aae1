"""`consultation-bot run|api|console|dead-letters|knowledge|bots`: the one entry point family of
the product.

`python -m bot` is `run`, `python -m bot console` is `console`, `python -m api` is
`api`. Every command reads the settings, checks what it needs, sets up logging the
same way and runs on uvloop where available. A missing or invalid setting, or a
start-up that cannot succeed as configured (database, port, log level), ends the
process with one line saying what to fix, exit code 2.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from app.lean_imports import leave_out_unused
from app.logs import configure_logging, secrets_of
from app.settings import Settings, load_settings
from core.domain.errors import ConfigError

if TYPE_CHECKING:
    import argparse

EXIT_CONFIG = 2
COMMANDS = ("run", "api", "console")
USAGE = """usage: consultation-bot [run|api|console|dead-letters|knowledge|bots]

  run       the Telegram bot (long polling, or webhook when WEBHOOK_URL is set),
            with the HTTP API in the same process when API_ENABLED=true
  api       the HTTP API alone, on API_HOST:API_PORT
  console   a consultation in this terminal
  dead-letters [list [N] | replay ID | drop ID]
            the updates the workers gave up (with DATABASE_URL)
  knowledge [add PATH... | list | remove ID... | search QUERY | reindex]
            the knowledge base the expert reads (`knowledge --help`)
  bots [add --token T | list | set BOT key=value... | enable BOT | disable BOT | remove BOT]
            the bots served besides TELEGRAM_BOT_TOKEN's (`bots --help`)

Also `python -m bot` (run), `python -m bot console` and `python -m api`.
Settings come from the environment and .env (see .env.example)."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "run"
    if command in {"-h", "--help", "help"}:
        print(USAGE)
        return 0
    if command == "dead-letters":
        return dead_letters(args[1:])
    if command == "knowledge":
        return knowledge(args[1:])
    if command == "bots":
        return bots(args[1:])
    if command not in COMMANDS or len(args) > 1:
        print(f"unknown command {' '.join(args)!r}\n\n{USAGE}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        settings = load_settings(api_enabled=True) if command == "api" else load_settings()
        leave_out_unused(tools=bool(settings.tools_config().servers))  # before any edge loads
        check_required(settings, command)
        # The terminal is the conversation: only warnings go to its stderr.
        floor = "WARNING" if command == "console" else "DEBUG"
        configure_logging(settings.log_level, secrets_of(settings), floor=floor)
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    from app.startup import StartupError  # the engine's imports, once settings are sound

    try:
        if command == "console":
            from app.serve_terminal import serve_terminal

            return run(serve_terminal(settings))
        tune_gc()
        if command == "api":
            from app.serve_api import serve_api

            return run(serve_api(settings))
        from app.serve_bot import run_bot

        return run(run_bot(settings))
    except KeyboardInterrupt:
        return 0
    except StartupError as exc:
        print(f"Cannot start: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def dead_letters(args: list[str]) -> int:
    """List, replay or drop the updates the workers gave up (`app.dead_letters`)."""
    from app.dead_letters import parse, run_dead_letters
    from app.startup import StartupError
    from storage.errors import DatabaseUnusable

    try:
        action, number = parse(args)
        settings = load_settings()
        configure_logging(settings.log_level, secrets_of(settings), floor="WARNING")
        return run(run_dead_letters(settings, action, number))
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (DatabaseUnusable, StartupError) as exc:
        print(f"Cannot reach the dead letters: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def knowledge(args: list[str]) -> int:
    """Add, list, remove, search or reindex the knowledge base's documents
    (`app.knowledge_cli`); the readers and the splitter load only here."""
    from app.knowledge_cli import parser, run_knowledge

    return _operator_command(args, parser(), run_knowledge, "the knowledge base")


def bots(args: list[str]) -> int:
    """Add, list, change, disable, enable or remove the bots served besides
    TELEGRAM_BOT_TOKEN's (`app.bots_cli`)."""
    from app.bots_cli import parser, run_bots

    return _operator_command(args, parser(), run_bots, "the bots")


def _operator_command(
    args: list[str],
    parser: argparse.ArgumentParser,
    command: Callable[[Settings, argparse.Namespace], Coroutine[Any, Any, int]],
    what: str,
) -> int:
    """An operator's command on the deployment's store: its arguments parsed (argparse's
    exit for --help or a wrong command), the settings loaded, `command` run; a bad setting
    or a store that cannot open is one line and EXIT_CONFIG."""
    from app.startup import StartupError

    try:
        arguments = parser.parse_args(args)
    except SystemExit as exit:  # --help, or a wrong command (argparse said why)
        return int(exit.code or 0)
    try:
        settings = load_settings()
        configure_logging(settings.log_level, secrets_of(settings), floor="WARNING")
        return run(command(settings, arguments))
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except StartupError as exc:
        print(f"Cannot open {what}: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def check_required(settings: Settings, command: str) -> None:
    """Raise `ConfigError` for the first setting `command` cannot run without."""
    if command == "run":
        settings.bot_config()  # the token
        settings.api_config()  # the webhook secret when WEBHOOK_URL is set
    if not settings.secret("openai_api_key"):
        raise ConfigError(
            "OPENAI_API_KEY is not set. Put your provider's API key in .env (any non-empty "
            "value for a local server that needs none)."
        )
    if command == "api" or (command == "run" and settings.api_enabled):
        from api.exposure import check_exposure

        check_exposure(settings.api_config())


def tune_gc() -> None:
    """Freeze what start-up made and collect young objects less often.

    Each update allocates thousands of short-lived objects; at the default
    thresholds full collections kept walking every imported module's objects
    (pauses up to 0.1 s) and garbage collection took a third of the CPU with 500
    chats at once. Frozen start-up objects are never scanned again.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def run(coroutine: Coroutine[Any, Any, int]) -> int:
    """Run on uvloop where available: it makes each request several times cheaper."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


if __name__ == "__main__":
    sys.exit(main())
