"""`python -m bench` (`make bench`): the product bot against a bare PTB relay bot, A B A B.

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
from pathlib import Path
from typing import Any

from bench.hostile import hostile_documents, hostile_line
from bench.large_bodies import large_bodies, large_bodies_line
from bench.pg_report import pg_table
from bench.pg_runs import KINDS, PostgresBench
from bench.procs import ROOT, Processes
from bench.runs import Bench

RESULTS = ROOT / "bench" / "results"


def median_of(runs: list[dict[str, Any]], *path: str) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            values.append(float(value))
    return statistics.median(values) if values else float("nan")


ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("throughput, rounds/s (100 chats)", ("throughput",), "{:.1f}"),
    ("bot CPU per round, ms", ("cpu_ms_per_round",), "{:.2f}"),
    ("fakes' CPU per round, ms", ("fakes_cpu_ms_per_round",), "{:.2f}"),
    ("idle: first text p50, ms", ("idle", "first", "p50"), "{:.1f}"),
    ("idle: first text p99, ms", ("idle", "first", "p99"), "{:.1f}"),
    ("idle: complete p50, ms", ("idle", "done", "p50"), "{:.1f}"),
    ("idle: complete p99, ms", ("idle", "done", "p99"), "{:.1f}"),
    ("load: first text p50, ms", ("load", "first", "p50"), "{:.1f}"),
    ("load: first text p95, ms", ("load", "first", "p95"), "{:.1f}"),
    ("load: first text p99, ms", ("load", "first", "p99"), "{:.1f}"),
    ("load: complete p50, ms", ("load", "done", "p50"), "{:.1f}"),
    ("load: complete p95, ms", ("load", "done", "p95"), "{:.1f}"),
    ("load: complete p99, ms", ("load", "done", "p99"), "{:.1f}"),
    ("500 chats at once, 1 s model: all answered, s", ("burst_all_answered_s",), "{:.2f}"),
    (
        "slow stream: first text after 1st token, ms",
        ("stream_first_text_after_first_token_ms", "median"),
        "{:.0f}",
    ),
    ("peak RSS, MB", ("rss_peak_mb",), "{:.1f}"),
]


def pair_line(n: int, bot: dict[str, Any], ref: dict[str, Any], floor: dict[str, Any]) -> str:
    return (
        f"pair {n}: throughput bot {bot['throughput']:.1f} / ref {ref['throughput']:.1f} rounds/s "
        f"(ratio {bot['throughput'] / ref['throughput']:.2f}); idle complete p50 "
        f"{bot['idle']['done']['p50']:.1f} / {ref['idle']['done']['p50']:.1f} ms "
        f"(floor {floor['idle']['done']['p50']:.1f}); "
        f"500-burst {fmt(bot['burst_all_answered_s'])} / {fmt(ref['burst_all_answered_s'])} s; "
        f"CPU/round {bot['cpu_ms_per_round']:.2f} / {ref['cpu_ms_per_round']:.2f} ms"
    )


def floor_lines(
    bots: list[dict[str, Any]], refs: list[dict[str, Any]], floors: list[dict[str, Any]]
) -> str:
    """Idle latency minus the floor (bench/floor_bot.py): what each bot adds to a round."""
    lines = ["\nidle latency over the floor (raw aiohttp relay on the same fakes), ms:"]
    for stat in ("p50", "p99"):
        floor = median_of(floors, "idle", "done", stat)
        bot = median_of(bots, "idle", "first", stat) - floor
        ref = median_of(refs, "idle", "first", stat) - floor
        lines.append(
            f"  {stat}: floor {floor:.1f}; bot adds {bot:.1f} (to first text); "
            f"reference adds {ref:.1f}"
        )
    return "\n".join(lines)


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


def fmt(value: float | None) -> str:
    return "timeout" if value is None else f"{value:.2f}"


def table(bots: list[dict[str, Any]], refs: list[dict[str, Any]]) -> str:
    lines = [f"{'metric (median of runs)':<48}{'bot':>10}{'reference':>11}{'bot/ref':>9}"]
    for label, path, form in ROWS:
        a, b = median_of(bots, *path), median_of(refs, *path)
        ratio = f"{a / b:.2f}" if b and b == b and a == a else "-"
        lines.append(f"{label:<48}{form.format(a):>10}{form.format(b):>11}{ratio:>9}")
    return "\n".join(lines)


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


async def main_async(args: argparse.Namespace, procs: Processes, scratch: Path) -> dict[str, Any]:
    bench = Bench(
        procs,
        scratch,
        seconds=args.seconds,
        chats=args.chats,
        burst=args.burst,
        idle_rounds=args.idle_rounds,
        bot_root=args.bot_root.resolve(),
        questions=args.questions,
    )
    bots: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    for n in range(1, args.pairs + 1):
        bots.append(await bench.run("bot"))
        refs.append(await bench.run("reference"))
        floors.append(await bench.floor())
        print(pair_line(n, bots[-1], refs[-1], floors[-1]), flush=True)
    context = await bench.context_growth()
    long = None
    if args.long_chars:
        long = await bench.long_answer(args.long_chars, args.long_piece, args.long_cap)
    hostile = await hostile_documents(bench) if args.hostile else None
    bodies = await large_bodies(bench) if args.large_bodies else None
    mb = float("nan")
    if bots:
        print()
        print(table(bots, refs))
        print(floor_lines(bots, refs, floors))
        for name, runs in (("bot", bots), ("reference", refs)):
            last = runs[-1]["requests_per_round"]
            print(
                f"Bot API requests per round, {name} (last run): "
                f"100-chat load {last['load']}; 500 at once {last['burst']}"
            )
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
    if long is not None:
        print(long_answer_line(long))
    if hostile is not None:
        print(hostile_line(hostile))
    if bodies is not None:
        print(large_bodies_line(bodies))
    return {
        "machine": machine(),
        "args": vars(args),
        "bot": bots,
        "reference": refs,
        "floor": floors,
        "context_tokens": context,
        "long_answer": long,
        "hostile_documents": hostile,
        "large_bodies": bodies,
        "sqlite_mb_per_1000": mb,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="0 runs only the single phases")
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
        "--bot-root",
        type=Path,
        default=ROOT,
        help="checkout whose `python -m bot` is measured (e.g. an export of an older commit)",
    )
    parser.add_argument(
        "--questions",
        choices=("auto", "on", "off"),
        default="auto",
        help="the bot's LLM_STRUCTURED_QUESTIONS: auto and on ask clarifying rounds as JSON "
        "(longer model replies to stream and read), off in text as the reference does",
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
    args = parser.parse_args()
    started = time.time()
    m = machine()
    print(
        f"bench: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}; "
        f"{args.pairs} pairs, bot = python -m bot (from {args.bot_root}), "
        "reference = bench/reference_bot.py",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        procs = Processes(Path(tmp))
        try:
            run = postgres_async if args.postgres else main_async
            result = asyncio.run(run(args, procs, Path(tmp)))
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        finally:
            procs.stop_all()
    result["seconds_total"] = time.time() - started
    RESULTS.mkdir(exist_ok=True)
    name = "bench-pg-%Y%m%d-%H%M%S.json" if args.postgres else "bench-%Y%m%d-%H%M%S.json"
    path = RESULTS / time.strftime(name)
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwhole bench: {result['seconds_total']:.0f} s; results in {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
