"""The HTTP API's rounds pass the process's intake gate as the bot's updates do: a round
waiting for the model leaves its slot to the next, on `/api/chat` and on
`/v1/chat/completions` alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.primitives.intake_gate import IntakeGate
from fakes.model_server import FakeModelServer
from tests.api_harness import api_settings, running_api


async def test_rounds_waiting_for_the_model_leave_the_gate_to_the_next(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    gate = IntakeGate(1, hold_limit=60)
    model_server.hold = asyncio.Event()
    async with running_api(settings, turn_intake=gate) as api:
        asks = [
            api.client.post("/api/chat", json={"message": "First question", "userId": "a"}),
            api.client.post("/api/chat", json={"message": "Second question", "userId": "b"}),
            api.client.post(
                "/v1/chat/completions",
                json={"model": "consultation", "messages": [{"role": "user", "content": "Third"}]},
            ),
        ]
        sent = [asyncio.create_task(ask) for ask in asks]
        await model_server.wait_requests(3, timeout=10)
        asked = sorted(request["messages"][-1]["content"] for request in model_server.requests)
        assert asked == ["First question", "Second question", "Third"]
        assert gate.inside == 0
        model_server.hold.set()
        responses = await asyncio.gather(*sent)
        assert [response.status for response in responses] == [200, 200, 200]
        first = await responses[0].json()
        assert first["round"] == 1 and first["content"]
        assert gate.inside == 0


async def test_a_round_waits_for_a_free_slot(tmp_path: Path, model_server: FakeModelServer) -> None:
    """With every slot taken, neither API reaches the model; once one is free, both do."""
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    gate = IntakeGate(1, hold_limit=60)
    taken, free = asyncio.Event(), asyncio.Event()

    async def hold_the_slot() -> None:
        async with gate.enter():
            taken.set()
            await free.wait()

    async with running_api(settings, turn_intake=gate) as api:
        holder = asyncio.create_task(hold_the_slot())
        await taken.wait()
        sent = [
            asyncio.create_task(api.client.post("/api/chat", json={"message": "Waiting"})),
            asyncio.create_task(
                api.client.post(
                    "/v1/chat/completions",
                    json={
                        "model": "consultation",
                        "messages": [{"role": "user", "content": "Too"}],
                    },
                )
            ),
        ]
        await asyncio.sleep(0.5)  # time enough to reach the model, were there no gate
        assert model_server.requests == []
        free.set()
        await holder
        responses = await asyncio.gather(*sent)
        assert [response.status for response in responses] == [200, 200]
        assert len(model_server.requests) == 2
