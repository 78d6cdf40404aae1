"""The benchmark's report (`bench/report.py`) and its options (`bench/__main__.py`): the
table holds one column of medians per contender and one ratio column per yardstick (the
product's median over the yardstick's) on the rows the targets speak of; "bot adds" is
idle time to first text over the floor's; the targets are judged against each yardstick;
`--yardsticks` and `--structured`/`--questions` are read strictly."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from bench.__main__ import structured_setting, yardsticks_of
from bench.report import ratios, table, verdicts


def run(
    throughput: float,
    cpu: float,
    burst: float | None,
    rss: float,
    idle: tuple[float, float] = (10.0, 20.0),
) -> dict[str, Any]:
    """A run's result with the figures the table reads (idle: first text p50, p99)."""
    p50, p99 = idle
    latency = {"p50": p50, "p95": p99, "p99": p99, "n": 60}
    return {
        "throughput": throughput,
        "cpu_ms_per_round": cpu,
        "fakes_cpu_ms_per_round": 0.5,
        "idle": {"first": latency, "done": latency},
        "load": {"first": latency, "done": latency},
        "burst_all_answered_s": burst,
        "stream_first_text_after_first_token_ms": {"median": 250.0},
        "rss_peak_mb": rss,
    }


def floor(p50: float, p99: float) -> dict[str, Any]:
    return {"idle": {"done": {"p50": p50, "p95": p99, "p99": p99, "n": 60}}}


def cells(text: str, label: str) -> list[str]:
    """The cells of the row starting with `label`, after the label."""
    line = next(line for line in text.splitlines() if line.startswith(label))
    return line[len(label) :].split()


CONTENDERS = {
    "bot": [run(300.0, 2.0, 2.0, 120.0), run(500.0, 3.0, 2.2, 130.0), run(400.0, 2.5, 2.4, 126.0)],
    "reference": [run(100.0, 8.0, 5.0, 90.0), run(150.0, 10.0, 6.0, 91.0), run(90, 9, 7, 92)],
    "minimal": [run(200.0, 5.0, 4.0, 80.0), run(160.0, 5.0, 4.0, 81.0), run(180, 5, 4, 82)],
}
FLOORS = [floor(3.0, 5.0), floor(4.0, 6.0), floor(5.0, 7.0)]


def test_medians_of_each_contender_and_the_products_ratio_to_each_yardstick() -> None:
    """Throughput 400 against 100 and 180 rounds/s: ×4.00 and ×2.22."""
    shown = table(CONTENDERS, FLOORS)
    heading = shown.splitlines()[0].split("  ")
    assert [cell.strip() for cell in heading if cell.strip()][1:] == [
        "product",
        "streaming relay",
        "minimal relay",
        "vs streaming",
        "vs minimal",
    ]
    assert cells(shown, "throughput, rounds/s (100 chats)") == [
        "400.0",
        "100.0",
        "180.0",
        "×4.00",
        "×2.22",
    ]
    assert cells(shown, "bot CPU per round, ms") == ["2.50", "9.00", "5.00", "×0.28", "×0.50"]
    assert cells(shown, "500 chats at once, 1 s model: all answered, s") == [
        "2.20",
        "6.00",
        "4.00",
        "×0.37",
        "×0.55",
    ]
    assert cells(shown, "peak RSS, MB") == ["126.0", "91.0", "81.0", "×1.38", "×1.56"]


def test_rows_no_target_speaks_of_get_no_ratio() -> None:
    assert cells(table(CONTENDERS, FLOORS), "load: complete p99, ms") == ["20.0", "20.0", "20.0"]


def test_bot_adds_is_idle_first_text_over_the_floors_median() -> None:
    """Idle first text p50 10 ms everywhere, the floor's median 4 ms: each adds 6 ms."""
    contenders = {**CONTENDERS, "minimal": [run(180, 5, 4, 82, idle=(16.0, 40.0))]}
    shown = table(contenders, FLOORS)
    assert cells(shown, "idle: bot adds p50 (over the floor), ms") == [
        "6.0",
        "6.0",
        "12.0",
        "×1.00",
        "×0.50",
    ]
    assert cells(shown, "idle: bot adds p99 (over the floor), ms") == [
        "14.0",
        "14.0",
        "34.0",
        "×1.00",
        "×0.41",
    ]


