"""The evaluator's reports: the summary's numbers, the JSON round trip, the terminal table
and the self-contained HTML report, all from a hand-built `Report`."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from evaluation.report_html import write_html
from evaluation.report_json import read_json, write_json
from evaluation.report_table import print_table
from evaluation.results import (
    AskedQuestion,
    Judgement,
    Pairwise,
    Pick,
    Report,
    RunResult,
    SeenMessage,
)
from evaluation.summary import bootstrap_interval, summarise

MULTI = "3 rounds"
ONE = "one-shot"


def _run(
    scenario: str,
    variant: str,
    score: float | None,
    *,
    repeat: int = 0,
    rounds: int = 3,
    early: bool = False,
    error: str | None = None,
    tokens: tuple[int, int] = (100, 50),
    seconds: float = 2.0,
    answer: str = "Do 3 sets of 10.",
) -> RunResult:
    judgement = None
    if error is None:
        judgement = (
            Judgement(score=None, failure="unparseable judge reply", raw="not json")
            if score is None
            else Judgement(
                score=score,
                justification="Covers the elbow.",
                covered=["elbow history"],
                missed=["rest times"],
            )
        )
    return RunResult(
        scenario_id=scenario,
        variant=variant,
        repeat=repeat,
        transcript=[
            SeenMessage(speaker="user", text="How do I do hammer curls?"),
            SeenMessage(speaker="bot", text="Which dumbbells do you have?", round=1),
            SeenMessage(speaker="user", text="2 kg and 5 kg"),
            SeenMessage(speaker="bot", text=answer, round=rounds),
        ],
        final_answer=answer,
        rounds_used=rounds,
        max_rounds=3 if variant == MULTI else 1,
        early_finish=early,
        tokens_in=tokens[0],
        tokens_out=tokens[1],
        seconds=seconds,
        error=error,
        judgement=judgement,
    )


def _report() -> Report:
    return Report(
        started_at="2026-11-23T07:00:00+00:00",
        seed=7,
        models={"bot": "small @ http://127.0.0.1:8001/v1", "user": "small", "judge": "big"},
        variants=[MULTI, ONE],
        scenarios=["fitness-hammer-curl-en", "legal-deposit-ru"],
        repeats=1,
        results=[
            _run("fitness-hammer-curl-en", MULTI, 0.9, rounds=2, early=True, tokens=(300, 120)),
            _run("fitness-hammer-curl-en", ONE, 0.4, rounds=1, tokens=(80, 40), seconds=1.0),
            _run("legal-deposit-ru", MULTI, None, rounds=3, tokens=(400, 200), seconds=4.0),
            _run("legal-deposit-ru", ONE, None, error="model timed out", rounds=0),
        ],
        pairwise=[
            Pairwise("fitness-hammer-curl-en", 0, MULTI, ONE, "b", "a", "Tailored."),
            Pairwise("legal-deposit-ru", 0, MULTI, ONE, "a", None, failure="no JSON"),
        ],
    )


# --- summary ---------------------------------------------------------------------------


def test_summary_counts_scores_failures_and_errors_per_variant() -> None:
    summary = summarise(_report())
    multi, one = summary.variant(MULTI), summary.variant(ONE)
    assert (multi.runs, multi.scored, multi.judge_failures, multi.consultation_errors) == (
        2,
        1,
        1,
        0,
    )
    assert (one.runs, one.scored, one.judge_failures, one.consultation_errors) == (2, 1, 0, 1)
    assert multi.mean_score == pytest.approx(0.9)
    assert one.mean_score == pytest.approx(0.4)
    assert multi.mean_rounds == pytest.approx(2.5)
    assert one.mean_rounds == pytest.approx(1.0)  # the failed consultation is not averaged
    assert (multi.early_finishes, one.early_finishes) == (1, 0)
    assert (multi.tokens_in, multi.tokens_out) == (700, 320)
    assert multi.mean_seconds == pytest.approx(3.0)


def test_a_judge_failure_is_never_averaged_as_zero() -> None:
    report = _report()
    report.results.append(_run("x", MULTI, None, repeat=1))
    assert summarise(report).variant(MULTI).mean_score == pytest.approx(0.9)


def test_a_variant_with_no_score_has_no_mean_and_no_interval() -> None:
    report = _report()
    report.results = [r for r in report.results if r.scenario_id == "legal-deposit-ru"]
    multi = summarise(report).variant(MULTI)
    assert multi.scored == 0
    assert multi.mean_score is None and multi.ci_low is None and multi.ci_high is None


def test_pairwise_counts_wins_ties_failures_and_win_rate() -> None:
    report = _report()
    report.pairwise += [
        Pairwise("a", 1, MULTI, ONE, "a", "tie"),
        Pairwise("b", 1, MULTI, ONE, "b", "b"),
        Pairwise("c", 1, MULTI, ONE, "b", "a"),
    ]
    (pair,) = summarise(report).pairs
    assert (pair.variant_a, pair.variant_b) == (MULTI, ONE)
    assert (pair.wins_a, pair.wins_b, pair.ties, pair.failures) == (2, 1, 1, 1)
    assert pair.win_rate_a == pytest.approx((2 + 0.5) / 4)
    assert summarise(report).variant(MULTI).win_rate == pytest.approx(2.5 / 4)
    assert summarise(report).variant(ONE).win_rate == pytest.approx(1.5 / 4)


def test_win_rate_is_none_when_every_pairwise_judgement_failed() -> None:
    report = _report()
    report.pairwise = [Pairwise("a", 0, MULTI, ONE, "a", None, failure="x")]
    (pair,) = summarise(report).pairs
    assert pair.failures == 1 and pair.win_rate_a is None


def test_bootstrap_interval_is_deterministic_brackets_the_mean_and_stays_in_range() -> None:
    scores = [0.2, 0.4, 0.5, 0.9, 1.0, 0.7, 0.3]
    first = bootstrap_interval(scores, seed="7:3 rounds", resamples=500)
    assert first == bootstrap_interval(scores, seed="7:3 rounds", resamples=500)
    low, high = first
    mean = sum(scores) / len(scores)
    assert min(scores) <= low < mean < high <= max(scores)
    assert bootstrap_interval(scores, seed="8:3 rounds", resamples=500) != first


def test_bootstrap_interval_of_one_score_is_that_score() -> None:
    assert bootstrap_interval([0.6], seed="s", resamples=100) == (0.6, 0.6)


def test_summary_interval_depends_on_the_report_seed_only() -> None:
    report = _report()
    report.results = [
        _run(f"s{i}", MULTI, score) for i, score in enumerate([0.1, 0.5, 0.8, 0.9, 0.3])
    ]
    a = summarise(report, resamples=300).variant(MULTI)
    b = summarise(report, resamples=300).variant(MULTI)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.ci_low is not None and a.ci_high is not None and a.ci_low < a.ci_high


# --- JSON ------------------------------------------------------------------------------


def test_json_round_trip_keeps_every_field(tmp_path: Path) -> None:
    report = _report()
    report.results[0].transcript.append(
        SeenMessage(speaker="user", text="«Итог сейчас»", final_now=True)
    )
    path = tmp_path / "report.json"
    write_json(report, path)
    assert read_json(path) == report


def test_json_is_indented_utf8_with_every_transcript(tmp_path: Path) -> None:
    report = _report()
    report.results[1].transcript.append(SeenMessage(speaker="Анна", text="Где залог?"))
    path = tmp_path / "report.json"
    write_json(report, path)
    text = path.read_text(encoding="utf-8")
    assert "Где залог?" in text  # not \u escapes
    assert text.startswith('{\n  "')
    data = json.loads(text)
    assert len(data["results"]) == 4
    assert data["results"][0]["transcript"][1]["text"] == "Which dumbbells do you have?"


def test_read_json_names_a_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_json(_report(), path)
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["results"][0]["variant"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"results\[0\]\.variant"):
        read_json(path)


# --- terminal table --------------------------------------------------------------------


def _table(report: Report) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None, force_terminal=False)
    print_table(report, console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_table_shows_scores_winner_rounds_tokens_and_time_per_scenario() -> None:
    out = _table(_report())
    line = next(x for x in out.splitlines() if "fitness-hammer-curl-en" in x)
    assert "0.90" in line and "0.40" in line
    assert "3 rounds" in line  # the pairwise winner
    assert "2/3" in line and "early" in line
    assert "300/120" in line and "2.0 s" in line


def test_table_shows_judge_failures_as_such_never_as_zero() -> None:
    out = _table(_report())
    line = next(x for x in out.splitlines() if "legal-deposit-ru" in x)
    assert "judge failed" in line
    assert "error" in line  # the one-shot consultation did not finish
    assert "0.00" not in out


def test_table_overall_has_mean_interval_win_rate_and_failures() -> None:
    out = _table(_report())
    overall = out[out.index("Overall") :]
    header = next(x for x in overall.splitlines() if "Judge failures" in x)
    row = next(x for x in overall.splitlines() if x.strip("│ ").startswith(MULTI))
    cells = dict(zip(_cells(header, "┃"), _cells(row, "│"), strict=True))
    assert cells["Mean score [95% CI]"] == "0.90 [0.90–0.90]"
    assert cells["Win rate"] == "100%"  # the only decided pairwise judgement
    assert cells["Judge failures"] == "1"
    assert cells["Scored"] == "1/2"


def _cells(line: str, bar: str) -> list[str]:
    return [c.strip() for c in line.strip().strip(bar).split(bar)]


# --- HTML ------------------------------------------------------------------------------


class _Page(HTMLParser):
    """The text a reader sees and every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "action")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _html(report: Report, tmp_path: Path) -> tuple[str, _Page]:
    path = tmp_path / "report.html"
    write_html(report, path)
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    ET.fromstring(html.removeprefix("<!DOCTYPE html>"))  # well-formed: every tag closed
    page = _Page()
    page.feed(html)
    page.close()
    return html, page


