"""`consultation-bot dead-letters [list|replay ID|drop ID]`: the updates the workers gave up,
for an operator (with DATABASE_URL; the dead letters live in PostgreSQL).

`list` prints the most recently given up first, one line each: update id, when, why,
attempts, chat and the start of the message; `replay ID` queues the update in the inbox
again (a worker handles it at once, attempts from 0); `drop ID` deletes it. An id that is
not a dead letter ends with exit code 1; a wrong command or a missing DATABASE_URL with 2.
"""

from __future__ import annotations

import json
import time

from app.settings import Settings
from core.domain.errors import ConfigError
from storage.postgres.cluster.dead_letters import DeadLetter, dead_letters, drop, replay
from storage.postgres.cluster.schema import migrate
from storage.postgres.pool import open_pool

USAGE = """usage: consultation-bot dead-letters [list [N] | replay ID | drop ID]

  list [N]    the N (default 50) updates given up most recently
  replay ID   queue update ID in the inbox again (attempts from 0)
  drop ID     delete update ID from the dead letters"""
SHOWN_CHARS = 60


def parse(args: list[str]) -> tuple[str, int | None]:
    """The action and its number (an update id, or how many to list); `ConfigError` for
    anything else."""
    action = args[0] if args else "list"
    rest = args[1:]
    if action == "list" and len(rest) <= 1 and all(a.isdigit() for a in rest):
        return action, int(rest[0]) if rest else 50
    if action in {"replay", "drop"} and len(rest) == 1 and rest[0].lstrip("-").isdigit():
        return action, int(rest[0])
    raise ConfigError(f"unknown dead-letters command {' '.join(args)!r}\n\n{USAGE}")


async def run_dead_letters(settings: Settings, action: str, number: int | None) -> int:
    url = settings.secret("database_url")
    if not url:
        raise ConfigError("DATABASE_URL is not set: dead letters are kept only on PostgreSQL.")
    pool = await open_pool(url, size=1, purpose="dead letters", migrate=migrate)
    try:
        async with pool.acquire() as connection:
            if action == "list":
                for letter in await dead_letters(connection, limit=number or 50):
                    print(line_of(letter))
                return 0
            assert number is not None
            done = await (replay if action == "replay" else drop)(connection, number)
    finally:
        await pool.close()
    if not done:
        print(f"no dead letter {number} (or it is waiting in the inbox already)")
        return 1
    print(f"{'replayed' if action == 'replay' else 'dropped'} {number}")
    return 0


def line_of(letter: DeadLetter) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.dead_at))
    return (
        f"{letter.update_id}\t{when}Z\t{letter.reason}\t{letter.attempts}\t{letter.chat_key}"
        f"\t{summary(letter.payload)}"
    )


def summary(payload: str) -> str:
    """The start of the update's text or caption, else what kind of update it is."""
    try:
        update = json.loads(payload)
    except ValueError:
        return "(not JSON)"
    kinds = [key for key in update if key != "update_id"] if isinstance(update, dict) else []
    body = update.get(kinds[0]) if kinds else None
    text = ""
    if isinstance(body, dict):
        text = str(body.get("text") or body.get("caption") or body.get("data") or "")
    text = " ".join(text.split())
    if not text:
        return f"({kinds[0] if kinds else 'empty'})"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