def test_one_yardstick_gives_one_ratio_column() -> None:
    shown = table({"bot": CONTENDERS["bot"], "minimal": CONTENDERS["minimal"]}, FLOORS)
    assert shown.splitlines()[0].split()[-3:] == ["relay", "vs", "minimal"]
    assert cells(shown, "throughput, rounds/s (100 chats)") == ["400.0", "180.0", "×2.22"]


def test_a_missing_figure_shows_as_a_dash_not_a_ratio() -> None:
    """A burst that timed out in every run of a yardstick leaves its median and ratio empty."""
    timed_out = [run(100.0, 8.0, None, 90.0)]
    shown = table({"bot": CONTENDERS["bot"], "reference": timed_out}, FLOORS)
    assert cells(shown, "500 chats at once, 1 s model: all answered, s") == ["2.20", "-", "-"]
    assert (
        ratios({"bot": CONTENDERS["bot"], "reference": timed_out}, FLOORS)["reference"][
            "500 chats at once, 1 s model: all answered, s"
        ]
        is None
    )


def test_the_json_keeps_both_yardsticks_ratios() -> None:
    found = ratios(CONTENDERS, FLOORS)
    assert set(found) == {"reference", "minimal"}
    assert found["reference"]["throughput, rounds/s (100 chats)"] == 4.0
    assert found["minimal"]["bot CPU per round, ms"] == 0.5


def test_targets_are_judged_against_each_yardstick() -> None:
    """×4.00 and ×2.22 throughput: met against the streaming relay, not the minimal one;
    CPU ×0.28 / ×0.50; burst ×0.37 / ×0.55; idle p99 14 against 14 ms; RSS 126 MB."""
    found = {(v.target, v.yardstick): v.met for v in verdicts(CONTENDERS, FLOORS)}
    assert found == {
        ("throughput ≥ ×2.5", "reference"): True,
        ("CPU per round ≤ ×0.4", "reference"): True,
        ("500-chat burst ≤ ×0.5", "reference"): True,
        ("idle p99 over the floor ≤ the relay's", "reference"): True,
        ("throughput ≥ ×2.5", "minimal"): False,
        ("CPU per round ≤ ×0.4", "minimal"): False,
        ("500-chat burst ≤ ×0.5", "minimal"): False,
        ("idle p99 over the floor ≤ the relay's", "minimal"): True,
        ("peak RSS ≤ 125 MB", ""): False,
    }


def test_a_slower_idle_p99_misses_its_target() -> None:
    slow = {"bot": [run(400, 2, 2, 100, idle=(10.0, 30.0))], "minimal": CONTENDERS["minimal"]}
    found = {(v.target, v.yardstick): v.met for v in verdicts(slow, FLOORS)}
    assert found[("idle p99 over the floor ≤ the relay's", "minimal")] is False
    assert found[("peak RSS ≤ 125 MB", "")] is True


def test_yardsticks_are_named_each_once_in_a_fixed_order() -> None:
    assert yardsticks_of("streaming,minimal") == ["streaming", "minimal"]
    assert yardsticks_of("minimal, streaming") == ["streaming", "minimal"]
    assert yardsticks_of("minimal") == ["minimal"]
    for wrong in ("", "stream", "minimal,reference"):
        with pytest.raises(argparse.ArgumentTypeError, match="streaming, minimal"):
            yardsticks_of(wrong)


def test_structured_rounds_are_on_unless_turned_off() -> None:
    assert structured_setting(None, None) == "on"
    assert structured_setting("off", None) == "off"
    assert structured_setting(None, "auto") == "auto"
    assert structured_setting("off", "off") == "off"
    with pytest.raises(ValueError, match="two values"):
        structured_setting("on", "off")