def test_html_has_every_transcript_readable(tmp_path: Path) -> None:
    report = _report()
    report.results[2].transcript.append(
        SeenMessage(speaker="Анна", text="Залог 50 000 ₽, договор\nна год")
    )
    _, page = _html(report, tmp_path)
    text = "".join(page.text)
    for result in report.results:
        for seen in result.transcript:
            assert seen.text in text
    assert "Анна" in text
    assert "Covers the elbow." in text and "elbow history" in text and "rest times" in text
    assert "Tailored." in text  # the pairwise justification
    assert page.tags.count("details") >= len(report.results)


def test_html_escapes_model_output(tmp_path: Path) -> None:
    report = _report()
    evil = '<script>alert("x")</script><img src="https://evil.example/x.png">'
    report.results[0].transcript.append(SeenMessage(speaker="bot", text=evil, round=2))
    report.results[0].judgement = Judgement(score=0.5, justification="<b>bold</b> & co")
    html, page = _html(report, tmp_path)
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;" in html
    text = "".join(page.text)
    assert evil in text and "<b>bold</b> & co" in text
    assert "script" not in page.tags and "img" not in page.tags


def test_html_loads_nothing_from_the_network(tmp_path: Path) -> None:
    html, page = _html(_report(), tmp_path)
    assert all(not re.match(r"\s*(https?:)?//", link, re.I) for link in page.links), page.links
    assert "link" not in page.tags and "script" not in page.tags and "iframe" not in page.tags
    assert "@import" not in html and "url(" not in html
    assert "127.0.0.1:8001" in "".join(page.text)  # the models are named, as text


