"""`consultation-bot bots`: an operator adds bots whose tokens the fake Bot API confirms (on a
real SQLite file or PostgreSQL schema: `kind`, `database`), lists, changes, disables and
removes them; a token Telegram refuses, a hostile input or a missing SECRET_KEY stores
nothing; the token is never printed or logged, only its last four characters; a start
with a bot stored stops in one line without SECRET_KEY or with another one."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from tests.app.test_cli import SCRIPT, run
from tests.store_contract import StoreKind, make

SHOP = "111222:AAF-shop-secret-token_WXYZ"
NEWS = "333444:AAG-news-secret-token_ABCD"
MAIN = "999000:AAH-main-secret-token_MAIN"
UNKNOWN = "555666:AAJ-nobody-knows-this-token"
KEY = "k" * 32


@pytest.fixture
async def telegram() -> AsyncIterator[FakeBotApi]:
    """A fake Bot API that knows three bots: two to add and the deployment's own."""
    server = FakeBotApi(
        tokens={SHOP: (111222, "shop_bot"), NEWS: (333444, "news_bot"), MAIN: (999000, "main_bot")}
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def environment(kind: StoreKind, database: str, telegram: FakeBotApi) -> dict[str, str]:
    store = {"DATABASE_URL": database} if kind.name == "postgres" else {"DB_PATH": database}
    return {
        **store,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "TELEGRAM_BOT_TOKEN": MAIN,
        "SECRET_KEY": KEY,
        "LOG_LEVEL": "DEBUG",
    }


async def bots(
    tmp_path: Path,
    kind: StoreKind,
    database: str,
    telegram: FakeBotApi,
    *args: str,
    stdin: str = "",
    **env: str,
) -> tuple[int, str]:
    """Run `consultation-bot bots ARGS`; its exit code and everything it printed, logs
    included. No token but the last four characters may be in it, nor a traceback."""
    values = {**environment(kind, database, telegram), **env}
    values = {k: v for k, v in values.items() if v}
    done = await asyncio.to_thread(run, tmp_path, str(SCRIPT), "bots", *args, stdin=stdin, **values)
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed, printed
    for token in (SHOP, NEWS, MAIN, UNKNOWN):
        assert token.split(":")[1][:-4] not in printed, printed
    return done.returncode, printed


async def test_a_bot_is_added_under_its_username_and_listed_without_its_token(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """`bots add` checks the token with getMe, stores the bot; `bots list` shows …WXYZ."""
    code, out = await bots(
        tmp_path, kind, database, telegram,
        "add", "--token", SHOP, "--role", "lawyer", "--rounds", "4", "--models", "a,b",
        "--model", "b", "--language", "de", "--name", "Shop",
    )  # fmt: skip
    assert code == 0, out
    assert re.search(r"added #1  @shop_bot  Shop  enabled  role=lawyer rounds=4 model=b", out)
    assert "token …WXYZ" in out
    assert [c.token for c in telegram.calls_of("getMe")] == [SHOP]
    code, out = await bots(tmp_path, kind, database, telegram, "add", "--token", "-", stdin=NEWS)
    assert code == 0, out
    code, out = await bots(tmp_path, kind, database, telegram, "list")
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[0].startswith("#1  @shop_bot  Shop  enabled  role=lawyer rounds=4 model=b")
    assert "models=a,b language=de  token …WXYZ" in lines[0]
    assert lines[1].startswith("#2  @news_bot  enabled  defaults  token …ABCD")
    cipher = await kind.count(database, "bots", token_cipher=SHOP)
    assert cipher == 0  # stored sealed, not as given


async def test_a_token_telegram_refuses_is_not_added(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """An unknown token gets Telegram's 401: a clear refusal, exit 1, nothing stored."""
    code, out = await bots(tmp_path, kind, database, telegram, "add", "--token", UNKNOWN)
    assert code == 1
    assert "Telegram refused the token (401 Unauthorized)" in out
    assert await kind.count(database, "bots") == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--token", "1:" + "A" * 10_000), "that is not a bot token"),
        (("--token", "not a token/../getMe?"), "that is not a bot token"),
        (("--token", SHOP, "--name", "evil\x1b[31m\nlabel"), "label: up to 100 printable"),
        (("--token", SHOP, "--rounds", "99"), "rounds: a whole number from 1 to 20"),
        (("--token", SHOP, "--role", "no_such_role"), "role: 'no_such_role' is none"),
        (("--token", SHOP, "--language", "xx"), "language: 'xx' is none"),
        (("--token", SHOP, "--model", "c", "--models", "a,b"), "model: 'c' is not among"),
        (("--token", MAIN), "@main_bot is this deployment's own bot"),
    ],
)
async def test_hostile_or_wrong_adds_are_refused_storing_nothing(
    tmp_path: Path,
    kind: StoreKind,
    database: str,
    telegram: FakeBotApi,
    args: tuple[str, ...],
    says: str,
) -> None:
    """A 10 KB token, a label with control characters, bad settings or the deployment's
    own bot: one line saying why, exit 1, nothing stored; a malformed token never reaches
    Telegram."""
    code, out = await bots(tmp_path, kind, database, telegram, "add", *args)
    assert code == 1, out
    assert says in out
    assert len(out) < 1000
    assert await kind.count(database, "bots") == 0
    if "token" in says:
        assert telegram.calls_of("getMe") == []


async def test_adding_needs_a_secret_key_and_the_same_bot_is_added_once(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """Without SECRET_KEY nothing is added; a bot already added is refused naming its id."""
    code, out = await bots(
        tmp_path, kind, database, telegram, "add", "--token", SHOP, SECRET_KEY=""
    )
    assert code == 1
    assert "SECRET_KEY is not set" in out
    assert await kind.count(database, "bots") == 0
    assert (await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP))[0] == 0
    code, out = await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP)
    assert code == 1
    assert "@shop_bot is already bot #1; nothing was added" in out
    assert await kind.count(database, "bots") == 1


