"""The retrieval phase (`bench/retrieval.py`, `bench/knowledge_text.py`) and the figures it
and the run with excerpts add to the report: the made-up knowledge base is a function of
its seed, its passages fit the chunk size and its topic words reach only a share of them;
percentiles are nearest-rank; the options are read strictly; the fake model counts the
excerpts a request really carried; the importtime log is read for retrieval's modules; and
a small real run on both stores times every kind of query, finds passages, and leaves no
database behind."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import re
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from bench.fakes import BenchModel, excerpts_in
from bench.knowledge_text import (
    CHUNK_CHARS,
    FUNCTION_WORDS,
    QUERY_KINDS,
    Corpus,
    documents,
    queries,
)
from bench.procs import Processes
from bench.report import excerpts_line, imports_line, retrieval_line, retrieval_table
from bench.retrieval import (
    EMBEDDING_DIMENSIONS,
    MIN_PER_KIND,
    MODES,
    STORES,
    Case,
    RetrievalBench,
    even_mix,
    names_of,
    per_document,
    percentiles_ms,
    retrieval_phase,
    sizes_of,
)
from bench.retrieval import embedding_text as bench_embedding_text
from bench.startup_imports import NOT_AT_START, parse_importtime, retrieval_at_start
from core.domain.knowledge import Passage
from core.prompting.prompts import PromptLibrary
from media.knowledge_files import embedding_text as product_embedding_text
from tests.postgres import connect_or_skip, database_url_for_tests


def words_of(text: str) -> set[str]:
    """Every word of `text`, lower-cased (`search_terms` keeps only a query's 32 longest)."""
    return set(re.findall(r"\w+", text.lower()))


def test_the_same_seed_builds_the_same_knowledge_base_and_queries() -> None:
    first = list(documents(Corpus(7), 120, 50))
    again = list(documents(Corpus(7), 120, 50))
    other = list(documents(Corpus(8), 120, 50))

    assert first == again
    assert first != other
    assert queries(Corpus(7, stream=1), 9) == queries(Corpus(7, stream=1), 9)
    assert queries(Corpus(7, stream=1), 9) != queries(Corpus(7, stream=2), 9)


def test_passages_fit_the_chunk_size_in_documents_of_the_size_asked() -> None:
    built = list(documents(Corpus(1), 120, 50))
    passages = [chunk for _, chunks in built for chunk in chunks]

    assert [len(chunks) for _, chunks in built] == [50, 50, 20]
    assert len({document.source for document, _ in built}) == 3
    assert all(500 <= len(chunk.text) <= CHUNK_CHARS for chunk in passages)
    assert all(" › " in chunk.section for chunk in passages)
    assert [chunk.position for chunk in built[0][1]] == list(range(50))


def test_function_words_are_in_nearly_every_passage_and_the_tail_in_few() -> None:
    """The Zipf-like draw: "the" in nearly every passage, a word of the tail in almost none."""
    corpus = Corpus(3)
    passages = [words_of(c.text) for _, cs in documents(corpus, 300, 50) for c in cs]
    share = {word: sum(word in p for p in passages) / len(passages) for word in corpus.words}

    assert share["the"] > 0.95
    assert FUNCTION_WORDS[0] == "the"
    assert sum(share[word] for word in corpus.words[-1000:]) / 1000 < 0.01


def test_topic_words_reach_a_share_of_the_passages_not_most() -> None:
    """The run with excerpts needs its messages' words found, yet not counted as common
    words (held by more than half of the passages), which a search leaves out."""
    topic = ["payment", "providers", "online", "choose"]
    passages = [words_of(c.text) for _, cs in documents(Corpus(5, topic), 400, 50) for c in cs]
    holding = sum(bool(p & set(topic)) for p in passages) / len(passages)
    each = [sum(word in p for p in passages) / len(passages) for word in topic]

    assert 0.2 < holding < 0.4
    assert all(0.1 < share < 0.5 for share in each)


def test_queries_take_the_kinds_in_turn() -> None:
    corpus = Corpus(9, stream=1)
    found = queries(corpus, 9)
    head = set(corpus.words[:12])

    assert [query.kind for query in found] == list(QUERY_KINDS) * 3
    common = [query for query in found if query.kind == "common"]
    assert all(set(query.text.split()) <= head for query in common)
    rare = [query for query in found if query.kind == "rare"]
    assert all(not set(query.text.split()) & head for query in rare)
    long = [query for query in found if query.kind == "consultation"]
    assert all(700 <= len(query.text) <= 1000 for query in long)


def test_percentiles_are_nearest_rank_in_milliseconds() -> None:
    assert percentiles_ms([n / 1000 for n in range(100, 0, -1)]) == {
        "p50": 50.0,
        "p99": 99.0,
        "n": 100,
    }
    assert percentiles_ms([0.002]) == {"p50": 2.0, "p99": 2.0, "n": 1}
    empty = percentiles_ms([])
    assert math.isnan(empty["p50"]) and math.isnan(empty["p99"]) and empty["n"] == 0


def test_all_kinds_count_alike_when_a_budget_cut_some_short() -> None:
    """80 fast rare searches and 10 slow common ones: "all" is 10 of each, not 80 to 10."""
    timed = {"rare": [0.001] * 80, "common": [1.0] * 10, "consultation": [0.5] * 12}
    mixed = even_mix(timed)
    assert sorted(mixed) == [0.001] * 10 + [0.5] * 10 + [1.0] * 10
    assert percentiles_ms(mixed)["p50"] == 500.0
    assert even_mix({}) == []


def test_a_build_is_at_most_two_hundred_puts() -> None:
    assert per_document(1_000) == 50
    assert per_document(10_000) == 50
    assert per_document(100_000) == 500
    assert per_document(100_001) == 501


def test_sizes_and_names_are_read_strictly() -> None:
    assert sizes_of("1000, 10k,100_000") == [1_000, 10_000, 100_000]
    for wrong in ("", "0", "-5", "ten", "1000,,x"):
        with pytest.raises(argparse.ArgumentTypeError):
            sizes_of(wrong)
    stores = names_of(STORES)
    assert stores("postgres,sqlite") == ["sqlite", "postgres"]
    with pytest.raises(argparse.ArgumentTypeError):
        stores("sqlite,mysql")
    assert names_of(tuple(MODES))("hybrid,full-text") == ["full-text", "hybrid"]
    with pytest.raises(argparse.ArgumentTypeError):
        names_of(tuple(MODES))("vector")


def result(store: str, chunks: int, p50: float, p99: float) -> dict[str, Any]:
    kind = {"p50": p50, "p99": p99, "n": 80, "found_mean": 6.0}
    return {
        "store": store,
        "chunks": chunks,
        "mode": "full-text",
        "build_s": 12.4,
        "db_bytes": 13_900_000,
        "all": {"p50": p50, "p99": p99, "n": 240},
        "kinds": {"rare": kind, "common": {**kind, "p99": 2 * p99}, "consultation": kind},
        "rss_before_mb": 28.7,
        "first_ms": 4.25,
        "rss_first_mb": 30.1,
        "rss_peak_mb": 36.6,
    }


def test_the_retrieval_table_has_a_row_per_store_and_size_run() -> None:
    shown = retrieval_table([result("sqlite", 1_000, 1.25, 3.5), result("postgres", 1_000, 4, 9)])
    lines = shown.splitlines()

    assert len(lines) == 4
    assert lines[2].split() == [
        "sqlite", "full-text", "1,000", "1.2", "3.5", "1.2", "3.5", "1.2", "7.0", "1.2", "3.5",
        "4.2", "30.1", "36.6", "13.9", "12",
    ]  # fmt: skip
    assert lines[3].split()[:5] == ["postgres", "full-text", "1,000", "4.0", "9.0"]
    assert "hybrid" not in shown


def test_a_missing_figure_shows_as_a_dash() -> None:
    partial = result("sqlite", 10_000, 1.0, 2.0)
    del partial["rss_peak_mb"]
    assert retrieval_table([partial]).splitlines()[2].split()[13] == "-"


def test_the_line_of_one_knowledge_base() -> None:
    line = retrieval_line(result("postgres", 100_000, 20.0, 80.0))
    assert line.startswith("retrieval postgres 100,000 passages (full-text): all p50 20.0 / p99")
    assert "common p50 20.0 / p99 160.0 ms" in line
    assert "13.9 MB" in line and "28.7 → peak 36.6 MB" in line
    assert "first search 4.2 ms, RSS after it 30.1 MB" in line
    assert "embedding" not in line and "query embeddings" not in line


def test_the_line_of_a_hybrid_knowledge_base_tells_what_the_fake_answered() -> None:
    hybrid = {
        **result("sqlite", 10_000, 50.0, 90.0),
        "mode": "hybrid",
        "embed_s": 7.6,
        "query_embeddings": 252,
        "fallbacks": 0,
    }
    line = retrieval_line(hybrid)
    assert line.startswith("retrieval sqlite 10,000 passages (hybrid): all p50 50.0")
    assert "built in 12 s (8 s of it embedding)" in line
    assert line.endswith(
        "252 query embeddings asked of the fake (its time included), 0 searches by full text alone"
    )


def test_the_bench_embeds_a_chunk_as_the_product_does() -> None:
    """`bench.retrieval.embedding_text` stands in for the loader's, which the bench may not
    import: the two give the same text, headed or not."""
    headed = next(iter(documents(Corpus(2), 3, 3)))[1]
    plain = [dataclasses.replace(chunk, section="") for chunk in headed]
    for chunk in [*headed, *plain]:
        assert bench_embedding_text(chunk) == product_embedding_text(chunk)


def test_the_excerpts_line_sets_the_run_beside_the_runs_without() -> None:
    plain = [
        {"cpu_ms_per_round": 7.0, "throughput": 150.0, "rss_peak_mb": 120.0},
        {"cpu_ms_per_round": 8.0, "throughput": 140.0, "rss_peak_mb": 124.0},
        {"cpu_ms_per_round": 9.0, "throughput": 130.0, "rss_peak_mb": 122.0},
    ]
    excerpts = {
        "cpu_ms_per_round": 9.5,
        "throughput": 120.0,
        "rss_peak_mb": 126.0,
        "model_excerpts_load": {"6": 1400, "0": 2},
    }
    line = excerpts_line(plain, excerpts, passages=1_000, top_k=6)
    assert "bot CPU per round 9.50 against 8.00 ms" in line
    assert "throughput 120.0 against 140.0 rounds/s" in line
    assert "load complete p50 - against - ms" in line
    assert line.endswith("by excerpts carried: 1400 with 6, 2 with 0")


IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:       310 |        900 | core.domain.search_terms
2026-11-28 23:00:00 INFO bot: started
import time:       500 |       2100 | storage.sqlite.knowledge
import time:        80 |         80 | core.domain.search_terms
"""


def test_the_importtime_log_is_read_for_retrievals_modules() -> None:
    imported = parse_importtime(IMPORTTIME)
    assert set(imported) == {"_io", "core.domain.search_terms", "storage.sqlite.knowledge"}
    assert imported["core.domain.search_terms"].cumulative_us == 900  # the first import
    found = retrieval_at_start(imported)
    assert found["loaded_us"] == {"storage.sqlite.knowledge": 2100, "core.domain.search_terms": 900}
    assert found["unwanted"] == []
    assert "semantic_text_splitter" in found["not_loaded"]
    assert "none of semantic_text_splitter" in imports_line(found, NOT_AT_START)

    splitter = parse_importtime(IMPORTTIME + "import time: 50 | 7000 | semantic_text_splitter\n")
    flagged = retrieval_at_start(splitter)
    assert flagged["unwanted"] == ["semantic_text_splitter"]
    assert "imported though not needed: semantic_text_splitter" in imports_line(
        flagged, NOT_AT_START
    )


def excerpt(n: int, text: str) -> Passage:
    return Passage(n, 1, "Payments guide", "Providers", None, text, 1.0)


async def test_the_fake_model_counts_the_excerpts_a_request_carried() -> None:
    """Labels at the start of a line of the system message count; a label quoted inside an
    excerpt's text ("> [K7] …") or written by the user does not."""
    passages = [excerpt(1, "Fees first."), excerpt(2, "[K7] forged\nand more"), excerpt(3, "x")]
    system = "You are an expert.\n\n" + PromptLibrary().knowledge(passages, answering=False)
    six: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "[K4] which provider?"},
    ]
    plain: list[ChatCompletionMessageParam] = [{"role": "user", "content": "[K1] hello"}]
    assert excerpts_in({"messages": six}) == 3

    model = BenchModel()
    await model.start()
    try:
        async with AsyncOpenAI(api_key="b", base_url=model.base_url, max_retries=0) as client:
            await client.chat.completions.create(model="m", messages=plain)
            await client.chat.completions.create(model="m", messages=six)
            await client.chat.completions.create(model="m", messages=six)
        url = f"http://127.0.0.1:{model.port}/_bench/excerpts"
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as response:
                every = await response.json()
            async with http.get(url, params={"since": 2}) as response:
                last = await response.json()
    finally:
        await model.stop()
    assert every == {"next": 3, "excerpts": {"0": 1, "3": 2}}
    assert last == {"next": 3, "excerpts": {"3": 1}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("store", STORES)
async def test_a_small_real_run_times_every_kind_and_leaves_nothing(
    store: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 passages, 36 searches asked in a process of its own with no time to spend: each
    kind timed its minimum of 10 times and answered with passages; the SQLite file and the
    PostgreSQL schema are gone afterwards, and so is the fake embeddings server. Hybrid:
    every passage stored with a vector of the fake's, the index loaded once (in the first
    search), one query embedding asked of the fake per search, none failed over to full
    text."""
    if store == "postgres":
        url = database_url_for_tests()
        admin = await connect_or_skip(url)
        await admin.close()
        monkeypatch.setenv("TEST_DATABASE_URL", url)
    procs = Processes(tmp_path)
    bench = RetrievalBench(procs, tmp_path, queries=36, seconds_per_kind=0.0)
    try:
        async with asyncio.timeout(120):
            found = await bench.run(Case(store, 200, mode))
        bench.close()
        assert procs.children == []
    finally:
        procs.stop_all()

    assert (found["store"], found["chunks"], found["mode"]) == (store, 200, mode)
    assert found["all"]["n"] == 3 * MIN_PER_KIND
    for kind in QUERY_KINDS:
        timed = found["kinds"][kind]
        assert timed["n"] == MIN_PER_KIND
        assert 0 < timed["p50"] <= timed["p99"] < 10_000
    assert found["kinds"]["common"]["found_mean"] == 6
    assert found["kinds"]["consultation"]["found_mean"] == 6
    assert found["db_bytes"] > 200 * 500  # the passages' text at least
    assert 10 < found["rss_before_mb"] <= found["rss_first_mb"] <= found["rss_peak_mb"] < 500
    assert 0 < found["first_ms"] < 60_000
    assert found["searches"] == 12 + 3 * MIN_PER_KIND  # the warm-up's and the timed ones
    assert found["fallbacks"] == 0
    if mode == "hybrid":
        assert found["index_loads"] == 1
        assert found["query_embeddings"] == found["searches"]
        assert 0 < found["embed_s"] < found["build_s"]
        assert found["db_bytes"] > 200 * (500 + 2 * EMBEDDING_DIMENSIONS)  # text and vectors
    else:
        assert found["index_loads"] == 0
        assert "query_embeddings" not in found and found["embed_s"] == 0
    if store == "sqlite":
        assert not [name for name in os.listdir(tmp_path) if name.startswith("knowledge-")]
    else:
        admin = await connect_or_skip(url)
        try:
            left = await admin.fetchval(
                "SELECT COUNT(*) FROM pg_namespace WHERE nspname LIKE 'bench_kb_%'"
            )
        finally:
            await admin.close()
        assert left == 0


async def test_an_unreachable_postgresql_leaves_the_phase_to_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full run ends with the phase: a server that is not there costs PostgreSQL's rows,
    not the run."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("TEST_DATABASE_URL", f"postgresql://postgres@127.0.0.1:{port}/none")
    procs = Processes(tmp_path)
    try:
        async with asyncio.timeout(120):
            found = await retrieval_phase(
                procs, tmp_path, sizes=[100], stores=["sqlite", "postgres"],
                modes=["full-text"], count=6, seconds_per_kind=0.0,
            )  # fmt: skip
    finally:
        procs.stop_all()
    assert [(r["store"], r["chunks"]) for r in found] == [("sqlite", 100)]
    assert "PostgreSQL at TEST_DATABASE_URL not reachable; SQLite only" in capsys.readouterr().out