def test_html_draws_one_point_per_score_and_shows_failures(tmp_path: Path) -> None:
    html, page = _html(_report(), tmp_path)
    assert "svg" in page.tags
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count("<circle") == 2  # two scores; a failure is no point
    text = "".join(page.text)
    assert "judge failed" in text and "0.90 [0.90–0.90]" in text


def test_html_marks_the_final_answer_and_shows_one_missing_from_the_transcript(
    tmp_path: Path,
) -> None:
    report = _report()
    report.results[1].transcript = report.results[1].transcript[:1]
    report.results[1].final_answer = "Start with 2 kg, 3×12."
    _, page = _html(report, tmp_path)
    text = "".join(page.text)
    assert text.count("· final answer") == 4
    assert "Start with 2 kg, 3×12." in text


def test_table_flags_an_early_finish_that_did_not_go_as_the_scenario_expects() -> None:
    report = _report()
    report.results[0].expected_early_finish = True  # finished early, as expected
    report.results[2].expected_early_finish = True  # used all 3 rounds
    report.results[2].judgement = Judgement(score=0.5)
    out = _table(report)
    fitness = next(x for x in out.splitlines() if "fitness-hammer-curl-en" in x)
    legal = next(x for x in out.splitlines() if "legal-deposit-ru" in x)
    assert "early ·" in fitness and "expected" not in fitness
    assert "not early (expected)" in legal


