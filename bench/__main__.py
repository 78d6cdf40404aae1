"""`python -m bench` (`make bench`): the product bot against two PTB relays, A B C A B C.

Everything runs on 127.0.0.1 against the fakes; every process started is stopped
at the end, also on Ctrl-C or an error. Results: a table on stdout and a JSON
file in bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.driver import message_text
from bench.hostile import hostile_documents, hostile_line
from bench.large_bodies import large_bodies, large_bodies_line
from bench.many_bots import FULL, QUICK, ManyBotsBench, many_bots_table, medians
from bench.many_bots import STORES as MANY_STORES
from bench.pg_report import pg_table
from bench.pg_runs import KINDS, PostgresBench
from bench.procs import ROOT, Processes
from bench.report import (
    TITLES,
    YARDSTICKS,
    excerpts_line,
    imports_line,
    median_of,
    pair_line,
    ratios,
    retrieval_table,
    table,
    verdict_lines,
    verdicts,
)
from bench.retrieval import MODES, SIZES, STORES, build, names_of, retrieval_phase, sizes_of
from bench.retrieval import sqlite_bytes as checkpointed
from bench.runs import KNOWLEDGE_TOP_K, Bench
from bench.startup_imports import NOT_AT_START
from bench.tools import tool_line, tool_overhead
from core.domain.search_terms import search_terms

RESULTS = ROOT / "bench" / "results"


def long_answer_line(long: dict[str, Any]) -> str:
    """The long-answer phase: the worst event-loop stall, seen through /healthz."""
    answer = "not answered" if long["answer_s"] is None else f"answered in {long['answer_s']:.1f} s"
    others = long["other_chats"].get("done", {})
    stall = long.get("loop_stall_ms")
    shown = (
        f"{stall['above_ms']:g}-{stall['at_most_ms']:g} ms" if stall is not None else "not measured"
    )
    return (
        f"long answer ({long['chars']:,} chars in {long['piece']}-char pieces, "
        f"MAX_ANSWER_CHARS {long['max_answer_chars']:,}, {answer}): "
        f"worst event-loop stall {shown}; "
        f"worst /healthz {long['healthz_max_ms']:.1f} ms (idle worst "
        f"{long['healthz_idle_max_ms']:.1f} ms, p50 {long['healthz']['p50']:.1f} ms, "
        f"{long['healthz']['n']} probes); other chats meanwhile: {others.get('n', 0)} rounds, "
        f"p50 {others.get('p50', float('nan')):.1f} ms, worst {long['other_chats_max_ms']:.1f} ms"
    )


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


async def postgres_async(
    args: argparse.Namespace, procs: Processes, scratch: Path
) -> dict[str, Any]:
    """SQLite, one PostgreSQL worker, two PostgreSQL workers; `--pairs` times, interleaved."""
    bench = PostgresBench(
        procs, scratch, seconds=args.seconds, chats=args.chats, idle_rounds=args.idle_rounds
    )
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in args.kinds.split(",")}
    for n in range(1, max(args.pairs, 1) + 1):
        for kind in args.kinds.split(","):
            runs[kind].append(await bench.run(kind))
            last = runs[kind][-1]
            print(
                f"set {n} {kind}: {last['throughput']:.1f} rounds/s, load complete p50 "
                f"{last['load']['done']['p50']:.1f} / p99 {last['load']['done']['p99']:.1f} ms, "
                f"CPU/round {last['cpu_ms_per_round']:.2f} ms",
                flush=True,
            )
    print()
    print(pg_table(runs))
    return {"machine": machine(), "args": vars(args), "postgres": runs}


async def many_bots_async(
    args: argparse.Namespace, procs: Processes, scratch: Path
) -> dict[str, Any]:
    """Only the many-bots phase (`--many-bots`): on each store, one bot with all the chats,
    then the same chats over many bots; `--many-sets` times, interleaved."""
    size = QUICK if args.quick else FULL
    bench = ManyBotsBench(procs, scratch, size)
    runs = []
    for n in range(1, max(args.many_sets, 1) + 1):
        for store in args.many_stores:
            for bots in (1, size.bots):
                runs.append(await bench.run(store, bots))
                last = runs[-1]
                print(
                    f"set {n}, {store}, {last['workers']} process(es), {bots} bot(s) × "
                    f"{last['chats'] // bots} chats: {last['throughput']:.1f} rounds/s, "
                    f"complete p50 {last['load']['done']['p50']:.1f} / p99 "
                    f"{last['load']['done']['p99']:.1f} ms, CPU/round "
                    f"{last['cpu_ms_per_round']:.2f} ms",
                    flush=True,
                )
    print()
    print(many_bots_table(medians(runs)))
    return {
        "machine": machine(),
        "args": vars(args),
        "size": asdict(size),
        "many_bots": runs,
        "medians": medians(runs),
    }


EXCERPT_PASSAGES = 1_000
"""The knowledge base of the run with excerpts: passages, some holding the words the
bench's messages are made of (so that each turn finds `KNOWLEDGE_TOP_K` of them)."""


