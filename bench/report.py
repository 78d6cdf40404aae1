"""The main phase's report: medians per contender, the product's ratios to each yardstick,
the targets.

Invariant: every figure is a median over the contender's runs of one invocation (runs
alternated product / yardsticks, so each sees the same machine); a ratio is the product's
median over a yardstick's, shown only for the rows the targets speak of, and "-" where a
median is missing or zero. "Bot adds" is a contender's idle latency to first text minus
the floor's idle latency (`bench/floor_bot.py`), medians of each.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

Runs = list[dict[str, Any]]

YARDSTICKS = {"streaming": "reference", "minimal": "minimal"}
"""`--yardsticks` names → the contender (`bench.runs.CONTENDERS`) each one runs."""

TITLES = {"bot": "product", "reference": "streaming relay", "minimal": "minimal relay"}
"""Each contender's name in the report."""

SHORT = {"reference": "streaming", "minimal": "minimal"}
"""A yardstick's name in a ratio column's heading."""


def median_of(runs: Runs, *path: str) -> float:
    """The median of the numbers at `path` in `runs`; NaN when no run has one."""
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            values.append(float(value))
    return statistics.median(values) if values else math.nan


@dataclass(frozen=True)
class Row:
    """One line of the table: a figure at `path` in each run, shown with `form`."""

    label: str
    path: tuple[str, ...]
    form: str
    compared: bool = False  # the ratio columns are filled: a target speaks of it
    over_floor: bool = False  # minus the floor's idle complete time at the same percentile

    def value(self, runs: Runs, floors: Runs) -> float:
        value = median_of(runs, *self.path)
        if self.over_floor:
            value -= median_of(floors, "idle", "done", self.path[-1])
        return value


ROWS: list[Row] = [
    Row("throughput, rounds/s (100 chats)", ("throughput",), "{:.1f}", compared=True),
    Row("bot CPU per round, ms", ("cpu_ms_per_round",), "{:.2f}", compared=True),
    Row("fakes' CPU per round, ms", ("fakes_cpu_ms_per_round",), "{:.2f}"),
    Row("idle: first text p50, ms", ("idle", "first", "p50"), "{:.1f}"),
    Row("idle: first text p99, ms", ("idle", "first", "p99"), "{:.1f}"),
    Row("idle: complete p50, ms", ("idle", "done", "p50"), "{:.1f}"),
    Row("idle: complete p99, ms", ("idle", "done", "p99"), "{:.1f}"),
    Row(
        "idle: bot adds p50 (over the floor), ms",
        ("idle", "first", "p50"),
        "{:.1f}",
        compared=True,
        over_floor=True,
    ),
    Row(
        "idle: bot adds p99 (over the floor), ms",
        ("idle", "first", "p99"),
        "{:.1f}",
        compared=True,
        over_floor=True,
    ),
    Row("load: first text p50, ms", ("load", "first", "p50"), "{:.1f}"),
    Row("load: first text p95, ms", ("load", "first", "p95"), "{:.1f}"),
    Row("load: first text p99, ms", ("load", "first", "p99"), "{:.1f}"),
    Row("load: complete p50, ms", ("load", "done", "p50"), "{:.1f}"),
    Row("load: complete p95, ms", ("load", "done", "p95"), "{:.1f}"),
    Row("load: complete p99, ms", ("load", "done", "p99"), "{:.1f}"),
    Row(
        "500 chats at once, 1 s model: all answered, s",
        ("burst_all_answered_s",),
        "{:.2f}",
        compared=True,
    ),
    Row(
        "slow stream: first text after 1st token, ms",
        ("stream_first_text_after_first_token_ms", "median"),
        "{:.0f}",
    ),
    Row("peak RSS, MB", ("rss_peak_mb",), "{:.1f}", compared=True),
]


def ratio(product: float, yardstick: float) -> float:
    """`product / yardstick`; NaN when either is missing or the yardstick is zero."""
    if math.isnan(product) or math.isnan(yardstick) or yardstick == 0:
        return math.nan
    return product / yardstick


def shown_ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"×{value:.2f}"


def table(contenders: dict[str, Runs], floors: Runs) -> str:
    """One column of medians per contender ("bot" first), then one ratio column per
    yardstick: the product's median over the yardstick's, for the compared rows."""
    names = list(contenders)
    yardsticks = [name for name in names if name != "bot"]
    widths = [max(len(TITLES[name]), 9) + 2 for name in names]
    heads = [f"vs {SHORT[name]}" for name in yardsticks]
    ratio_widths = [len(head) + 2 for head in heads]
    lines = [
        f"{'metric (median of runs)':<48}"
        + "".join(f"{TITLES[n]:>{w}}" for n, w in zip(names, widths, strict=True))
        + "".join(f"{h:>{w}}" for h, w in zip(heads, ratio_widths, strict=True))
    ]
    for row in ROWS:
        values = {name: row.value(runs, floors) for name, runs in contenders.items()}
        line = f"{row.label:<48}" + "".join(
            f"{shown(row.form, values[n]):>{w}}" for n, w in zip(names, widths, strict=True)
        )
        for name, width in zip(yardsticks, ratio_widths, strict=True):
            cell = shown_ratio(ratio(values["bot"], values[name])) if row.compared else ""
            line += f"{cell:>{width}}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def shown(form: str, value: float) -> str:
    return "-" if math.isnan(value) else form.format(value)


