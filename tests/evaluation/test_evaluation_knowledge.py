"""The evaluator's knowledge variant end to end: `--knowledge on --knowledge off` over a
shipped knowledge scenario, the bot, simulated user and judge on fake model servers, the
example knowledge base loaded through the same loader as `consultation-bot knowledge add`."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from evaluation.cli import main
from evaluation.report_json import read_json
from evaluation.scenarios import DEFAULT_SCENARIOS_DIR
from evaluation.settings import EvalSettings
from fakes.model_server import text_of
from tests.routed_model import RoleServers, role_servers

SCENARIO = "knowledge-fridge-instalments-en"
QUESTION = "What interest rate are you hoping for? How big a deposit can you pay?"
JUDGE = (
    '{"score": 0.8, "justification": "Fine.", "covered": ["a"], "missed": [],'
    ' "groundedness": 0.75, "unsupported": ["a made-up fee"]}'
)
PASSAGE_HEAD = re.compile(r"^\[(K\d+)\] ", re.MULTILINE)


def labels_holding(system: str, needle: str) -> list[str]:
    """The labels of the excerpts in a system message whose quoted text holds `needle`."""
    begin, end = "\nBEGIN KNOWLEDGE BASE EXCERPTS\n", "\nEND KNOWLEDGE BASE EXCERPTS"
    if begin not in system:
        return []
    section = system.split(begin, 1)[1].split(end, 1)[0]
    heads = list(PASSAGE_HEAD.finditer(section))
    ends = [head.start() for head in heads[1:]] + [len(section)] * bool(heads)
    found = []
    for head, end in zip(heads, ends, strict=True):
        text = section[head.end() : end]
        if needle in text:
            found.append(head.group(1))
    return found


def bot_reply(body: dict[str, Any]) -> str:
    """One clarifying question the material answers, then a final answer citing the
    excerpts that hold the price and the 0% offer (or [K1] when it was given none)."""
    users = [m for m in body["messages"] if m["role"] == "user"]
    if len(users) == 1:
        return QUESTION
    system = text_of(body["messages"][0]["content"])
    cited = sorted(set(labels_holding(system, "£1,149") + labels_holding(system, "0% interest")))
    return (
        f"[[FINAL]] £1,149: £114.90 down, 12 months at 0% interest [{', '.join(cited or ['K1'])}]."
    )


@pytest.fixture
async def servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[RoleServers]:
    monkeypatch.chdir(tmp_path)
    for name in [*Settings.model_fields, *(f"eval_{n}" for n in EvalSettings.model_fields)]:
        monkeypatch.delenv(name.upper(), raising=False)
    async with role_servers() as started:
        for name, value in started.env().items():
            monkeypatch.setenv(name, value)
        started.bot.default_reply = bot_reply
        started.user.default_reply = lambda body: "No interest please, deposit up to £200."
        started.judge.default_reply = lambda body: (
            '{"winner": "first", "justification": "Cites."}'
            if "two consultants" in json.dumps(body)
            else JUDGE
        )
        yield started


async def test_knowledge_on_and_off_are_measured_on_the_fake_servers(
    servers: RoleServers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the example knowledge base loaded the final answer was given the passages of
    all three needed facts and cites only passages holding them, and the clarifying
    question it asked is one the material answered; with an empty knowledge base nothing
    was given, so nothing is retrieved and its [K1] holds nothing. Both are judged for
    groundedness, the knowledge one with the excerpts in the judge's prompt."""
    out = tmp_path / "out"
    argv = ["--scenario", SCENARIO, "--knowledge", "on", "--knowledge", "off"]
    argv += ["--no-baseline", "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == 0

    printed = capsys.readouterr().out
    assert "Hit rate@k" in printed and "Citation precision" in printed and "…" not in printed
    report = read_json(out / "report.json")
    assert report.variants == ["knowledge:on", "knowledge:off"]
    assert "knowledge scenarios: on (top 6)" in report.variant_settings["knowledge:on"]
    on, off = report.results
    assert on.error is None and off.error is None
    assert on.knowledge is not None and off.knowledge is not None
    assert (on.knowledge.facts, on.knowledge.retrieved, on.knowledge.stated) == (3, 3, 3)
    assert on.knowledge.cited == on.knowledge.cited_with_fact >= 1
    assert (on.knowledge.questions, on.knowledge.redundant) == (2, 1)
    assert (off.knowledge.retrieved, off.knowledge.given) == (0, 0)
    assert (off.knowledge.cited, off.knowledge.cited_with_fact, off.knowledge.redundant) == (
        1,
        0,
        0,
    )
    final = on.transcript[-1]
    assert {p.document for p in final.knowledge} >= {"products/fridges.md", "payment/finance.md"}
    assert all(p.label == f"K{i}" for i, p in enumerate(final.knowledge, 1))
    assert on.judgement is not None and on.judgement.groundedness == 0.75
    assert on.judgement.unsupported == ["a made-up fee"]

    summary = json.loads((out / "report.json").read_text(encoding="utf-8"))["summary"]
    numbers = {v["variant"]: v["knowledge"] for v in summary["variants"]}
    assert numbers["knowledge:on"]["hit_rate"] == 1.0
    assert numbers["knowledge:on"]["citation_precision"] == 1.0
    assert numbers["knowledge:off"]["hit_rate"] == 0.0
    assert numbers["knowledge:off"]["citation_precision"] == 0.0
    assert numbers["knowledge:on"]["mean_groundedness"] == 0.75

    sent = [text_of(r["messages"][0]["content"]) for r in servers.bot.requests]
    with_excerpts = [s for s in sent if "\nBEGIN KNOWLEDGE BASE EXCERPTS\n" in s]
    assert len(with_excerpts) == 2  # the knowledge:on round and final answer, nothing else
    judged = [json.dumps(r, ensure_ascii=False) for r in servers.judge.requests]
    grounded = [j for j in judged if "groundedness" in j]
    assert len(grounded) == 2
    assert sum("Paying in instalments" in j for j in grounded) == 1
    assert sum("(no excerpts: the knowledge base gave it nothing)" in j for j in grounded) == 1
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h3>Knowledge</h3>" in page and "Knowledge-base passages given" in page
    assert "Groundedness: 0.75" in page


async def test_a_knowledge_folder_that_is_missing_is_a_configuration_error(
    servers: RoleServers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any model call: one line naming the folder, exit code 2."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    text = (DEFAULT_SCENARIOS_DIR / f"{SCENARIO}.yaml").read_text(encoding="utf-8")
    (folder / f"{SCENARIO}.yaml").write_text(text, encoding="utf-8")  # ../../examples: gone
    argv = ["--scenarios-dir", str(folder), "--no-baseline", "--out", str(tmp_path / "out")]
    assert await asyncio.to_thread(main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Configuration error: knowledge documents: ") and "not a folder" in err
    assert servers.bot.requests == [] and servers.judge.requests == []