async def with_excerpts(bench: Bench, scratch: Path) -> dict[str, Any]:
    """The product's run once more, from a database holding a knowledge base whose
    passages the bench's messages find: each model request carries six excerpts."""
    path = scratch / "excerpts-knowledge.sqlite3"
    topic = [word for word in search_terms(message_text(0, 0)) if len(word) > 4]
    await build("sqlite", str(path), EXCERPT_PASSAGES, topic=topic)
    checkpointed(path)  # the copy each run starts from is the file alone
    return await bench.run("bot", knowledge=path)


async def retrieval_async(
    args: argparse.Namespace, procs: Processes, scratch: Path
) -> dict[str, Any]:
    """Only the retrieval phase (`--retrieval`)."""
    return {
        "machine": machine(),
        "args": vars(args),
        "retrieval": await retrieval(args, procs, scratch),
    }


async def retrieval(
    args: argparse.Namespace, procs: Processes, scratch: Path
) -> list[dict[str, Any]]:
    results = await retrieval_phase(
        procs,
        scratch,
        sizes=args.knowledge_chunks,
        stores=args.knowledge_stores,
        modes=args.knowledge_modes,
        count=args.knowledge_queries,
    )
    print()
    print(retrieval_table(results))
    return results


async def main_async(args: argparse.Namespace, procs: Processes, scratch: Path) -> dict[str, Any]:
    bench = Bench(
        procs,
        scratch,
        seconds=args.seconds,
        chats=args.chats,
        burst=args.burst,
        idle_rounds=args.idle_rounds,
        bot_root=args.bot_root.resolve(),
        questions=args.structured,
    )
    contenders: dict[str, list[dict[str, Any]]] = {"bot": []}
    for name in args.yardsticks:
        contenders[YARDSTICKS[name]] = []
    floors: list[dict[str, Any]] = []
    for n in range(1, args.pairs + 1):
        began = time.monotonic()
        for contender, runs in contenders.items():
            runs.append(await bench.run(contender))
        floors.append(await bench.floor())
        last = {contender: runs[-1] for contender, runs in contenders.items()}
        took = time.monotonic() - began
        print(f"{pair_line(n, last, floors[-1])}; the round took {took:.0f} s", flush=True)
    excerpts = None
    if args.excerpts and contenders["bot"]:
        excerpts = await with_excerpts(bench, scratch)
    imports = await bench.startup_imports()
    context = await bench.context_growth()
    long = None
    if args.long_chars:
        long = await bench.long_answer(args.long_chars, args.long_piece, args.long_cap)
    hostile = await hostile_documents(bench) if args.hostile else None
    bodies = await large_bodies(bench) if args.large_bodies else None
    tools = await tool_overhead(bench) if args.tools else None
    mb = float("nan")
    bots = contenders["bot"]
    if bots:
        print()
        print(table(contenders, floors))
        print(
            "floor (raw aiohttp relay on the same fakes): idle complete p50 "
            f"{median_of(floors, 'idle', 'done', 'p50'):.1f} / p99 "
            f"{median_of(floors, 'idle', 'done', 'p99'):.1f} ms"
        )
        if len(contenders) > 1:
            print(verdict_lines(verdicts(contenders, floors)))
        print()
        for name, runs in contenders.items():
            last = runs[-1]["requests_per_round"]
            print(
                f"Bot API requests per round, {TITLES[name]} (last run): "
                f"100-chat load {last['load']}; 500 at once {last['burst']}"
            )
        asked = ", ".join(f"{k} {v}" for k, v in sorted(bots[-1]["model_formats_load"].items()))
        print(f"model requests in the product's 100-chat load, by response format: {asked}")
        db = [b["db"] for b in bots]
        mb = statistics.median(d["mb_per_1000_consultations"] for d in db)
        print(
            f"\nSQLite: {mb:.2f} MB per 1,000 consultations "
            f"(last run: {db[-1]['consultations']} consultations, {db[-1]['messages']} messages, "
            f"{db[-1]['bytes'] / 1e6:.2f} MB incl. WAL after a checkpoint)"
        )
    print(
        "tokens sent to the model (approx, chars/4) by round of one long consultation: "
        + ", ".join(f"round {k}: {v}" for k, v in context["tokens"].items())
        + "; the user's messages in that request: "
        + ", ".join(f"round {k}: {v}" for k, v in context["user_messages_kept"].items())
    )
    if excerpts is not None:
        print(excerpts_line(bots, excerpts, passages=EXCERPT_PASSAGES, top_k=KNOWLEDGE_TOP_K))
    print(imports_line(imports, NOT_AT_START))
    if long is not None:
        print(long_answer_line(long))
    if hostile is not None:
        print(hostile_line(hostile))
    if bodies is not None:
        print(large_bodies_line(bodies))
    if tools is not None:
        print(tool_line(tools))
    found = await retrieval(args, procs, scratch) if args.retrieval_phase else None
    return {
        "machine": machine(),
        "args": vars(args),
        "structured_questions": bench.questions,
        "yardsticks": args.yardsticks,
        "bot": bots,
        "reference": contenders.get("reference", []),
        "minimal": contenders.get("minimal", []),
        "floor": floors,
        "ratios": ratios(contenders, floors) if bots else {},
        "context_tokens": context,
        "long_answer": long,
        "hostile_documents": hostile,
        "large_bodies": bodies,
        "tool_call": tools,
        "sqlite_mb_per_1000": mb,
        "knowledge_excerpts": excerpts,
        "startup_imports": imports,
        "retrieval": found,
    }


