"""`consultation-bot dead-letters`: an operator lists the updates the workers gave up,
replays one into the inbox or drops one, on the test's own PostgreSQL schema."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg

from storage.postgres.cluster.inbox import PostgresInbox
from tests.app.test_cli import SCRIPT, run
from tests.bot.test_inbox_worker import migrated
from tests.postgres import postgres_url  # noqa: F401  (fixture)


async def given_up(url: str) -> None:
    """Two updates in the dead letters: 71 (a text, after 3 attempts) and 72 (a photo)."""
    await migrated(url)
    inbox = await PostgresInbox.open(url)
    try:
        text = {"update_id": 71, "message": {"text": "a   question\nthat breaks " + "x" * 80}}
        await inbox.put(71, "tg:5", json.dumps(text))
        for _ in range(3):
            await inbox.begin(71)
        await inbox.bury(71, "tg:5", json.dumps(text), "attempts")
        await inbox.bury(72, "tg:6", json.dumps({"update_id": 72, "message": {}}), "error")
    finally:
        await inbox.close()


async def cli(tmp_path: Path, *args: str, **env: str) -> tuple[int, str, str]:
    done = await asyncio.to_thread(run, tmp_path, str(SCRIPT), "dead-letters", *args, **env)
    return done.returncode, done.stdout, done.stderr


async def test_list_replay_and_drop(tmp_path: Path, postgres_url: str) -> None:  # noqa: F811
    """`list` shows each letter on one line (id, time, reason, attempts, chat, the start of
    its text); `replay` puts it back in the inbox with attempts 0; `drop` deletes it; an id
    that is no dead letter exits 1."""
    await given_up(postgres_url)
    code, out, err = await cli(tmp_path, "list", DATABASE_URL=postgres_url)
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert [(f[0], f[2], f[3], f[4]) for f in lines] == [
        ("72", "error", "1", "tg:6"),
        ("71", "attempts", "3", "tg:5"),
    ]
    assert lines[1][5] == "a question that breaks " + "x" * 37 + "…"
    assert lines[0][5] == "(message)"

    assert await cli(tmp_path, "replay", "71", DATABASE_URL=postgres_url) == (
        0,
        "replayed 71\n",
        "",
    )
    code, out, _ = await cli(tmp_path, "replay", "71", DATABASE_URL=postgres_url)
    assert code == 1 and out.startswith("no dead letter 71")
    assert await cli(tmp_path, "drop", "72", DATABASE_URL=postgres_url) == (0, "dropped 72\n", "")
    assert (await cli(tmp_path, "list", DATABASE_URL=postgres_url))[1] == ""
    db = await asyncpg.connect(postgres_url)
    try:
        row = await db.fetchrow("SELECT chat_key, attempts FROM inbox WHERE update_id = 71")
    finally:
        await db.close()
    assert row is not None and (row["chat_key"], row["attempts"]) == ("tg:5", 0)


async def test_without_a_database_or_with_a_wrong_command_it_exits_2(tmp_path: Path) -> None:
    code, _, err = await cli(tmp_path)
    assert code == 2 and "DATABASE_URL is not set" in err and len(err.splitlines()) == 1
    code, _, err = await cli(tmp_path, "replay", "x", DATABASE_URL="postgresql://nowhere/x")
    assert code == 2 and "usage: consultation-bot dead-letters" in err