@dataclass(frozen=True)
class Verdict:
    """One target against one yardstick: the figure compared and whether it is met."""

    target: str
    yardstick: str
    figure: str
    met: bool | None  # None: a figure is missing


def verdicts(contenders: dict[str, Runs], floors: Runs) -> list[Verdict]:
    """The targets against each yardstick run: throughput ≥ ×2.5, CPU per round ≤ ×0.4,
    the 500-chat burst ≤ ×0.5, idle p99 over the floor ≤ the yardstick's; peak RSS ≤
    125 MB once, whatever the yardstick."""
    bot = contenders["bot"]
    found: list[Verdict] = []
    for name, runs in contenders.items():
        if name == "bot":
            continue
        for label, path, bound, at_most in (
            ("throughput ≥ ×2.5", ("throughput",), 2.5, False),
            ("CPU per round ≤ ×0.4", ("cpu_ms_per_round",), 0.4, True),
            ("500-chat burst ≤ ×0.5", ("burst_all_answered_s",), 0.5, True),
        ):
            value = ratio(median_of(bot, *path), median_of(runs, *path))
            met = None if math.isnan(value) else value <= bound if at_most else value >= bound
            found.append(Verdict(label, name, shown_ratio(value), met))
        p99 = next(row for row in ROWS if row.label.startswith("idle: bot adds p99"))
        ours, theirs = p99.value(bot, floors), p99.value(runs, floors)
        met = None if math.isnan(ours) or math.isnan(theirs) else ours <= theirs
        found.append(
            Verdict(
                "idle p99 over the floor ≤ the relay's",
                name,
                f"adds {shown('{:.1f}', ours)} vs {shown('{:.1f}', theirs)} ms",
                met,
            )
        )
    rss = median_of(bot, "rss_peak_mb")
    found.append(
        Verdict(
            "peak RSS ≤ 125 MB",
            "",
            f"{shown('{:.1f}', rss)} MB",
            None if math.isnan(rss) else rss <= 125,
        )
    )
    return found


def verdict_lines(found: list[Verdict]) -> str:
    lines = ["\ntargets (medians):"]
    for v in found:
        against = f" ({TITLES[v.yardstick]})" if v.yardstick else ""
        met = {True: "met", False: "NOT met", None: "not measured"}[v.met]
        lines.append(f"  {v.target}{against}: {v.figure} — {met}")
    return "\n".join(lines)


def fmt(value: float | None) -> str:
    return "timeout" if value is None else f"{value:.2f}"


def pair_line(n: int, runs: dict[str, dict[str, Any]], floor: dict[str, Any]) -> str:
    """One round of runs: each contender's throughput, idle complete p50, burst and CPU."""
    names = list(runs)

    def each(*path: str, form: str = "{:.1f}") -> str:
        return " / ".join(shown(form, median_of([runs[name]], *path)) for name in names)

    bursts = " / ".join(fmt(runs[name]["burst_all_answered_s"]) for name in names)
    return (
        f"round {n} ({' / '.join(TITLES[name] for name in names)}): "
        f"throughput {each('throughput')} rounds/s; idle complete p50 "
        f"{each('idle', 'done', 'p50')} ms (floor "
        f"{shown('{:.1f}', median_of([floor], 'idle', 'done', 'p50'))}); "
        f"500-burst {bursts} s; CPU/round {each('cpu_ms_per_round', form='{:.2f}')} ms"
    )


def ratios(contenders: dict[str, Runs], floors: Runs) -> dict[str, dict[str, float | None]]:
    """The ratio columns as data, for the JSON result: yardstick → row label → ratio."""
    found: dict[str, dict[str, float | None]] = {}
    for name, runs in contenders.items():
        if name == "bot":
            continue
        found[name] = {}
        for row in ROWS:
            if row.compared:
                value = ratio(row.value(contenders["bot"], floors), row.value(runs, floors))
                found[name][row.label] = None if math.isnan(value) else round(value, 3)
    return found