SOURCES = {"streaming": "reference_bot.py", "minimal": "minimal_bot.py"}
"""Each yardstick's program."""


def yardsticks_of(text: str) -> list[str]:
    """`--yardsticks`: names of YARDSTICKS, comma-separated, each once, in YARDSTICKS' order."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in YARDSTICKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give one or more of {', '.join(YARDSTICKS)}, comma-separated"
        )
    return [name for name in YARDSTICKS if name in names]


def structured_setting(structured: str | None, questions: str | None) -> str:
    """The product's LLM_STRUCTURED_QUESTIONS from `--structured` and `--questions`:
    whichever was given, "on" when neither; two different values are an error."""
    if structured is not None and questions is not None and structured != questions:
        raise ValueError(
            f"--structured {structured} and --questions {questions} set LLM_STRUCTURED_QUESTIONS "
            "to two values; give one"
        )
    return questions or structured or "on"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pairs",
        type=int,
        default=3,
        help="rounds of runs, the product then each yardstick (0 runs only the single phases)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput run length")
    parser.add_argument("--chats", type=int, default=100, help="chats in the throughput run")
    parser.add_argument("--burst", type=int, default=500, help="chats writing at once")
    parser.add_argument("--idle-rounds", type=int, default=60)
    parser.add_argument(
        "--long-chars",
        type=int,
        default=100_000,
        help="the long-answer phase's answer length (0 skips the phase)",
    )
    parser.add_argument("--long-piece", type=int, default=4, help="its streamed piece size")
    parser.add_argument(
        "--long-cap",
        type=int,
        default=None,
        help="the bot's MAX_ANSWER_CHARS in that phase (default: above the answer's length)",
    )
    parser.add_argument(
        "--no-hostile",
        dest="hostile",
        action="store_false",
        help="skip the hostile-documents phase (six costly PDF/DOCX files beside other chats)",
    )
    parser.add_argument(
        "--no-large-bodies",
        dest="large_bodies",
        action="store_false",
        help="skip the large-bodies phase (ten /api/chat requests at once, a 9.9 MB file each)",
    )
    parser.add_argument(
        "--no-tools",
        dest="tools",
        action="store_false",
        help="skip the tool-call phase (what one MCP tool call adds to a turn)",
    )
    parser.add_argument(
        "--bot-root",
        type=Path,
        default=ROOT,
        help="checkout whose `python -m bot` is measured (e.g. an export of an older commit)",
    )
    parser.add_argument(
        "--structured",
        choices=("on", "off"),
        default=None,
        help="the product's LLM_STRUCTURED_QUESTIONS (default on): on asks clarifying rounds "
        "as JSON (longer model replies to stream and read), off in text as the relays do",
    )
    parser.add_argument(
        "--questions",
        choices=("auto", "on", "off"),
        default=None,
        help="the same setting with auto among its values; not with a different --structured",
    )
    parser.add_argument(
        "--yardsticks",
        type=yardsticks_of,
        default=list(YARDSTICKS),
        help="the relays the product is measured against, run after it in each round, "
        f"comma-separated, of {','.join(YARDSTICKS)} (default both)",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="only the PostgreSQL phase: SQLite vs one and two workers on PostgreSQL "
        "(a fresh schema in TEST_DATABASE_URL, dropped afterwards)",
    )
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"with --postgres: the runs in each set, of {', '.join(KINDS)}",
    )
    parser.add_argument(
        "--many-bots",
        action="store_true",
        help=f"only the many-bots phase: {FULL.bots} bots × {FULL.chats} chats against one bot "
        f"with the same chats, on one SQLite process and {FULL.workers} PostgreSQL workers "
        "(a fresh schema in TEST_DATABASE_URL, dropped afterwards; about five minutes)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"with --many-bots: {QUICK.bots} bots × {QUICK.chats} chats, "
        f"{QUICK.workers} workers, {QUICK.seconds:g} s a run",
    )
    parser.add_argument(
        "--many-sets",
        type=int,
        default=1,
        help="with --many-bots: sets of runs, interleaved (the table gives each set's runs "
        "and their medians)",
    )
    parser.add_argument(
        "--many-stores",
        type=names_of(MANY_STORES),
        default=list(MANY_STORES),
        help=f"with --many-bots: the stores, of {','.join(MANY_STORES)} (default both)",
    )
    parser.add_argument(
        "--no-excerpts",
        dest="excerpts",
        action="store_false",
        help="skip the product's run with six knowledge-base excerpts a round (after the rounds)",
    )
    parser.add_argument(
        "--retrieval",
        action="store_true",
        help="only the retrieval phase: knowledge-base search times per store and size",
    )
    parser.add_argument(
        "--with-retrieval",
        dest="retrieval_phase",
        action="store_true",
        help="the retrieval phase after the others (about 17 minutes at the default sizes)",
    )
    parser.add_argument(
        "--knowledge-chunks",
        type=sizes_of,
        default=list(SIZES),
        help="the retrieval phase's knowledge-base sizes in passages, comma-separated "
        f"(default {','.join(map(str, SIZES))}; 10k reads as 10000)",
    )
    parser.add_argument(
        "--knowledge-stores",
        type=names_of(STORES),
        default=list(STORES),
        help=f"the stores it searches, of {','.join(STORES)} (default both; PostgreSQL at "
        "TEST_DATABASE_URL, a schema of its own, dropped afterwards)",
    )
    parser.add_argument(
        "--knowledge-modes",
        type=names_of(tuple(MODES)),
        default=list(MODES),
        help=f"how it searches, of {','.join(MODES)} (default all)",
    )
    parser.add_argument(
        "--knowledge-queries",
        type=int,
        default=240,
        help="searches timed per store and size, rare words, common words and "
        "consultation-like queries in turn",
    )
    args = parser.parse_args()
    try:
        args.structured = structured_setting(args.structured, args.questions)
    except ValueError as exc:
        parser.error(str(exc))
    started = time.time()
    m = machine()
    if args.many_bots:
        size = QUICK if args.quick else FULL
        print(
            f"bench: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}; many-bots phase "
            f"only: {size.bots} bots × {size.chats} chats against 1 bot × "
            f"{size.bots * size.chats} chats, {size.seconds:g} s each, on "
            + ", ".join(
                f"{size.workers} PostgreSQL workers" if s == "pg" else "one SQLite process"
                for s in args.many_stores
            ),
            flush=True,
        )
    elif args.retrieval:
        print(
            f"bench: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}; retrieval phase only: "
            f"{', '.join(f'{n:,}' for n in args.knowledge_chunks)} passages on "
            f"{', '.join(args.knowledge_stores)}, {', '.join(args.knowledge_modes)}, "
            f"{args.knowledge_queries} searches each",
            flush=True,
        )
    else:
        print(
            f"bench: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}; "
            f"{args.pairs} rounds, product = python -m bot (from {args.bot_root}, "
            f"LLM_STRUCTURED_QUESTIONS={args.structured}, MEMORY_ENABLED=false), "
            + ", ".join(f"{TITLES[YARDSTICKS[y]]} = bench/{SOURCES[y]}" for y in args.yardsticks),
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        procs = Processes(Path(tmp))
        try:
            run = (
                postgres_async
                if args.postgres
                else many_bots_async
                if args.many_bots
                else retrieval_async
                if args.retrieval
                else main_async
            )
            result = asyncio.run(run(args, procs, Path(tmp)))
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        finally:
            procs.stop_all()
    result["seconds_total"] = time.time() - started
    RESULTS.mkdir(exist_ok=True)
    kind = (
        "-pg"
        if args.postgres
        else "-many-bots"
        if args.many_bots
        else "-retrieval"
        if args.retrieval
        else ""
    )
    name = f"bench{kind}-%Y%m%d-%H%M%S.json"
    path = RESULTS / time.strftime(name)
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwhole bench: {result['seconds_total']:.0f} s; results in {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
