"""A bot added with `consultation-bot bots add` while real `python -m bot` processes run: two
workers polling on one PostgreSQL schema both start it within seconds, exactly one of them
polls it (one polling leader per bot), every update is answered once with the bot's own
rounds, and a `bots disable` stops it on both; one process on SQLite likewise, and after a
restart it serves the bot again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.app.test_cli import SCRIPT, run
from tests.app.test_entrypoint import fakes_env
from tests.cluster_harness import chat_ids, cluster, unique_token, worker_env
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.waiting import until

LEADING = "polling: this worker polls Telegram for all workers"
MAIN = unique_token()
ADDED = unique_token()
KEY = "fleet-workers-secret-key-0123456789"


def answers(telegram: FakeBotApi, chat: int) -> list[str]:
    """What the added bot sent to `chat`, in order."""
    return [
        str(c.params["text"])
        for c in telegram.calls
        if c.token == ADDED
        and c.method == "sendMessage"
        and c.result is not None
        and c.params.get("chat_id") == chat
    ]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeBotApi]:
    """A fake Bot API that knows the deployment's bot and the one added."""
    server = FakeBotApi(
        tokens={
            MAIN: (int(MAIN.split(":")[0]), "main_bot"),
            ADDED: (int(ADDED.split(":")[0]), "added_bot"),
        }
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_a_bot_added_to_running_workers_is_polled_once_and_answered_once(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    telegram: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Added while two workers run, the bot answers each of its chats once, in its own
    rounds; each bot has exactly one polling leader; disabled, both workers stop it."""
    env = worker_env(tmp_path, telegram, model_server, postgres_url, webhook=False, token=MAIN)
    env |= {"SECRET_KEY": KEY}
    chats = chat_ids(6)
    async with cluster(tmp_path) as workers:
        for _ in range(2):
            await workers.start(env)
        await workers.running()
        done = await asyncio.to_thread(
            run, tmp_path, str(SCRIPT), "bots", "add", "--token", ADDED, "--rounds", "4", **env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for worker in workers.workers:
            await worker.bot.logged("@added_bot is running", timeout=10)
        for chat in chats:
            telegram.push_update(
                telegram.text_message(chat, f"Question of {chat}", user_id=chat), token=ADDED
            )

        await until(lambda: all(answers(telegram, chat) for chat in chats), "every chat answered")
        leaders = sum(worker.log().count(LEADING) for worker in workers.workers)
        assert leaders == 2, workers.logs()  # the deployment's bot's and the added one's

        done = await asyncio.to_thread(
            run, tmp_path, str(SCRIPT), "bots", "disable", "@added_bot", **env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for worker in workers.workers:
            await worker.bot.logged("@added_bot stops (disabled or removed)", timeout=10)
        for worker in workers.workers:
            assert "Traceback" not in worker.log(), worker.log()
    for chat in chats:
        [answer] = answers(telegram, chat)
        assert answer.startswith(f"Reply to: Question of {chat}") and "Round 1 of 4" in answer


async def test_a_bot_added_to_a_running_sqlite_process_answers_and_a_restart_keeps_it(
    tmp_path: Path, telegram: FakeBotApi, model_server: FakeModelServer
) -> None:
    """One process on SQLite: a bot added while it runs answers in its own rounds; after a
    restart (SIGTERM, start again) it answers again, its consultation going on."""
    env = fakes_env(
        tmp_path,
        telegram,
        model_server,
        TELEGRAM_BOT_TOKEN=MAIN,
        DB_PATH=str(tmp_path / "bot.sqlite3"),
        SECRET_KEY=KEY,
        USER_RATE_LIMIT_PER_MINUTE="0",
    )
    [chat] = chat_ids(1)
    async with cluster(tmp_path) as processes:
        first = await processes.start(env)
        await processes.running()
        done = await asyncio.to_thread(
            run, tmp_path, str(SCRIPT), "bots", "add", "--token", ADDED, "--rounds", "4", **env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        await first.bot.logged("@added_bot is running", timeout=10)
        telegram.push_update(telegram.text_message(chat, "Plan my trip", user_id=chat), token=ADDED)
        await until(lambda: len(answers(telegram, chat)) == 1, "the added bot answered")
        assert await first.bot.stop() == 0
        second = await processes.start(env)
        await second.bot.logged("@added_bot is running")
        telegram.push_update(telegram.text_message(chat, "To Rome", user_id=chat), token=ADDED)
        await until(lambda: len(answers(telegram, chat)) == 2, "the added bot answered again")
        assert "Traceback" not in first.log() + second.log()
    one, two = answers(telegram, chat)
    assert "Round 1 of 4" in one and "Round 2 of 4" in two


def sent(telegram: FakeBotApi, token: str, chat: int) -> list[str]:
    """What the bot of `token` sent to `chat`, in order."""
    return [
        str(c.params["text"])
        for c in telegram.calls
        if c.token == token
        and c.method == "sendMessage"
        and c.result is not None
        and c.params.get("chat_id") == chat
    ]


async def test_a_user_at_the_limit_in_one_bot_is_still_answered_by_another_on_postgresql(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    telegram: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """One message a minute, counted by the workers' shared limits: the same user id's
    second message to the deployment's bot is refused with the wait, and their message to
    the added bot a moment later is answered."""
    env = worker_env(tmp_path, telegram, model_server, postgres_url, webhook=False, token=MAIN)
    await limits_apart(tmp_path, telegram, env)


async def test_a_user_at_the_limit_in_one_bot_is_still_answered_by_another_on_sqlite(
    tmp_path: Path, telegram: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The same on one SQLite process, whose limits are in each bot's memory."""
    db = str(tmp_path / "bot.sqlite3")
    env = fakes_env(tmp_path, telegram, model_server, TELEGRAM_BOT_TOKEN=MAIN, DB_PATH=db)
    await limits_apart(tmp_path, telegram, env)


async def limits_apart(tmp_path: Path, telegram: FakeBotApi, env: dict[str, str]) -> None:
    """At one message a minute, a user answered then refused by the deployment's bot is
    answered by the bot added (the limits are per bot)."""
    env |= {"SECRET_KEY": KEY, "USER_RATE_LIMIT_PER_MINUTE": "1"}
    [chat] = chat_ids(1)
    async with cluster(tmp_path) as processes:
        worker = await processes.start(env)
        await processes.running()
        done = await asyncio.to_thread(
            run, tmp_path, str(SCRIPT), "bots", "add", "--token", ADDED, **env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        await worker.bot.logged("@added_bot is running", timeout=10)
        for text in ("First question", "Second question"):
            telegram.push_update(telegram.text_message(chat, text, user_id=chat), token=MAIN)
        await until(lambda: len(sent(telegram, MAIN, chat)) == 2, "answered, then refused")
        telegram.push_update(
            telegram.text_message(chat, "Ask the other", user_id=chat), token=ADDED
        )
        await until(lambda: len(sent(telegram, ADDED, chat)) == 1, "the added bot answered")
        assert "Traceback" not in worker.log(), worker.log()
    answered, refused = sent(telegram, MAIN, chat)
    assert answered.startswith("Reply to: First question")
    assert refused.startswith("You're sending messages too fast")
    [other] = sent(telegram, ADDED, chat)
    assert other.startswith("Reply to: Ask the other")
