"""What the context window gives up first: long replies of the model are shortened, then
older ones dropped, before any of the user's answers — end to end, as the fake model
server receives the final round of a long consultation."""

from __future__ import annotations

from typing import Any

from core.domain.asking import UserMessage
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from tests.service_harness import MakeEngine

ANSWERS = [
    "I'm 35, haven't exercised in years, and I want to run 5K in 3 months.",
    "My left knee hurts after long walks.",
    "I can train on Monday, Wednesday and Saturday mornings.",
    "I have a treadmill at home but prefer running outside.",
    "I weigh 92 kg and I'm 180 cm tall.",
    "I smoke five cigarettes a day and want to quit too.",
    "My doctor said light exercise is fine.",
]


def long_reply(round_number: int) -> str:
    """A clarifying reply of about 6,000 characters, as a chatty model writes them."""
    body = "".join(
        f"Point {round_number}.{i}: consider how item {i} of your routine affects recovery. "
        for i in range(80)
    )
    return f"Round {round_number} questions.\n\n{body}\n\nWhat else should I know?"


def contents(body: dict[str, Any]) -> str:
    return "\n".join(str(message["content"]) for message in body["messages"])


async def test_every_user_answer_reaches_the_final_round(
    engine: MakeEngine, model_server: FakeModelServer
) -> None:
    """Eight rounds with long replies over a 24,000-character budget: the final request
    holds the original request and every answer of the user, verbatim, within budget."""
    service: Engine = engine(history_budget_chars=24_000)
    await service.settings.set_max_rounds("tg:1", 8)
    for n in range(1, 8):
        model_server.enqueue(long_reply(n))
    model_server.enqueue("## Your plan\nWeek 1: walk-run.")

    await service.turns.ask(UserMessage("tg:1", "Help me start running."))
    for answer in ANSWERS:
        reply = await service.turns.ask(UserMessage("tg:1", answer))

    assert reply.is_final and reply.round == 8
    final = model_server.requests[-1]
    sent = contents(final)
    for answer in ["Help me start running.", *ANSWERS]:
        assert answer in sent, answer
    assert sum(len(str(m["content"])) for m in final["messages"]) <= 24_000
    assert long_reply(7)[:200] in sent  # the most recent exchange is there too
    assert "trimmed to fit the context window" in final["messages"][0]["content"]
