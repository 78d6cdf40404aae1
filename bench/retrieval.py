"""The retrieval phase (`python -m bench --retrieval`): how long the knowledge base's search
takes at 1,000, 10,000 and 100,000 passages, on SQLite and on PostgreSQL.

For each store, size and mode the phase builds a knowledge base of made-up documents
(`bench.knowledge_text`, documents of `PER_DOCUMENT` passages or more, written through the
mode's `KnowledgeBase.put`, as `consultation-bot knowledge add` writes them), then starts a
process of its own (`python -m bench.retrieval`) that opens the store as the bot does, runs
a few warm-up searches and times a few hundred more through `KnowledgeSearch.search` —
what a turn calls, with `limit` 6 (`KNOWLEDGE_TOP_K`) — rare words, common words and
consultation-like queries in turn, each kind within a time budget. It reports p50/p99 per
query kind and in all, the searching process's RSS before its first search and at its
peak, the database's size and how long the build took.

A mode is how the knowledge base is loaded and searched (`MODES`): "full-text" is the
stores' own search. Hybrid search over embeddings is one more entry of `MODES` (see
there); the report lists the modes that ran, nothing else.

Invariants: every database the phase makes is removed — the SQLite file with the scratch
folder, each PostgreSQL schema (made in the database at TEST_DATABASE_URL, as
`bench.pg_runs` does) in a `finally`, also on failure — and every process it starts is
stopped in a `finally`; timings are taken in the searching process around each `search`
call (`time.perf_counter`), nothing else in that process running meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.knowledge_text import QUERY_KINDS, Corpus, documents, queries
from bench.procs import Processes
from bench.report import retrieval_line
from core.domain.knowledge import KnowledgeBase

STORES = ("sqlite", "postgres")
SIZES = (1_000, 10_000, 100_000)
PER_DOCUMENT = 50
"""Passages per made-up document (about 35 KB of text) ..."""
MAX_PUTS = 200
"""... or more, so that a build is at most this many puts: PostgreSQL's `put` runs ANALYZE
over the whole table, which 2,000 puts at 100,000 passages would take many minutes over."""


def per_document(chunks: int) -> int:
    """Passages per document for a knowledge base of `chunks`: 50 up to 10,000, then
    `chunks / MAX_PUTS` (500 at 100,000, a 350 KB manual)."""
    return max(PER_DOCUMENT, -(-chunks // MAX_PUTS))


LIMIT = 6
"""Passages a search asks for: the product's KNOWLEDGE_TOP_K."""
WARM_UP = 12
MIN_PER_KIND = 10
SECONDS_PER_KIND = 40.0
"""How long the searches of one kind may take in all, per store, size and mode (at least
`MIN_PER_KIND` of them are timed): at 100,000 passages one search can take seconds on
PostgreSQL, and 80 of them would take the phase past many minutes."""
SEED = 20261128


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    """p50/p99 (nearest rank) in milliseconds, and how many values; NaN of none."""
    if not seconds:
        return {"p50": float("nan"), "p99": float("nan"), "n": 0}
    ordered = sorted(seconds)

    def rank(p: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    return {"p50": rank(50), "p99": rank(99), "n": len(ordered)}


def sizes_of(text: str) -> list[int]:
    """`--knowledge-chunks`: positive sizes, comma-separated (`10k` and `1_000` read too)."""
    sizes = []
    for part in text.split(","):
        word = part.strip().lower().replace("_", "")
        if not word:
            continue
        factor = 1000 if word.endswith("k") else 1
        try:
            size = int(word.removesuffix("k")) * factor
        except ValueError:
            size = 0
        if size <= 0:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is no number of passages")
        sizes.append(size)
    if not sizes:
        raise argparse.ArgumentTypeError("give one or more numbers of passages")
    return sizes


def names_of(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A reader of comma-separated names of `allowed`, each once, in `allowed`'s order."""

    def read(text: str) -> list[str]:
        names = {name.strip() for name in text.split(",") if name.strip()}
        unknown = sorted(names - set(allowed))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: give one or more of {', '.join(allowed)}")
        return [name for name in allowed if name in names]

    return read


# -- the modes ------------------------------------------------------------------------------


def full_text(store: Any) -> KnowledgeBase:
    """The store's own knowledge base: FTS5 on SQLite, the GIN index on PostgreSQL."""
    knowledge: KnowledgeBase = store.knowledge
    return knowledge


MODES: dict[str, Callable[[Any], KnowledgeBase]] = {"full-text": full_text}
"""Mode name → the knowledge base a process of that mode loads and searches, given the
opened store: the build writes through it and the searching process searches it. Hybrid
search is one more entry, opening the knowledge base as the product does with
EMBEDDING_MODEL set (against an embeddings endpoint the phase starts: the fake model's)."""


# -- the stores -----------------------------------------------------------------------------


async def open_store(kind: str, address: str) -> Any:
    """The store as the bot opens it (`app/stores.py`), migrated; imports on first use."""
    if kind == "sqlite":
        from storage.sqlite.store import SqliteStore

        return await SqliteStore.open(address)
    from storage.postgres.store import PostgresStore

    return await PostgresStore.open(address, pool_size=4)


async def build(
    kind: str,
    address: str,
    chunks: int,
    *,
    mode: str = "full-text",
    seed: int = SEED,
    topic: Sequence[str] = (),
) -> dict[str, float]:
    """Write `chunks` passages through the mode's `put` (`topic`: see `Corpus`); how long
    it took."""
    store = await open_store(kind, address)
    began = time.perf_counter()
    written = 0
    try:
        knowledge = MODES[mode](store)
        for document, cut in documents(Corpus(seed, topic), chunks, per_document(chunks)):
            await knowledge.put(document, cut, at=time.time())
            written += len(cut)
        stored = await knowledge.count()
    finally:
        await store.close()
    if stored != written:
        raise RuntimeError(f"{written} passages written, {stored} stored")
    return {"build_s": time.perf_counter() - began, "chunks": stored}


async def search_timed(
    kind: str, address: str, mode: str, count: int, seed: int, seconds_per_kind: float
) -> dict[str, Any]:
    """In the searching process: open the store, warm up, time `count` searches, the kinds
    in turn; a kind whose searches took `seconds_per_kind` in all (once at least
    `MIN_PER_KIND` of them ran) is not timed further, so a slow kind bounds the phase."""
    store = await open_store(kind, address)
    try:
        searcher = MODES[mode](store)
        rss_before = rss_mb("VmRSS")
        for query in queries(Corpus(seed, stream=2), WARM_UP):
            await searcher.search(query.text, role=None, limit=LIMIT)
        timed: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
        found: dict[str, list[int]] = {k: [] for k in QUERY_KINDS}
        for query in queries(Corpus(seed, stream=1), count):
            done = timed[query.kind]
            if len(done) >= MIN_PER_KIND and sum(done) >= seconds_per_kind:
                continue
            began = time.perf_counter()
            passages = await searcher.search(query.text, role=None, limit=LIMIT)
            done.append(time.perf_counter() - began)
            found[query.kind].append(len(passages or []))
    finally:
        await store.close()
    return {
        "all": percentiles_ms(even_mix(timed)),
        "kinds": {
            kind: {
                **percentiles_ms(timed[kind]),
                "found_mean": sum(found[kind]) / max(len(found[kind]), 1),
            }
            for kind in QUERY_KINDS
        },
        "rss_before_mb": rss_before,
        "rss_peak_mb": rss_mb("VmHWM"),
        "seconds": timed,
    }


def even_mix(timed: dict[str, list[float]]) -> list[float]:
    """The first searches of each kind, as many of each as the kind timed least: the mix
    the queries were asked in, though a budget ended some kinds early (their slow searches
    would otherwise count for less than they do in the mix)."""
    fewest = min((len(seconds) for seconds in timed.values()), default=0)
    return [s for seconds in timed.values() for s in seconds[:fewest]]


def rss_mb(field: str) -> float:
    """This process's `VmRSS` or `VmHWM` (its peak), in MB."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def sqlite_bytes(path: Path) -> int:
    """The file's size with its WAL folded in (after a checkpoint)."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@dataclass(frozen=True)
class Case:
    store: str
    chunks: int
    mode: str


class RetrievalBench:
    """Builds a knowledge base per store, size and mode and times its searches."""

    def __init__(
        self,
        procs: Processes,
        scratch: Path,
        *,
        queries: int,
        seconds_per_kind: float = SECONDS_PER_KIND,
        seed: int = SEED,
    ) -> None:
        self.procs = procs
        self.scratch = scratch
        self.queries = queries
        self.seconds_per_kind = seconds_per_kind
        self.seed = seed

    async def run(self, case: Case) -> dict[str, Any]:
        """The figures of one knowledge base, built for `case` and removed afterwards."""
        if case.store == "sqlite":
            path = self.scratch / f"knowledge-{case.chunks}-{case.mode}.sqlite3"
            try:
                built = await build(
                    "sqlite", str(path), case.chunks, mode=case.mode, seed=self.seed
                )
                return await self._timed(case, str(path), built, sqlite_bytes(path))
            finally:
                for leftover in path.parent.glob(path.name + "*"):
                    leftover.unlink()
        return await self._postgres(case)

    async def _postgres(self, case: Case) -> dict[str, Any]:
        import asyncpg

        from bench.pg_runs import test_database_url, with_settings

        admin_url = test_database_url()
        tag = f"bench_kb_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(admin_url, timeout=5)
        try:
            await admin.execute(f'CREATE SCHEMA "{tag}"')
            url = with_settings(admin_url, search_path=tag)
            built = await build("postgres", url, case.chunks, mode=case.mode, seed=self.seed)
            await admin.execute(f'VACUUM ANALYZE "{tag}".knowledge_chunks')
            size = await admin.fetchval(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = $1 AND c.relkind = 'r'",
                tag,
            )
            return await self._timed(case, url, built, int(size))
        finally:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
            await admin.close()

    async def _timed(
        self, case: Case, address: str, built: dict[str, float], size: int
    ) -> dict[str, Any]:
        out = self.scratch / f"retrieval-{case.store}-{case.chunks}-{case.mode}.json"
        child = self.procs.start(
            f"retrieval-{case.store}-{case.chunks}-{case.mode}",
            [
                "-m", "bench.retrieval", "--store", case.store, "--address", address,
                "--mode", case.mode, "--queries", str(self.queries), "--seed", str(self.seed),
                "--seconds-per-kind", str(self.seconds_per_kind), "--out", str(out),
            ],
        )  # fmt: skip
        try:
            # Polled, not waited on in a thread, so that Ctrl-C stops the bench meanwhile; the
            # deadline leaves room for the budgets and a slow search past each.
            deadline = time.monotonic() + 120 + 6 * self.seconds_per_kind
            while (code := child.popen.poll()) is None and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        finally:
            self.procs.stop(child)
        if code != 0 or not out.exists():
            raise RuntimeError(f"the searching process failed ({code}):\n{child.tail()}")
        timed = json.loads(out.read_text())
        out.unlink()
        return {
            "store": case.store,
            "chunks": case.chunks,
            "mode": case.mode,
            **built,
            "db_bytes": size,
            **timed,
        }


async def retrieval_phase(
    procs: Processes,
    scratch: Path,
    *,
    sizes: list[int],
    stores: list[str],
    modes: list[str],
    count: int,
    seconds_per_kind: float = SECONDS_PER_KIND,
) -> list[dict[str, Any]]:
    """Each store at each size, smallest first, in each mode; a line printed as each is done.
    PostgreSQL is left out, with a line saying so, when its server cannot be reached: the
    phase ends a full run, whose other figures would be lost with it."""
    if "postgres" in stores and not await postgres_reachable():
        print("retrieval: PostgreSQL at TEST_DATABASE_URL not reachable; SQLite only", flush=True)
        stores = [store for store in stores if store != "postgres"]
    bench = RetrievalBench(procs, scratch, queries=count, seconds_per_kind=seconds_per_kind)
    results: list[dict[str, Any]] = []
    for chunks in sizes:
        for store in stores:
            for mode in modes:
                results.append(await bench.run(Case(store, chunks, mode)))
                print(retrieval_line(results[-1]), flush=True)
    return results


async def postgres_reachable() -> bool:
    import asyncpg

    from bench.pg_runs import test_database_url

    try:
        connection = await asyncpg.connect(test_database_url(), timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError):
        return False
    await connection.close()
    return True


def main() -> int:
    """The searching process: time the searches, write the figures as JSON to `--out`."""
    parser = argparse.ArgumentParser(description="time knowledge-base searches")
    parser.add_argument("--store", choices=STORES, required=True)
    parser.add_argument("--address", required=True, help="the SQLite file or PostgreSQL URL")
    parser.add_argument("--mode", choices=list(MODES), default="full-text")
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--seconds-per-kind", type=float, default=SECONDS_PER_KIND)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    timed = asyncio.run(
        search_timed(
            args.store, args.address, args.mode, args.queries, args.seed, args.seconds_per_kind
        )
    )
    args.out.write_text(json.dumps(timed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
