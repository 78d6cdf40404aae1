"""`POST /api/chat/stream`: SSE framing read by a real SSE decoder (the openai SDK's own)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiohttp import ClientResponse
from openai._streaming import ServerSentEvent, SSEDecoder

from api.sse import format_event
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi


async def events_of(response: ClientResponse) -> list[ServerSentEvent]:
    return [event async for event in SSEDecoder().aiter_bytes(response.content.iter_any())]


def rebuild(events: list[ServerSentEvent]) -> str:
    """What a client shows: append each delta, replace on a snapshot."""
    text = ""
    for event in events:
        if event.event == "delta":
            text += event.json()["content"]
        elif event.event == "snapshot":
            text = event.json()["content"]
    return text


async def stream(api: RunningApi, body: dict[str, Any]) -> ClientResponse:
    return await api.client.post("/api/chat/stream", json=body)


def test_multi_line_data_becomes_several_data_lines() -> None:
    """A payload with line breaks is framed as one `data:` line per line, and decodes back."""
    framed = format_event("delta", "one\ntwo\r\nthree")
    assert framed == b"event: delta\ndata: one\ndata: two\ndata: three\n\n"
    (event,) = list(SSEDecoder().iter_bytes(iter([framed])))
    assert (event.event, event.data) == ("delta", "one\ntwo\nthree")


async def test_stream_sends_deltas_then_the_same_object_as_chat(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Deltas add up to the reply; `done` carries exactly `/api/chat`'s response object."""
    text = "Which exercises do you do today?\nAnd how long have you trained?"
    model_server.enqueue(text, chunk_size=5)
    response = await stream(api, {"message": "Help with weights", "maxRounds": 2})
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-cache"
    events = await events_of(response)
    kinds = [event.event for event in events]
    assert kinds[0] == "session" and kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"} and len(kinds) > 5
    done = events[-1].json()
    assert events[0].json() == {"sessionId": done["sessionId"]}
    assert rebuild(events) == done["content"] == text
    assert done == {"content": text, "model": "test-model", "isComplete": False, "round": 1,
                    "maxRounds": 2, "sessionId": done["sessionId"], "questions": [],
                    "readyForFinal": False}  # fmt: skip

    model_server.enqueue("Final plan")
    chat = await api.client.post(
        "/api/chat", json={"message": "Two months", "sessionId": done["sessionId"]}
    )
    assert set(await chat.json()) == set(done)


async def test_headers_arrive_before_the_model_answers(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The stream opens at once, and names its session, while the model has not answered."""
    release = asyncio.Event()
    model_server.enqueue("Slow but sure", hold=release)
    response = await stream(api, {"message": "Hello"})
    assert response.status == 200  # the model's reply is still held
    assert await response.content.readline() == b"event: session\n"
    await model_server.wait_requests(1)  # the model has the question, and holds its reply
    release.set()
    events = await events_of(response)
    assert events[-1].event == "done" and events[-1].json()["content"] == "Slow but sure"


async def test_a_rewritten_seam_is_sent_as_a_snapshot(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """When a continuation rewrites the end of the text, the client is sent the whole text."""
    model_server.enqueue("Start with light weights\n", finish_reason="length", chunk_size=6)
    model_server.enqueue("weights and twelve reps.", chunk_size=6)
    events = await events_of(await stream(api, {"message": "Plan"}))
    assert "snapshot" in [event.event for event in events]
    done = events[-1].json()
    assert done["content"] == "Start with light weights and twelve reps."
    assert rebuild(events) == done["content"]


async def test_refusals_before_the_stream_are_plain_json(api: RunningApi) -> None:
    """Validation and unknown sessions answer with a JSON error and status, not a stream."""
    response = await stream(api, {"message": "hi", "sessionId": str(uuid.uuid4())})
    assert (response.status, (await response.json())["code"]) == (404, "SESSION_NOT_FOUND")
    assert response.content_type == "application/json"
    response = await stream(api, {"message": " "})
    assert (response.status, (await response.json())["code"]) == (400, "VALIDATION_ERROR")


async def test_model_failure_mid_stream_is_an_error_event(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A model failure after the stream opened ends it with `error`; the round is kept open."""
    model_server.enqueue("Partial answ", error_after=1)
    events = await events_of(await stream(api, {"message": "Question", "maxRounds": 2}))
    error = events[-1]
    assert error.event == "error"
    body = error.json()
    assert (body["code"], body["status"]) == ("MODEL_UNAVAILABLE", 503)
    model_server.enqueue("A clarifying question?")
    events = await events_of(
        await stream(api, {"message": "Question", "sessionId": body["sessionId"]})
    )
    assert events[-1].event == "done" and events[-1].json()["round"] == 1


async def test_a_client_that_leaves_does_not_lose_the_round(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The reply is still stored when the client disconnects mid-stream."""
    first = await (
        await api.client.post("/api/chat", json={"message": "Hi", "maxRounds": 3})
    ).json()
    session = first["sessionId"]
    release = asyncio.Event()
    model_server.enqueue("An answer nobody waited for", hold=release)
    response = await stream(api, {"message": "Hello", "sessionId": session})
    assert await response.content.readline() == b"event: session\n"
    await model_server.wait_requests(2)  # the round is under way: it holds the session
    response.close()
    release.set()
    # A round on a session waits for the one under way, so this one runs after it.
    model_server.enqueue("And the next one")
    follow = await api.client.post("/api/chat", json={"message": "Next", "sessionId": session})
    assert (follow.status, (await follow.json())["round"]) == (200, 3)
    stored = await api.store.get(session)
    assert stored is not None and stored.current_round == 3
    assert [m.text for m in stored.messages][2:] == [
        "Hello", "An answer nobody waited for", "Next", "And the next one"]  # fmt: skip


async def test_two_streams_racing_for_the_last_round_never_stream_a_refusal(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """On a 1-round session, one stream gets the answer; the other a plain JSON 400."""
    model_server.enqueue(status=500)  # round 1 stays open: the session waits for its answer
    failed = await api.client.post("/api/chat", json={"message": "Question"})
    session = (await failed.json())["sessionId"]
    release = asyncio.Event()
    model_server.enqueue("The final answer", hold=release)
    body = {"message": "Question", "sessionId": session}
    racing = [asyncio.create_task(stream(api, body)) for _ in range(2)]
    await model_server.wait_requests(2)
    release.set()
    responses = await asyncio.gather(*racing)
    winner, loser = sorted(responses, key=lambda r: r.status)
    assert winner.status == 200
    assert [e.event for e in await events_of(winner)][-1] == "done"
    assert loser.status == 400 and loser.content_type == "application/json"
    assert (await loser.json())["code"] == "DIALOG_COMPLETED"
    assert len(model_server.requests) == 2
