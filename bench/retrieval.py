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
stores' own search; "hybrid" is the product's with EMBEDDING_MODEL set
(`app.knowledge_base.open_knowledge`: `storage.hybrid.HybridKnowledge`), its vectors from
the fake model's `/v1/embeddings` (`bench.fakes`, a process the phase starts on 127.0.0.1,
`EMBEDDING_DIMENSIONS` vectors), written with the passages through the same `put`. A hybrid
search embeds its query through the fake, as a turn's does: the fake's own time is in every
timed search. The first search (the hybrid index's load) is timed and its RSS taken apart
from the steady ones. The report lists the modes that ran, nothing else.

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
import logging
import sqlite3
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.knowledge_text import QUERY_KINDS, Corpus, documents, queries
from bench.procs import Child, Processes
from bench.report import retrieval_line
from core.domain.embeddings import Embedded, Embedder
from core.domain.knowledge import Chunk, KnowledgeBase

if TYPE_CHECKING:  # imported with the hybrid mode only (pydantic, numpy, the SDK: ~50 MB)
    from app.settings import Settings

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

EMBEDDING_MODEL = "fake-embeddings"
EMBEDDING_DIMENSIONS = 1536
"""What real providers give (text-embedding-3-small, ada-002): the fake answers the
`dimensions` asked (EMBEDDING_DIMENSIONS), so the index is the size it is in production."""


async def _nothing_to_close() -> None:
    """The store's own knowledge base is closed with the store."""


@dataclass(frozen=True)
class Opened:
    """A mode's knowledge base, the embedder its build embeds through (None: no vectors)
    and what closes that embedder."""

    knowledge: KnowledgeBase
    embedder: Embedder | None = None
    close: Callable[[], Awaitable[None]] = _nothing_to_close


def full_text(store: Any, embeddings_url: str | None) -> Opened:
    """The store's own knowledge base: FTS5 on SQLite, the GIN index on PostgreSQL."""
    knowledge: KnowledgeBase = store.knowledge
    return Opened(knowledge)


def embedding_settings(embeddings_url: str) -> Settings:
    """The settings of a bot with hybrid retrieval against the fake at `embeddings_url`
    (no `.env`; EMBEDDING_* of the environment are overridden)."""
    from pydantic import SecretStr

    from app.settings import Settings

    return Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' own keyword
        openai_api_key=SecretStr("bench"),
        embedding_model=EMBEDDING_MODEL,
        embedding_base_url=embeddings_url,
        embedding_dimensions=EMBEDDING_DIMENSIONS,
    )


def hybrid(store: Any, embeddings_url: str | None) -> Opened:
    """The knowledge base the product opens with EMBEDDING_MODEL set (`HybridKnowledge`
    over the store's), its embedder the product's (`media.embeddings.OpenAIEmbedder`)."""
    if embeddings_url is None:
        raise ValueError("the hybrid mode needs the fake embeddings' URL")
    from app.knowledge_base import open_knowledge

    opened = open_knowledge(embedding_settings(embeddings_url), store)
    return Opened(opened.knowledge, opened.embedder, opened.close)


MODES: dict[str, Callable[[Any, str | None], Opened]] = {"full-text": full_text, "hybrid": hybrid}
"""Mode name → the knowledge base a process of that mode loads and searches, given the
opened store and the fake embeddings' base URL: the build writes through it and the
searching process searches it."""
EMBEDDED = frozenset({"hybrid"})
"""The modes whose build and searches need the fake embeddings server."""


def embedding_text(chunk: Chunk) -> str:
    """What the product embeds of a chunk (`media.knowledge_files.embedding_text`, which the
    bench may not import; a test holds the two equal): heading path, then text."""
    return f"{chunk.section}\n\n{chunk.text}" if chunk.section else chunk.text


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
    embeddings_url: str | None = None,
) -> dict[str, float]:
    """Write `chunks` passages through the mode's `put` (`topic`: see `Corpus`), each
    document's vectors asked of the embeddings first when the mode has an embedder (in
    batches of EMBEDDING_BATCH_SIZE, as `knowledge add` asks them); how long it took in
    all and how much of it the embeddings took."""
    store = await open_store(kind, address)
    began = time.perf_counter()
    written = 0
    embedding = 0.0
    try:
        opened = MODES[mode](store, embeddings_url)
        try:
            embedder = opened.embedder
            for document, cut in documents(Corpus(seed, topic), chunks, per_document(chunks)):
                vectors = None
                if embedder is not None:
                    asked = time.perf_counter()
                    embedded = await embedder.embed([embedding_text(c) for c in cut])
                    embedding += time.perf_counter() - asked
                    vectors = Embedded(embedder.model, embedded)
                await opened.knowledge.put(document, cut, at=time.time(), vectors=vectors)
                written += len(cut)
            stored = await opened.knowledge.count()
            embedded_count = (
                (await store.knowledge.vector_version(embedder.model))[0] if embedder else 0
            )
        finally:
            await opened.close()
    finally:
        await store.close()
    if stored != written:
        raise RuntimeError(f"{written} passages written, {stored} stored")
    if embedder is not None and embedded_count != written:
        raise RuntimeError(f"{written} passages written, {embedded_count} with vectors")
    return {"build_s": time.perf_counter() - began, "embed_s": embedding, "chunks": stored}


