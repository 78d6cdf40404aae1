"""The evaluator's loop through the real engine: bot, simulated user and judge on three
fake model servers, SQLite files in a temporary folder."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.prompting.prompts import PromptLibrary
from evaluation.evaluate import Plan, evaluate
from evaluation.results import Report, RunResult, SeenMessage
from evaluation.scenarios import Behaviour, Expect, Scenario, load_scenarios
from evaluation.variants import build_variants
from tests.routed_model import (
    BOT_MODEL,
    JUDGE_MODEL,
    USER_MODEL,
    RoleServers,
    role_servers,
)

SCENARIOS = Path(__file__).resolve().parent / "evaluation_scenarios"
CURL, TRIP = load_scenarios(SCENARIOS)

Q1 = "1. What equipment do you have at home?\n2. Any injuries?"
A1 = "Only a 2 kg and a 5 kg dumbbell. My right elbow had tendinitis, still aches sometimes."
Q2 = "How many days a week can you train?"
A2 = "Three times a week."
FINAL = "## Your plan\nStart with the 2 kg dumbbell: 3×12, 90 s rest, Mon/Wed/Fri. Elbow first."
JUDGE_OK = '{"score": 0.9, "justification": "Uses the facts.", "covered": ["2 kg"], "missed": []}'


@pytest.fixture
async def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RoleServers]:
    monkeypatch.chdir(tmp_path)  # no stray .env
    async with role_servers() as started:
        yield started


async def run(
    servers: RoleServers,
    tmp_path: Path,
    scenarios: list[Scenario],
    *,
    baseline: bool = False,
    rounds: list[int] | None = None,
    seed: int = 0,
    concurrency: int = 1,
    repeats: int = 1,
) -> Report:
    plan = Plan(
        scenarios=scenarios,
        variants=build_variants(rounds or [], [], [], baseline=baseline),
        repeats=repeats,
        seed=seed,
        concurrency=concurrency,
    )
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    steps: list[int] = []
    report = await evaluate(
        servers.settings(tmp_path),
        servers.roles(tmp_path),
        plan,
        workdir,
        on_step=lambda: steps.append(1),
    )
    assert len(steps) == plan.steps()
    return report


def sent_text(requests: list[dict[str, object]]) -> str:
    return json.dumps(requests, ensure_ascii=False)


async def test_a_full_scenario_loop_through_the_three_models(
    servers: RoleServers, tmp_path: Path
) -> None:
    """Questions, in-character answers holding the hidden facts, the final answer, the
    judge's verdict; each model is sent exactly what its role needs, and the simulated
    user never sees the rubric."""
    servers.bot.enqueue(Q1)
    servers.bot.enqueue(Q2)
    servers.bot.enqueue(FINAL)
    servers.user.enqueue(A1)
    servers.user.enqueue(A2)
    servers.judge.enqueue(f"```json\n{JUDGE_OK}\n```")

    report = await run(servers, tmp_path, [CURL])

    assert report.variants == ["N-round"] and report.scenarios == ["hammer-curl-en"]
    assert report.models["user"].startswith(f"{USER_MODEL} at {servers.user.base_url}")
    [result] = report.results
    assert result.error is None
    assert result.transcript == [
        SeenMessage("user", CURL.first_message),
        SeenMessage("bot", Q1, round=1, asked=2),
        SeenMessage("user", A1),
        SeenMessage("bot", Q2, round=2, asked=1),
        SeenMessage("user", A2),
        SeenMessage("bot", FINAL, round=3),
    ]
    assert result.final_answer == FINAL
    assert (result.rounds_used, result.max_rounds, result.early_finish) == (3, 3, False)
    assert result.expected_early_finish is None
    # The fake server counts words: prompt words sent, reply words received.
    bot_usage = [
        (sum(len(str(m["content"]).split()) for m in r["messages"]), len(reply.split()))
        for r, reply in zip(servers.bot.requests, (Q1, Q2, FINAL), strict=True)
    ]
    assert result.tokens_in == sum(p for p, _ in bot_usage)
    assert result.tokens_out == sum(c for _, c in bot_usage)
    assert result.judgement is not None and result.judgement.score == 0.9
    assert result.judgement.covered == ["2 kg"] and result.judgement.failure is None

    # The bot: the real engine, its role and rounds, the conversation in order.
    assert [r["model"] for r in servers.bot.requests] == [BOT_MODEL] * 3
    coach = PromptLibrary().roles()["coach"].text
    assert coach in servers.bot.requests[0]["messages"][0]["content"]
    assert servers.bot.requests[2]["messages"][1:] == [
        {"role": "user", "content": CURL.first_message},
        {"role": "assistant", "content": Q1},
        {"role": "user", "content": A1},
        {"role": "assistant", "content": Q2},
        {"role": "user", "content": A2},
    ]
    # The simulated user: persona, facts, goal and language; the chat from its side.
    assert [r["model"] for r in servers.user.requests] == [USER_MODEL] * 2
    assert all(r["temperature"] == 0.7 for r in servers.user.requests)
    system = servers.user.requests[1]["messages"][0]["content"]
    for part in (CURL.persona.strip(), CURL.goal, *CURL.hidden_facts, CURL.first_message):
        assert part in system
    assert "Write only in English." in system
    assert servers.user.requests[1]["messages"][1:] == [
        {"role": "user", "content": Q1},
        {"role": "assistant", "content": A1},
        {"role": "user", "content": Q2},
    ]
    for point in CURL.rubric:
        assert point not in sent_text(servers.user.requests)
    assert "rubric" not in sent_text(servers.user.requests).lower()
    # The judge: everything about the person, the rubric and the final answer; JSON asked.
    [judged] = servers.judge.requests
    assert judged["model"] == JUDGE_MODEL and judged["temperature"] == 0.0
    assert judged["response_format"] == {"type": "json_object"}
    prompt = judged["messages"][0]["content"]
    for part in (*CURL.rubric, *CURL.hidden_facts, CURL.goal, FINAL, "English"):
        assert part in prompt


async def test_broken_judge_json_is_repaired(servers: RoleServers, tmp_path: Path) -> None:
    servers.bot.enqueue("[[FINAL]] " + FINAL)
    servers.judge.enqueue(
        'Here is my verdict: {\'score\': 0.75, "justification": "Mostly good", '
        '"covered": ["2 kg",], "missed": ["rest times"]'
    )
    [result] = (await run(servers, tmp_path, [CURL])).results
    assert result.judgement is not None
    assert (result.judgement.score, result.judgement.justification) == (0.75, "Mostly good")
    assert result.judgement.missed == ["rest times"]
    assert len(servers.judge.requests) == 1


async def test_an_unparseable_judge_reply_is_retried_once_then_a_failure(
    servers: RoleServers, tmp_path: Path
) -> None:
    servers.bot.enqueue("[[FINAL]] " + FINAL)
    servers.judge.enqueue("I would give it a solid B.")
    servers.judge.enqueue('{"score": 1.5, "justification": "Excellent"}')
    [result] = (await run(servers, tmp_path, [CURL])).results
    judgement = result.judgement
    assert judgement is not None and judgement.score is None
    assert judgement.failure == 'unparseable judge reply: "score" 1.5 is outside 0..1'
    assert judgement.raw == '{"score": 1.5, "justification": "Excellent"}'
    first, retry = servers.judge.requests
    assert retry["messages"][:2] == [
        first["messages"][0],
        {"role": "assistant", "content": "I would give it a solid B."},
    ]
    assert "no JSON object in the reply" in retry["messages"][2]["content"]


async def test_a_judge_reply_fixed_on_the_retry_is_a_score(
    servers: RoleServers, tmp_path: Path
) -> None:
    servers.bot.enqueue("[[FINAL]] " + FINAL)
    servers.judge.enqueue('{"justification": "forgot the score"}')
    servers.judge.enqueue(JUDGE_OK)
    [result] = (await run(servers, tmp_path, [CURL])).results
    assert result.judgement is not None and result.judgement.score == 0.9
    assert 'the JSON has no "score"' in servers.judge.requests[1]["messages"][2]["content"]


async def test_a_first_message_with_everything_finishes_early(
    servers: RoleServers, tmp_path: Path
) -> None:
    scenario = dataclasses.replace(CURL, expect=Expect(early_finish=True))
    servers.bot.enqueue("[[FINAL]] " + FINAL)
    servers.judge.enqueue(JUDGE_OK)
    [result] = (await run(servers, tmp_path, [scenario])).results
    assert result.final_answer == FINAL  # the marker is the engine's, not the answer's
    assert (result.rounds_used, result.max_rounds, result.early_finish) == (1, 3, True)
    assert result.expected_early_finish is True
    assert servers.user.requests == []  # nobody had to answer anything


async def test_the_one_shot_baseline_answers_the_first_message_at_once(
    servers: RoleServers, tmp_path: Path
) -> None:
    """Both variants play the scenario; the baseline has one round; the pairwise judge
    compares their answers."""
    servers.bot.enqueue(Q1)
    servers.bot.enqueue(Q2)
    servers.bot.enqueue(FINAL)
    servers.user.enqueue(A1)
    servers.user.enqueue(A2)
    servers.judge.enqueue(JUDGE_OK)
    servers.bot.enqueue("Do 3×10 hammer curls with any dumbbell.")
    servers.judge.enqueue('{"score": 0.3, "justification": "Generic", "covered": []}')
    servers.judge.enqueue('{"winner": "first", "justification": "Uses the elbow history"}')

    report = await run(servers, tmp_path, [CURL], baseline=True)

    assert report.variants == ["N-round", "one-shot"]
    multi, one_shot = report.results
    assert (multi.variant, multi.rounds_used, multi.judgement and multi.judgement.score) == (
        "N-round",
        3,
        0.9,
    )
    assert one_shot.variant == "one-shot" and one_shot.max_rounds == 1
    assert one_shot.transcript == [
        SeenMessage("user", CURL.first_message),
        SeenMessage("bot", "Do 3×10 hammer curls with any dumbbell.", round=1),
    ]
    assert one_shot.early_finish is False and one_shot.judgement is not None
    assert one_shot.judgement.score == 0.3
    baseline_request = servers.bot.requests[3]
    assert baseline_request["messages"][1:] == [{"role": "user", "content": CURL.first_message}]
    assert "last round" in baseline_request["messages"][0]["content"]
    [pair] = report.pairwise
    assert (pair.variant_a, pair.variant_b) == ("N-round", "one-shot")
    assert pair.winner == pair.shown_first  # "first" is whichever was shown first
    pairwise_prompt = servers.judge.requests[2]["messages"][0]["content"]
    first = FINAL if pair.shown_first == "a" else "Do 3×10 hammer curls"
    second = "Do 3×10 hammer curls" if pair.shown_first == "a" else FINAL
    assert pairwise_prompt.index(first) < pairwise_prompt.index(second)


async def test_final_answer_now_in_a_russian_group(servers: RoleServers, tmp_path: Path) -> None:
    """The persona presses "final answer now" after round 1: the request stored is the
    Russian one, and the final answer is asked for at once."""
    servers.bot.enqueue("Какой у вас бюджет и как вы поедете?")
    servers.bot.enqueue("Итог: Суздаль, гостиница без животных.")
    servers.judge.enqueue(JUDGE_OK)

    [result] = (await run(servers, tmp_path, [TRIP])).results

    russian = PromptLibrary().render("final_now_request.ru")
    assert result.transcript == [
        SeenMessage("Анна", TRIP.first_message),
        SeenMessage("bot", "Какой у вас бюджет и как вы поедете?", round=1, asked=1),
        SeenMessage("Борис", russian, final_now=True),
        SeenMessage("bot", "Итог: Суздаль, гостиница без животных.", round=2),
    ]
    assert result.final_now_pressed and not result.early_finish
    assert (result.rounds_used, result.max_rounds) == (2, 3)
    assert servers.user.requests == []  # a press, not a written message
    final_request = servers.bot.requests[1]
    assert russian in final_request["messages"][-1]["content"]
    assert "Russian" in final_request["messages"][0]["content"]
    assert "Russian" in servers.judge.requests[0]["messages"][0]["content"]


async def test_group_members_take_turns_with_their_own_personas(
    servers: RoleServers, tmp_path: Path
) -> None:
    scenario = dataclasses.replace(TRIP, behaviour=Behaviour(), max_rounds=3)
    servers.bot.enqueue("Какой бюджет?")
    servers.bot.enqueue("Есть ли аллергии?")
    servers.bot.enqueue("Итог: Суздаль.")
    servers.user.enqueue("До 30 000 на двоих.")
    servers.user.enqueue("У меня аллергия на кошек.")
    servers.judge.enqueue(JUDGE_OK)
    [result] = (await run(servers, tmp_path, [scenario])).results
    assert [t.speaker for t in result.transcript] == ["Анна", "bot", "Борис", "bot", "Анна", "bot"]
    boris, anna = (r["messages"] for r in servers.user.requests)
    assert "You are Борис" in boris[0]["content"]
    assert TRIP.speakers[1].persona in boris[0]["content"]
    assert "У Бориса аллергия на кошек." in boris[0]["content"]
    assert boris[1] == {
        "role": "user",
        "content": f"Анна: {TRIP.first_message}\n\nКакой бюджет?",
    }
    assert "You are Анна" in anna[0]["content"]
    assert TRIP.first_message in anna[0]["content"]  # her own opening, quoted
    assert anna[1:] == [
        {
            "role": "user",
            "content": "Какой бюджет?\n\nБорис: До 30 000 на двоих.\n\nЕсть ли аллергии?",
        }
    ]


async def test_a_model_error_ends_the_run_with_the_error_not_a_score(
    servers: RoleServers, tmp_path: Path
) -> None:
    servers.bot.enqueue("boom", status=500)
    [result] = (await run(servers, tmp_path, [CURL])).results
    assert result.error is not None and result.error.startswith("ModelError")
    assert result.judgement is None and result.final_answer == ""
    assert servers.judge.requests == []


async def test_results_come_in_a_fixed_order_whatever_finishes_first(
    servers: RoleServers, tmp_path: Path
) -> None:
    """Two scenarios, two variants, two repeats at four at once: scenario, variant, repeat."""
    servers.bot.default_reply = lambda body: "[[FINAL]] An answer."
    servers.judge.default_reply = lambda body: (
        '{"winner": "tie"}' if "two consultants" in json.dumps(body) else JUDGE_OK
    )
    scenarios = [CURL, dataclasses.replace(TRIP, behaviour=Behaviour())]
    plan_report = await run(servers, tmp_path, scenarios, baseline=True, concurrency=4, repeats=2)
    order = [(r.scenario_id, r.variant, r.repeat) for r in plan_report.results]
    assert order == [
        (scenario, variant, repeat)
        for scenario in ("hammer-curl-en", "trip-group-ru")
        for variant in ("N-round", "one-shot")
        for repeat in (0, 1)
    ]
    assert all(isinstance(r, RunResult) and r.error is None for r in plan_report.results)
    assert [(p.scenario_id, p.repeat, p.winner) for p in plan_report.pairwise] == [
        (scenario, repeat, "tie")
        for scenario in ("hammer-curl-en", "trip-group-ru")
        for repeat in (0, 1)
    ]


async def test_two_prompt_folders_two_models_and_the_bot_temperature(
    servers: RoleServers, tmp_path: Path
) -> None:
    """Each variant's bot runs with its own prompts folder and model; EVAL_BOT_TEMPERATURE
    reaches the bot's requests."""
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, text in ((old, "You are the OLD coach."), (new, "You are the NEW coach.")):
        (folder / "roles").mkdir(parents=True)
        (folder / "roles" / "coach.mustache").write_text(text, encoding="utf-8")
    servers.bot.default_reply = lambda body: "[[FINAL]] An answer."
    servers.judge.default_reply = lambda body: (
        '{"winner": "tie"}' if "two consultants" in json.dumps(body) else JUDGE_OK
    )
    roles = servers.roles(tmp_path)
    roles = dataclasses.replace(roles, bot=dataclasses.replace(roles.bot, temperature=0.3))
    plan = Plan(
        scenarios=[CURL],
        variants=build_variants([], [old, new], ["m-x", "m-y"], baseline=False),
    )
    report = await evaluate(servers.settings(tmp_path), roles, plan, tmp_path)

    assert report.variants == [
        "prompts:old model:m-x",
        "prompts:old model:m-y",
        "prompts:new model:m-x",
        "prompts:new model:m-y",
    ]
    sent = {
        (r["model"], "OLD" if "OLD coach" in r["messages"][0]["content"] else "NEW")
        for r in servers.bot.requests
    }
    assert sent == {("m-x", "OLD"), ("m-y", "OLD"), ("m-x", "NEW"), ("m-y", "NEW")}
    assert {r["temperature"] for r in servers.bot.requests} == {0.3}
    assert [(p.variant_a, p.variant_b) for p in report.pairwise] == [
        ("prompts:old model:m-x", "prompts:old model:m-y"),
        ("prompts:old model:m-x", "prompts:new model:m-x"),
        ("prompts:old model:m-x", "prompts:new model:m-y"),
    ]
