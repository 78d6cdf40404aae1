"""`consultation-bot bots add|list|set|enable|disable|remove`: the bots this deployment serves
besides TELEGRAM_BOT_TOKEN's, in the database the bot uses (DB_PATH, or DATABASE_URL).

`add --token TOKEN` (`--token -` reads it from standard input, out of the shell's history)
checks the token with Telegram's getMe and stores the bot under its @username, its token
encrypted with SECRET_KEY; `--role NAME` or `--instruction TEXT`, `--rounds N`, `--model M`,
`--models a,b`, `--language xx` replace the deployment's defaults for it, `--name LABEL`
names it for the operator. `list` prints each bot (id, @username, label, enabled, settings,
the token's last four characters, whether it has an API token); `set BOT key=value...`
changes settings (an empty value falls back to the deployment's), and `api_token=-` gives
the bot an HTTP API token of its own read from standard input (`api_token=` takes it
away; the token is stored hashed and never printed); BOT is an id or `@username`.
`remove BOT` stops the bot (every bot process stops serving it within seconds) and keeps
its row and id; what it stored (consultations, chat settings, memory, usage, …:
`forget_bot` of its scope) is deleted at once, unless `--keep-data`. The exit code is 1
when Telegram or the checks refused (nothing was changed), 2 for a wrong command or
setting.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from app.bot_secrets import shown_tail
from app.bots import keeper_for
from app.settings import Settings
from app.stores import open_store
from core.domain.bots import (
    API_TOKEN_KEY,
    SETTABLE,
    BotRefused,
    ProfileInvalid,
    StoredBot,
    profile_options,
)

EXIT_FAILED = 1


def parser() -> argparse.ArgumentParser:
    parsing = argparse.ArgumentParser(
        prog="consultation-bot bots",
        description="The bots this deployment serves besides TELEGRAM_BOT_TOKEN's.",
    )
    commands = parsing.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="check a token with Telegram and add its bot")
    add.add_argument("--token", required=True, help="the bot's token (`-`: read from stdin)")
    persona = add.add_mutually_exclusive_group()
    persona.add_argument("--role", default=None, help="a role of the prompt library")
    persona.add_argument("--instruction", default=None, help="a system prompt of its own")
    add.add_argument("--rounds", type=int, default=None, help="clarifying rounds by default")
    add.add_argument("--model", default=None, help="the model its chats use by default")
    add.add_argument("--models", default=None, help="the models its chats may choose: a,b")
    add.add_argument("--language", default=None, help="its interface language, e.g. de")
    add.add_argument("--name", default="", help="a label for the operator")
    commands.add_parser("list", help="the bots added")
    change = commands.add_parser(
        "set", help=f"change settings: {', '.join((*SETTABLE, API_TOKEN_KEY))}"
    )
    change.add_argument("bot", metavar="BOT", help="an id or @username")
    change.add_argument("changes", nargs="+", metavar="KEY=VALUE")
    for name, what in (("enable", "serve the bot again"), ("disable", "stop serving the bot")):
        switch = commands.add_parser(name, help=what)
        switch.add_argument("bot", metavar="BOT", help="an id or @username")
    remove = commands.add_parser("remove", help="stop serving the bot for good")
    remove.add_argument("bot", metavar="BOT", help="an id or @username")
    remove.add_argument(
        "--keep-data", action="store_true", help="keep what it stored (default: delete it)"
    )
    return parsing


async def run_bots(settings: Settings, arguments: argparse.Namespace) -> int:
    """Run one parsed command on the configured store; its exit code."""
    async with contextlib.AsyncExitStack() as closing:
        store = await open_store(settings)
        closing.push_async_callback(store.close)
        keeper = keeper_for(settings, store.bots, store.forget_bot)
        try:
            if arguments.command == "list":
                return list_bots(await keeper.bots())
            if arguments.command == "add":
                profile = profile_options(
                    role=arguments.role,
                    instruction=arguments.instruction,
                    rounds=arguments.rounds,
                    model=arguments.model,
                    models=arguments.models,
                    language=arguments.language,
                )
                token = sys.stdin.readline() if arguments.token == "-" else arguments.token
                bot = await keeper.add(token, profile, label=arguments.name)
                print(f"added {line_of(bot)}")
                return 0
            if arguments.command == "set":
                changes = changes_of(arguments.changes)
                api_token = changes.pop(API_TOKEN_KEY, None)
                if changes or api_token is None:
                    bot = await keeper.change(arguments.bot, changes)
                if api_token is not None:
                    token = sys.stdin.readline() if api_token == "-" else api_token
                    bot = await keeper.set_api_token(arguments.bot, token)
                print(f"changed {line_of(bot)}")
                return 0
            if arguments.command in ("enable", "disable"):
                bot = await keeper.enable(arguments.bot, arguments.command == "enable")
                print(f"{arguments.command}d {line_of(bot)}")
                return 0
            bot = await keeper.remove(arguments.bot)
            print(f"removed {line_of(bot)}")
            if arguments.keep_data:
                print("What it stored is kept; adding the same bot again brings it back.")
            else:
                gone = await keeper.forget_data(bot)
                print(
                    f"What it stored is deleted ({gone} consultation{'s' * (gone != 1)}); "
                    "adding the same bot again brings its id back, with nothing stored."
                )
            return 0
        except (BotRefused, ProfileInvalid) as refused:
            print(f"refused: {refused}", file=sys.stderr)
            return EXIT_FAILED


def changes_of(pairs: list[str]) -> dict[str, str]:
    """`key=value` arguments as a mapping; `ProfileInvalid` for one without `=`."""
    changes: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ProfileInvalid(f"{pair[:40]!r}: write key=value ({', '.join(SETTABLE)})")
        changes[key.strip()] = value.strip()
    return changes


def list_bots(bots: list[StoredBot]) -> int:
    if not bots:
        print("No bot added: TELEGRAM_BOT_TOKEN's bot alone. Add one with `bots add --token`.")
        return 0
    for bot in bots:
        print(line_of(bot))
    return 0


def line_of(bot: StoredBot) -> str:
    """One bot on one line; its token only as its last four characters."""
    label = f"  {bot.label}" if bot.label else ""
    state = "enabled" if bot.enabled else "disabled"
    added = time.strftime("%Y-%m-%d %H:%M", time.gmtime(bot.created_at))
    return (
        f"#{bot.id}  {bot.handle}{label}  {state}  {bot.profile.shown()}"
        f"  token {shown_tail(bot.token_tail)}{'  api token set' * bool(bot.api_token_hash)}"
        f"  added {added} UTC"
    )