class Warnings(logging.Handler):
    """Counts the warnings a logger gives: a hybrid search answered by full text alone
    (no query embedding in time, the provider failed) says so in one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


async def search_timed(
    kind: str,
    address: str,
    mode: str,
    count: int,
    seed: int,
    seconds_per_kind: float,
    embeddings_url: str | None = None,
) -> dict[str, Any]:
    """In the searching process: open the store, time the first search (a hybrid index
    loads in it) and the RSS after it, warm up, time `count` searches, the kinds in turn;
    a kind whose searches took `seconds_per_kind` in all (once at least `MIN_PER_KIND` of
    them ran) is not timed further, so a slow kind bounds the phase."""
    warned = Warnings()
    logging.getLogger("storage.hybrid").addHandler(warned)
    store = await open_store(kind, address)
    searches = 0
    try:
        opened = MODES[mode](store, embeddings_url)
        try:
            searcher = opened.knowledge
            rss_before = rss_mb("VmRSS")
            warm_up = queries(Corpus(seed, stream=2), WARM_UP)
            began = time.perf_counter()
            await searcher.search(warm_up[0].text, role=None, limit=LIMIT)
            first = time.perf_counter() - began
            rss_first = rss_mb("VmRSS")
            for query in warm_up[1:]:
                await searcher.search(query.text, role=None, limit=LIMIT)
            searches = len(warm_up)
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
                searches += 1
        finally:
            await opened.close()
    finally:
        await store.close()
    return {
        "first_ms": 1000 * first,
        "rss_first_mb": rss_first,
        "searches": searches,
        "fallbacks": warned.count,
        "index_loads": getattr(searcher, "loads", 0),
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
    """Builds a knowledge base per store, size and mode and times its searches; the fake
    embeddings server, started with the first case of a mode that needs it, runs until
    `close`."""

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
        self._embeddings: tuple[Child, int] | None = None

    def embeddings_url(self, mode: str) -> str | None:
        """The fake embeddings' base URL for a mode that needs it (started on first use)."""
        if mode not in EMBEDDED:
            return None
        if self._embeddings is None:
            child = self.procs.start("fake-model-embeddings", ["-m", "bench.fakes", "model"])
            self._embeddings = (child, self.procs.port_of(child))
        return f"http://127.0.0.1:{self._embeddings[1]}/v1"

    async def embedding_requests(self) -> int:
        """How many embeddings requests the fake has answered so far."""
        import aiohttp

        assert self._embeddings is not None
        url = f"http://127.0.0.1:{self._embeddings[1]}/_bench/embeddings"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            counted: dict[str, int] = await response.json()
        return counted["requests"]

    def close(self) -> None:
        """Stop the fake embeddings server, if one was started."""
        if self._embeddings is not None:
            self.procs.stop(self._embeddings[0])
            self._embeddings = None

    async def run(self, case: Case) -> dict[str, Any]:
        """The figures of one knowledge base, built for `case` and removed afterwards."""
        url = self.embeddings_url(case.mode)
        if case.store == "sqlite":
            path = self.scratch / f"knowledge-{case.chunks}-{case.mode}.sqlite3"
            try:
                built = await build(
                    "sqlite", str(path), case.chunks, mode=case.mode, seed=self.seed,
                    embeddings_url=url,
                )  # fmt: skip
                return await self._timed(case, str(path), built, sqlite_bytes(path))
            finally:
                for leftover in path.parent.glob(path.name + "*"):
                    leftover.unlink()
        return await self._postgres(case, url)

    async def _postgres(self, case: Case, embeddings_url: str | None) -> dict[str, Any]:
        import asyncpg

        from bench.pg_runs import test_database_url, with_settings

        admin_url = test_database_url()
        tag = f"bench_kb_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(admin_url, timeout=5)
        try:
            await admin.execute(f'CREATE SCHEMA "{tag}"')
            url = with_settings(admin_url, search_path=tag)
            built = await build(
                "postgres", url, case.chunks, mode=case.mode, seed=self.seed,
                embeddings_url=embeddings_url,
            )  # fmt: skip
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
        url = self.embeddings_url(case.mode)
        asked = await self.embedding_requests() if url else 0
        child = self.procs.start(
            f"retrieval-{case.store}-{case.chunks}-{case.mode}",
            [
                "-m", "bench.retrieval", "--store", case.store, "--address", address,
                "--mode", case.mode, "--queries", str(self.queries), "--seed", str(self.seed),
                "--seconds-per-kind", str(self.seconds_per_kind), "--out", str(out),
                *(["--embeddings-url", url] if url else []),
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
        if url:
            timed["query_embeddings"] = await self.embedding_requests() - asked
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
    try:
        for chunks in sizes:
            for store in stores:
                for mode in modes:
                    results.append(await bench.run(Case(store, chunks, mode)))
                    print(retrieval_line(results[-1]), flush=True)
    finally:
        bench.close()
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
    parser.add_argument("--embeddings-url", help="the fake embeddings' base URL (hybrid)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    timed = asyncio.run(
        search_timed(
            args.store,
            args.address,
            args.mode,
            args.queries,
            args.seed,
            args.seconds_per_kind,
            args.embeddings_url,
        )
    )
    args.out.write_text(json.dumps(timed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