async def test_a_bot_is_changed_disabled_enabled_and_removed_by_id_or_username(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """`set`, `disable`, `enable` and `remove` name the bot by id or @username; bad
    changes and unknown bots are refused changing nothing."""
    assert (await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP))[0] == 0
    code, out = await bots(
        tmp_path, kind, database, telegram,
        "set", "@Shop_Bot", "rounds=3", "instruction=Answer as a shop.", "label=Shop",
    )  # fmt: skip
    assert code == 0, out
    assert "changed #1  @shop_bot  Shop  enabled  instruction=17 chars rounds=3" in out
    code, out = await bots(
        tmp_path, kind, database, telegram, "set", "1", "role=lawyer", "limits.daily_tokens=5000"
    )
    assert "role=lawyer rounds=3 limits.daily_tokens=5000" in out and "instruction" not in out
    code, out = await bots(
        tmp_path, kind, database, telegram,
        "set", "1", 'plans=[{"id": "gold", "title": {"en": "Gold", "de": "Gold"}, "stars": 75}]',
    )  # fmt: skip
    assert code == 0 and "plans=gold" in out, out
    for bad, says in (
        (("set", "1", "colour=red"), "unknown setting 'colour'"),
        (("set", "1", "rounds=many"), "rounds: a whole number"),
        (("set", "1", "rounds"), "write key=value"),
        (("set", "1", "limits.daily_tokens=-5"), "limits.daily_tokens: a whole number"),
        (
            ("set", "1", 'plans=[{"id": "g", "title": {"en": "G", "xx": "?"}, "stars": 5}]'),
            "plans: plan 'g' has a text in 'xx', none of",
        ),
        (("set", "1", "plans=[{]"), "plans: not valid JSON"),
        (("set", "@nobody", "rounds=2"), "no bot '@nobody'"),
        (("disable", "7"), "no bot '7'"),
    ):
        code, out = await bots(tmp_path, kind, database, telegram, *bad)
        assert (code, says in out) == (1, True), out
    code, out = await bots(tmp_path, kind, database, telegram, "disable", "@shop_bot")
    assert code == 0 and "disabled #1  @shop_bot  Shop  disabled" in out
    assert await kind.count(database, "bots", enabled=False) == 1
    code, out = await bots(tmp_path, kind, database, telegram, "enable", "1")
    assert code == 0 and "enabled #1  @shop_bot  Shop  enabled" in out
    code, out = await bots(tmp_path, kind, database, telegram, "remove", "1", "--keep-data")
    assert code == 0 and "removed #1  @shop_bot" in out
    code, out = await bots(tmp_path, kind, database, telegram, "list")
    assert "No bot added" in out
    code, out = await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP)
    assert code == 0 and "added #1  @shop_bot" in out


