"""`python -m bench.forget`: how long a `/forget` takes on a SQLite store of N consultations.

A forget makes the deleted words unreadable (`storage.sqlite.erasure`): zeroed pages, the
request index without their trigrams (merged whole before SQLite 3.42) and the WAL
truncated, so its cost grows with the index below SQLite 3.42. The store is seeded once per
size in a scratch folder (one consultation a chat, a request of 40 words from a vocabulary
of 5,000), then `--forgets` chats are forgotten one after another, each timed, while another chat
writes its settings every 10 ms: the longest of those writes is how long a forget holds
the other chats' writes back.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from core.domain.consultation import ChatSettings, Consultation, Message, Role
from storage.sqlite.store import SqliteStore

WORDS_PER_REQUEST = 40
SEED_BATCH = 500


def request_texts(count: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(5000)]
    return [" ".join(rng.choices(vocabulary, k=WORDS_PER_REQUEST)) for _ in range(count)]


def consultation(number: int, text: str) -> Consultation:
    at = 1_000.0 + number
    return Consultation(
        id=str(uuid.uuid4()), chat_key=f"bench:{number}", max_rounds=3, initial_request=text,
        created_at=at, last_activity_at=at, messages=[Message(Role.USER, text, at)],
    )  # fmt: skip


async def seeded(path: Path, count: int) -> None:
    store = await SqliteStore.open(path)
    try:
        texts = request_texts(count, random.Random(count))
        for start in range(0, count, SEED_BATCH):
            batch = range(start, min(count, start + SEED_BATCH))
            await asyncio.gather(*(store.create(consultation(n, texts[n])) for n in batch))
    finally:
        await store.close()


async def forget_times(path: Path, count: int, forgets: int) -> tuple[list[float], float]:
    """Each forget's time, and the longest another chat's write waited meanwhile."""
    store = await SqliteStore.open(path)
    try:
        times = []
        waits = [0.0]
        for n in range(forgets):
            done = asyncio.Event()
            probe = asyncio.create_task(other_writes(store, done, waits))
            started = time.perf_counter()
            await store.forget_chat(f"bench:{n * max(1, count // forgets)}")
            times.append(time.perf_counter() - started)
            done.set()
            await probe
        return times, max(waits)
    finally:
        await store.close()


async def other_writes(store: SqliteStore, done: asyncio.Event, waits: list[float]) -> None:
    """Another chat saving its settings every 10 ms until `done`, each write's time kept."""
    while not done.is_set():
        started = time.perf_counter()
        await store.save_chat_settings("bench:other", ChatSettings(max_rounds=3))
        waits.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)


async def run(sizes: list[int], forgets: int, scratch: Path) -> None:
    print(f"SQLite {sqlite3.sqlite_version}; {forgets} forgets a size, ms")
    for count in sizes:
        path = scratch / f"forget-{count}.sqlite3"
        await seeded(path, count)
        size = path.stat().st_size / 1e6
        seconds, wait = await forget_times(path, count, forgets)
        times = [1000 * t for t in seconds]
        print(
            f"{count:>8} consultations ({size:.0f} MB): median {statistics.median(times):.1f},"
            f" max {max(times):.1f}; another chat's write waited at most {1000 * wait:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--forgets", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(run(args.sizes, args.forgets, Path(scratch)))


if __name__ == "__main__":
    main()