# --- question metrics ------------------------------------------------------------------

STRUCTURED = "questions:structured"
TEXT = "questions:text"


def _asking(
    scenario: str,
    variant: str,
    *,
    rounds: list[tuple[int, int, int]],
    early: bool = False,
    ready: bool = False,
    expected: bool | None = None,
    final_now: bool = False,
    error: str | None = None,
) -> RunResult:
    """A run whose clarifying rounds each asked (questions, with options, chosen by option)."""
    run = _run(scenario, variant, 0.7, rounds=len(rounds) + 1, early=early, error=error)
    run.max_rounds = 4
    run.model_ready = ready
    run.expected_early_finish = expected
    run.final_now_pressed = final_now
    run.clarifying_rounds = len(rounds)
    run.structured_rounds = sum(1 for _, offered, _ in rounds if offered)
    run.questions_asked = sum(asked for asked, _, _ in rounds)
    run.questions_with_options = sum(offered for _, offered, _ in rounds)
    run.answered_by_option = sum(chosen for _, _, chosen in rounds)
    return run


def _asking_report() -> Report:
    return Report(
        started_at="2026-11-26T05:00:00+00:00",
        seed=1,
        models={"bot": "b", "user": "u", "judge": "j"},
        variants=[STRUCTURED, TEXT],
        scenarios=["a", "b", "c"],
        repeats=1,
        variant_settings={
            STRUCTURED: "each scenario's own rounds; questions: structured "
            "(LLM_STRUCTURED_QUESTIONS=on)",
            TEXT: "each scenario's own rounds; questions: text (LLM_STRUCTURED_QUESTIONS=off)",
        },
        results=[
            # 3 questions in 1 round, 3 with options, 2 chosen; stopped early as expected.
            _asking("a", STRUCTURED, rounds=[(3, 3, 2)], early=True, ready=True, expected=True),
            # 2 + 1 questions in 2 rounds, 1 with options, none chosen; expected early, wasn't.
            _asking("b", STRUCTURED, rounds=[(2, 0, 0), (1, 1, 0)], expected=True),
            # The user pressed "final answer now": the expectation is not checked.
            _asking("c", STRUCTURED, rounds=[(4, 4, 4)], expected=False, final_now=True),
            _asking("a", TEXT, rounds=[(2, 0, 0)], early=True, expected=True),
            _asking("b", TEXT, rounds=[(1, 0, 0), (1, 0, 0)], early=True, expected=False),
            # A consultation that failed counts in no question metric.
            _asking("c", TEXT, rounds=[(9, 0, 0)], error="model timed out"),
        ],
    )