async def test_a_start_with_a_stored_bot_needs_its_secret_key(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """Without SECRET_KEY, or with another one, the start stops with one line naming the
    setting (and the bot), exit 2; the token is not in it."""
    assert (await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP))[0] == 0
    values = {**environment(kind, database, telegram), "OPENAI_API_KEY": "sk-test"}
    values["API_PORT"] = "1"  # never reached: the start stops first
    for key, says in (
        ("", "SECRET_KEY is not set, and 1 bot is stored"),
        ("another-key-of-32-characters-long", "SECRET_KEY: bot #1 @shop_bot: its token does "
         "not decrypt with this SECRET_KEY"),
    ):  # fmt: skip
        env = {k: v for k, v in {**values, "SECRET_KEY": key}.items() if v}
        done = await asyncio.to_thread(run, tmp_path, str(SCRIPT), "api", **env)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert f"Cannot start: {says}" in done.stderr
        assert SHOP.split(":")[1] not in done.stderr


async def test_removing_a_bot_deletes_what_it_stored_unless_keep_data(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """`remove` deletes the removed bot's consultations (`forget_bot` of its scope) and
    leaves the deployment's bot's and the other bot's; `--keep-data` deletes nothing."""
    for token in (SHOP, NEWS):
        assert (await bots(tmp_path, kind, database, telegram, "add", "--token", token))[0] == 0
    store = await kind.open(database)
    try:
        for chat_key in ("tg:5", "tg1:5", "tg2:5"):
            await store.create(make(chat_key))
    finally:
        await store.close()
    code, out = await bots(tmp_path, kind, database, telegram, "remove", "@news_bot", "--keep-data")
    assert code == 0 and "What it stored is kept" in out
    assert await kind.count(database, "consultations", chat_key="tg2:5") == 1
    code, out = await bots(tmp_path, kind, database, telegram, "remove", "@shop_bot")
    assert code == 0 and "What it stored is deleted (1 consultation)" in out, out
    assert await kind.count(database, "consultations", chat_key="tg1:5") == 0
    for kept in ("tg:5", "tg2:5"):
        assert await kind.count(database, "consultations", chat_key=kept) == 1


BOT_API_TOKEN = "bot-api-token-for-the-shop-0123456789abcdef"
API_TOKEN = "the-operators-api-token-0123456789abcdefgh"


async def test_a_bots_api_token_is_read_from_stdin_stored_hashed_and_never_printed(
    tmp_path: Path, kind: StoreKind, database: str, telegram: FakeBotApi
) -> None:
    """`set BOT api_token=-` reads the token from standard input and stores its SHA-256
    only; `list` says a token is set, never which; a short one, API_TOKEN itself or another
    bot's is refused changing nothing; `api_token=` takes it away."""
    assert (await bots(tmp_path, kind, database, telegram, "add", "--token", SHOP))[0] == 0
    assert (await bots(tmp_path, kind, database, telegram, "add", "--token", NEWS))[0] == 0
    code, out = await bots(
        tmp_path, kind, database, telegram, "set", "@shop_bot", "api_token=-",
        stdin=BOT_API_TOKEN + "\n", API_TOKEN=API_TOKEN,
    )  # fmt: skip
    assert code == 0, out
    assert "changed #1  @shop_bot" in out and "api token set" in out
    digest = hashlib.sha256(BOT_API_TOKEN.encode()).hexdigest()
    assert await kind.count(database, "bots", api_token_hash=digest) == 1
    code, out = await bots(tmp_path, kind, database, telegram, "list")
    assert out.count("api token set") == 1 and BOT_API_TOKEN not in out
    for token, says in (
        ("short", "api_token: 32 to 256"),
        (API_TOKEN, "that is API_TOKEN"),
        (BOT_API_TOKEN, "@shop_bot has that token"),
    ):
        code, out = await bots(
            tmp_path, kind, database, telegram, "set", "2", "api_token=-",
            stdin=token + "\n", API_TOKEN=API_TOKEN,
        )  # fmt: skip
        assert (code, says in out) == (1, True), out
        assert token not in out
    assert await kind.count(database, "bots", api_token_hash=digest) == 1
    code, out = await bots(tmp_path, kind, database, telegram, "set", "1", "api_token=")
    assert code == 0 and "api token set" not in out
    assert await kind.count(database, "bots", api_token_hash=digest) == 0
