"""`python -m evaluation`: the listing, configuration errors, and a whole run writing reports."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from evaluation.cli import main
from evaluation.report_json import read_json
from evaluation.scenarios import load_scenarios
from evaluation.settings import EvalSettings
from fakes.model_server import response_format_of, round_json
from tests.routed_model import RoleServers, role_servers

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "evaluation_scenarios"
JUDGE_OK = '{"score": 0.8, "justification": "Fine.", "covered": ["a"], "missed": []}'


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env; the default report folder lands here
    for name in [*Settings.model_fields, *(f"eval_{n}" for n in EvalSettings.model_fields)]:
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
async def servers(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RoleServers]:
    async with role_servers() as started:
        for name, value in started.env().items():
            monkeypatch.setenv(name, value)
        started.bot.default_reply = lambda body: "[[FINAL]] Start with the 2 kg dumbbell."
        started.judge.default_reply = lambda body: (
            '{"winner": "second", "justification": "Same."}'
            if "two consultants" in json.dumps(body)
            else JUDGE_OK
        )
        yield started


def test_list_prints_each_shipped_scenario_without_any_settings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    shipped = load_scenarios()
    assert len(lines) == len(shipped) >= 16
    for line, scenario in zip(lines, shipped, strict=True):
        assert line.split() == [scenario.id, scenario.language, scenario.role]


def test_list_reads_another_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list", "--scenarios-dir", str(SCENARIOS)]) == 0
    assert capsys.readouterr().out == ("hammer-curl-en  en  coach\ntrip-group-ru   ru  expert\n")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {}, "Configuration error: OPENAI_API_KEY: required"),
        (["--scenario", "nope"], {"OPENAI_API_KEY": "k"}, "no scenario 'nope' (--list shows"),
        (
            [],
            {"OPENAI_API_KEY": "k", "EVAL_JUDGE_TEMPERATURE": "hot"},
            "Configuration error: EVAL_JUDGE_TEMPERATURE: ",
        ),
        (["--prompts", "missing"], {"OPENAI_API_KEY": "k"}, "the prompts folder does not exist"),
    ],
)
def test_a_configuration_problem_is_one_line_and_exit_code_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["--scenarios-dir", str(SCENARIOS), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("Configuration error: ")
    assert message in err


def test_a_bad_scenario_file_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "x.yaml").write_text("id: x\nlanguage: de\n", encoding="utf-8")
    assert main(["--list", "--scenarios-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == f"Configuration error: {folder / 'x.yaml'}: title: is required\n"


class _Checker(HTMLParser):
    """Collects the start tags of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


async def test_a_whole_run_prints_the_table_and_writes_both_reports(
    servers: RoleServers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["--scenarios-dir", str(SCENARIOS), "--scenario", "hammer-curl-en"]
    argv += ["--out", str(out), "--seed", "3"]
    assert await asyncio.to_thread(main, argv) == 0

    printed = capsys.readouterr().out
    assert "hammer-curl-en" in printed and str(out / "report.json") in printed
    assert "…" not in printed  # no column cut short: wide when piped, not rich's 80
    report = read_json(out / "report.json")
    assert report.seed == 3 and report.scenarios == ["hammer-curl-en"]
    assert report.variants == ["N-round", "one-shot"]
    assert [r.judgement and r.judgement.score for r in report.results] == [0.8, 0.8]
    assert [r.early_finish for r in report.results] == [True, False]
    [pair] = report.pairwise
    assert pair.winner == ("b" if pair.shown_first == "a" else "a")
    page = (out / "report.html").read_text(encoding="utf-8")
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.tags[0] == "html" and "body" in checker.tags
    assert "hammer-curl-en" in page and "Start with the 2 kg dumbbell." in page


async def test_python_dash_m_evaluation_runs_end_to_end(
    servers: RoleServers, tmp_path: Path
) -> None:
    """The module entry point, as a user types it, writes the default report folder."""
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "evaluation",
        "--scenarios-dir",
        str(SCENARIOS),
        "--scenario",
        "trip-group-ru",
        "--no-baseline",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    [folder] = (tmp_path / "evaluation-report").iterdir()
    report = read_json(folder / "report.json")
    assert report.variants == ["N-round"] and report.pairwise == []
    [result] = report.results
    assert result.final_answer == "Start with the 2 kg dumbbell."
    assert "trip-group-ru" in stdout.decode()
    assert (folder / "report.html").is_file()


async def test_questions_structured_and_text_are_compared_in_one_run(
    servers: RoleServers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--questions structured --questions text`: two variants named after the way they ask,
    the structured one asking for clarifying rounds the simulated user answers by option,
    the report naming each one's LLM_STRUCTURED_QUESTIONS and counting the choices."""
    final = servers.bot.default_reply
    servers.bot.default_reply = lambda body: (
        round_json("One thing.", [("Which dumbbells?", ["2 kg", "5 kg"])])
        if response_format_of(body) == "clarifying_round"
        else final(body)
    )
    servers.user.default_reply = lambda body: "1a"
    out = tmp_path / "out"
    argv = ["--scenarios-dir", str(SCENARIOS), "--scenario", "hammer-curl-en", "--no-baseline"]
    argv += ["--questions", "structured", "--questions", "text", "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == 0

    printed = capsys.readouterr().out
    assert "…" not in printed
    assert "LLM_STRUCTURED_QUESTIONS=on" in printed and "Questions/round" in printed
    report = read_json(out / "report.json")
    assert report.variants == ["questions:structured", "questions:text"]
    structured, text = report.results
    assert (structured.variant, text.variant) == tuple(report.variants)
    assert "LLM_STRUCTURED_QUESTIONS=off" in report.variant_settings["questions:text"]
    # Structured: two rounds answered "1a", then the last round's answer; text: at once.
    assert (structured.structured_rounds, structured.answered_by_option) == (2, 2)
    assert (structured.rounds_used, text.rounds_used, text.structured_rounds) == (3, 1, 0)
    formats = [response_format_of(r) for r in servers.bot.requests]
    assert (formats.count("clarifying_round"), formats.count(None), len(formats)) == (2, 2, 4)
    summary = json.loads((out / "report.json").read_text(encoding="utf-8"))["summary"]
    assert [v["option_share"] for v in summary["variants"]] == [1.0, None]
    [pair] = report.pairwise
    assert (pair.variant_a, pair.variant_b) == ("questions:structured", "questions:text")


def test_an_unknown_questions_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Only structured and text are ways of asking; anything else stops with exit code 2."""
    assert main(["--scenarios-dir", str(SCENARIOS), "--questions", "json"]) == 2
    assert "invalid choice: 'json'" in capsys.readouterr().err