def retrieval_line(result: dict[str, Any]) -> str:
    """One knowledge base's figures as the retrieval phase finishes it."""
    kinds = result["kinds"]
    each = "; ".join(
        f"{kind} p50 {kinds[kind]['p50']:.1f} / p99 {kinds[kind]['p99']:.1f} ms" for kind in kinds
    )
    embedded = f" ({result['embed_s']:.0f} s of it embedding)" if result.get("embed_s") else ""
    first = (
        f"; first search {result['first_ms']:.1f} ms, RSS after it {result['rss_first_mb']:.1f} MB"
        if "first_ms" in result
        else ""
    )
    queried = (
        f"; {result['query_embeddings']} query embeddings asked of the fake (its time "
        f"included), {result['fallbacks']} searches by full text alone"
        if "query_embeddings" in result
        else ""
    )
    return (
        f"retrieval {result['store']} {result['chunks']:,} passages ({result['mode']}): "
        f"all p50 {result['all']['p50']:.1f} / p99 {result['all']['p99']:.1f} ms ({each}); "
        f"built in {result['build_s']:.0f} s{embedded}, {result['db_bytes'] / 1e6:.1f} MB; "
        f"searching process RSS {result['rss_before_mb']:.1f} → peak {result['rss_peak_mb']:.1f} MB"
        f"{first}{queried}"
    )


RETRIEVAL_COLUMNS: list[tuple[str, tuple[str, ...], str]] = [
    ("p50", ("all", "p50"), "{:.1f}"),
    ("p99", ("all", "p99"), "{:.1f}"),
    ("rare p50", ("kinds", "rare", "p50"), "{:.1f}"),
    ("rare p99", ("kinds", "rare", "p99"), "{:.1f}"),
    ("common p50", ("kinds", "common", "p50"), "{:.1f}"),
    ("common p99", ("kinds", "common", "p99"), "{:.1f}"),
    ("consult p50", ("kinds", "consultation", "p50"), "{:.1f}"),
    ("consult p99", ("kinds", "consultation", "p99"), "{:.1f}"),
    ("first ms", ("first_ms",), "{:.1f}"),
    ("RSS 1st", ("rss_first_mb",), "{:.1f}"),
    ("RSS MB", ("rss_peak_mb",), "{:.1f}"),
    ("DB MB", ("db_bytes",), "{:.1f}"),
    ("build s", ("build_s",), "{:.0f}"),
]
"""The retrieval table's columns after store, mode and size: search times in ms (all
queries, then each kind, the steady searches), the first search's time (a hybrid index
loads in it) and the RSS after it, the searching process's peak RSS, the database's size,
the build (with its embeddings)."""


def retrieval_table(results: Runs) -> str:
    """One row per store, mode and size, in the order run; only what ran is listed."""
    heads = [head for head, _, _ in RETRIEVAL_COLUMNS]
    widths = [max(len(head), 7) + 2 for head in heads]
    lines = [
        "retrieval, search times in ms"
        f"\n{'store':<10}{'mode':<11}{'passages':>9}"
        + "".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))
    ]
    for result in results:
        cells = []
        for (_, path, form), width in zip(RETRIEVAL_COLUMNS, widths, strict=True):
            value = median_of([result], *path)
            if path == ("db_bytes",):
                value /= 1e6
            cells.append(f"{shown(form, value):>{width}}")
        lines.append(
            f"{result['store']:<10}{result['mode']:<11}{result['chunks']:>9,}" + "".join(cells)
        )
    return "\n".join(lines)


def excerpts_line(plain: Runs, excerpts: dict[str, Any], *, passages: int, top_k: int) -> str:
    """The product's run with a knowledge base beside its runs without one (medians), and
    how many excerpts its load's model requests carried, as the fake model counted them."""

    def pair(path: tuple[str, ...], form: str) -> str:
        ours, theirs = median_of([excerpts], *path), median_of(plain, *path)
        return f"{shown(form, ours)} against {shown(form, theirs)}"

    carried = excerpts.get("model_excerpts_load", {})
    counted = ", ".join(
        f"{count} with {n}" for n, count in sorted(carried.items(), key=lambda i: -i[1])
    )
    return (
        f"with a knowledge base ({passages:,} passages, KNOWLEDGE_TOP_K={top_k}), against "
        f"the runs without one (median of {len(plain)}): bot CPU per round "
        f"{pair(('cpu_ms_per_round',), '{:.2f}')} ms, throughput "
        f"{pair(('throughput',), '{:.1f}')} rounds/s, load complete p50 "
        f"{pair(('load', 'done', 'p50'), '{:.1f}')} ms, peak RSS "
        f"{pair(('rss_peak_mb',), '{:.1f}')} MB; its load's model requests by excerpts "
        f"carried: {counted or 'none seen'}"
    )


def imports_line(imports: dict[str, Any], not_at_start: tuple[str, ...]) -> str:
    """The retrieval modules the bot imported by its third answer (empty knowledge base)."""
    loaded = ", ".join(f"{name} {us / 1000:.1f} ms" for name, us in imports["loaded_us"].items())
    unwanted = imports["unwanted"]
    verdict = (
        f"imported though not needed: {', '.join(unwanted)}"
        if unwanted
        else f"none of {', '.join(not_at_start)}"
    )
    return (
        f"retrieval at bot start, empty knowledge base (-X importtime, {imports['modules']} "
        f"modules by the third answer): {loaded or 'no retrieval module'} (cumulative); {verdict}"
    )
