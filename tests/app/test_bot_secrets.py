"""The added bots' tokens under SECRET_KEY (`app.bot_secrets`): sealed and opened again by the
same key only, a wrong key or a damaged row named in one line; `cryptography` loaded only
once a token is sealed or opened; tokens kept out of the logs; a token check that fails
says so without the token."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from app.bot_secrets import TokenBox, TokenUnreadable
from app.bots import BotKeeper
from app.logs import REDACTED, Redactor, redact_also
from core.domain.bots import BotProfile, BotRefused, StoredBot
from fakes.bot_api import FakeBotApi
from storage.sqlite.store import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "424242:AAE-a-real-looking-token_xyz9"


def stored(cipher: str) -> StoredBot:
    return StoredBot(7, 424242, "shop_bot", "", cipher, "xyz9", True, BotProfile(), 1.0, 1.0)


def test_a_token_opens_under_its_key_only() -> None:
    """Sealed under one key, a token opens under it; another key or a damaged row is
    TokenUnreadable naming the bot, without the cipher text."""
    sealed = TokenBox("first-key-of-enough-length").seal(TOKEN)
    assert TOKEN not in sealed and sealed.isascii()
    assert TokenBox("first-key-of-enough-length").open(stored(sealed)) == TOKEN
    for box, cipher in (
        (TokenBox("second-key-of-enough-length"), sealed),
        (TokenBox("first-key-of-enough-length"), sealed[:-8] + "AAAAAAAA"),
        (TokenBox("first-key-of-enough-length"), "not a fernet token at all é"),
    ):
        with pytest.raises(TokenUnreadable) as unreadable:
            box.open(stored(cipher))
        message = str(unreadable.value)
        assert message.startswith("bot #7 @shop_bot: its token does not decrypt")
        assert "\n" not in message and sealed not in message


def test_a_token_sealed_or_opened_is_redacted_from_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After sealing, a root handler's redactor hides the token in any later log line."""
    handler = logging.StreamHandler()
    redactor = Redactor(["unrelated-secret"])
    handler.addFilter(redactor)
    logging.getLogger().addHandler(handler)
    try:
        TokenBox("a-key-of-enough-length!").seal(TOKEN)
        assert redactor.redact(f"GET /bot{TOKEN}/getMe") == f"GET /bot{REDACTED}/getMe"
        redact_also("another-token-1234")
        assert redactor.redact("x another-token-1234") == f"x {REDACTED}"
    finally:
        logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize("answer", ["unknown", "unreachable", "failing"])
async def test_a_refused_token_check_logs_and_says_nothing_of_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    """getMe refused (401), Telegram unreachable or failing with the token in its answer:
    BotRefused in one line without the token, nothing stored, and no log record at any
    level holds the token."""
    caplog.set_level(logging.DEBUG)
    known = {"1:other-token": (1, "other_bot")}
    if answer == "failing":
        known[TOKEN] = (424242, "shop_bot")
    telegram = FakeBotApi(tokens=known)
    telegram.fail_next("getMe", status=502, description=f"Bad Gateway for {TOKEN}")
    await telegram.start()
    base_url = telegram.base_url
    if answer == "unreachable":
        await telegram.stop()
    store = await SqliteStore.open(tmp_path / "bots.db")
    try:
        keeper = BotKeeper(
            store.bots,
            secret_key="a-key-of-enough-length!",
            api_base_url=base_url,
            main_token=None,
            roles=(),
            languages=("en",),
        )
        with pytest.raises(BotRefused) as refused:
            await keeper.add(TOKEN, BotProfile())
        said = str(refused.value)
        assert ("401 Unauthorized" in said) == (answer == "unknown")
        assert ("HTTP 502 Bad Gateway for …" in said) == (answer == "failing")
        assert "\n" not in said
        assert TOKEN not in said and TOKEN.split(":")[1] not in caplog.text
        assert await store.bots.count_bots() == 0
    finally:
        await store.close()
        if answer != "unreachable":
            await telegram.stop()


def test_cryptography_loads_only_once_a_bot_is_stored(tmp_path: Path) -> None:
    """In a process that leaves it out (no tool servers), the start's check of an empty
    bots table imports no `cryptography`; sealing a token for a bot imports it then."""
    program = (
        "import asyncio, sys\n"
        "from app.lean_imports import leave_out_unused\n"
        "leave_out_unused(tools=False)\n"
        "import telegram.ext\n"
        "from app.bots import check_stored_bots\n"
        "from app.bot_secrets import TokenBox\n"
        "from storage.sqlite.store import SqliteStore\n"
        "def loaded():\n"
        "    return any(m is not None for n, m in sys.modules.items()"
        " if n.split('.')[0] == 'cryptography')\n"
        "async def main():\n"
        "    store = await SqliteStore.open(sys.argv[1])\n"
        "    print(await check_stored_bots(store.bots, 'k' * 32), loaded())\n"
        "    TokenBox('k' * 32).seal('1:abc')\n"
        "    print(loaded())\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "bots.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["0", "False", "True"]