def test_summary_counts_questions_per_round_answers_by_option_and_early_stops() -> None:
    """Questions per clarifying round, the share of questions with options answered by one,
    early stops (and those the model was ready for) against what the scenarios expect."""
    summary = summarise(_asking_report())
    structured, text = summary.variant(STRUCTURED), summary.variant(TEXT)
    assert structured.questions_per_round == pytest.approx((3 + 2 + 1 + 4) / 4)
    assert structured.questions_with_options == 3 + 1 + 4
    assert structured.option_share == pytest.approx((2 + 0 + 4) / 8)
    assert structured.structured_share == pytest.approx(3 / 4)
    assert (structured.early_finishes, structured.model_ready) == (1, 1)
    assert (structured.early_checked, structured.early_as_expected) == (2, 1)
    assert text.questions_per_round == pytest.approx(4 / 3)
    assert text.option_share is None and text.structured_share == 0.0
    assert (text.early_finishes, text.model_ready) == (2, 0)
    assert (text.early_checked, text.early_as_expected) == (2, 1)


def test_every_report_shows_the_question_metrics_and_what_each_variant_ran_with(
    tmp_path: Path,
) -> None:
    """The terminal, the HTML and the JSON report carry the same question numbers, and the
    variants' settings."""
    report = _asking_report()
    out = _table(report)
    assert "LLM_STRUCTURED_QUESTIONS=on" in out and "LLM_STRUCTURED_QUESTIONS=off" in out
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if "Questions/round" in x)
    header = lines[at]
    row = next(x for x in lines[at:] if x.strip("│ ").startswith(STRUCTURED))
    cells = dict(zip(_cells(header, "┃"), _cells(row, "│"), strict=True))
    assert cells["Questions/round"] == "2.5"
    assert cells["Answered by option"] == "75% of 8"
    assert cells["Structured rounds"] == "75%"
    assert cells["Early stops (model ready)"] == "1 (1)"
    assert cells["Early as expected"] == "1/2"
    line = next(x for x in out.splitlines() if x.startswith("│ a "))
    assert "3q/1r, 2/3 by option" in line and "early, model ready" in line

    _, page = _html(report, tmp_path)
    text = "".join(page.text)
    assert "75% of 8" in text and "1 (1)" in text and "1/2" in text
    assert "LLM_STRUCTURED_QUESTIONS=on" in text and "3q/1r, 2/3 by option" in text

    path = tmp_path / "report.json"
    write_json(report, path)
    data = json.loads(path.read_text(encoding="utf-8"))
    by_variant = {v["variant"]: v for v in data["summary"]["variants"]}
    assert by_variant[STRUCTURED]["option_share"] == pytest.approx(0.75)
    assert by_variant[STRUCTURED]["early_as_expected"] == 1
    assert read_json(path) == report


def test_html_shows_the_options_offered_and_the_ones_chosen(tmp_path: Path) -> None:
    """A structured round lists its options labelled; the user's turn lists its choices."""
    report = _report()
    report.results[0].transcript = [
        SeenMessage("user", "How do I do hammer curls?"),
        SeenMessage(
            "bot",
            "1. Dumbbells?\n2. Injuries?",
            round=1,
            questions=[AskedQuestion("Dumbbells?", ["2 kg", "5 kg"]), AskedQuestion("Injuries?")],
            asked=2,
        ),
        SeenMessage("user", "1a\nelbow <tendinitis>", picks=[Pick(1, 1, "Dumbbells? — 2 kg")]),
        SeenMessage("bot", "Do 3 sets of 10.", round=2, model_ready=True),
    ]
    html, page = _html(report, tmp_path)
    text = "".join(page.text)
    assert "1a) 2 kg" in text and "1b) 5 kg" in text
    assert "Chosen by option:" in text and "Dumbbells? — 2 kg" in text
    assert "the model knew enough" in text
    assert "elbow &lt;tendinitis&gt;" in html
