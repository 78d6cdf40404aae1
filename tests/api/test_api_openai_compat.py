"""The consultation behind the OpenAI-compatible endpoint, driven by the `openai` package itself
(async and sync, streaming and not) against the real server, the fake model and both stores:
a whole consultation to its final answer and a follow-up, answers by label, `/answer`, an
edited history, the model list, and every refusal in the OpenAI error shape."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openai import (
    APIError,
    APIStatusError,
    AsyncOpenAI,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    OpenAI,
    RateLimitError,
)
from openai._streaming import SSEDecoder
from PIL import Image as PILImage

from api.openai_compat.models import ModelChoice, choose, model_ids
from api.openai_compat.routes import conversation_key
from core.domain.round_markdown import IN_OWN_WORDS, WITH_OPTIONS
from fakes.model_server import FakeModelServer, image_parts, text_of
from tests.api_harness import RunningApi, api_settings, running_api
from tests.postgres import fresh_schema
from tests.waiting import until

REQUEST = "Which laptop should I buy?"
ADDRESS_CLIENT = "addr:127.0.0.1"
Messages = list[dict[str, Any]]


@pytest.fixture(params=["sqlite", "postgres"])
async def served(
    request: pytest.FixtureRequest, tmp_path: Any, model_server: FakeModelServer
) -> AsyncIterator[RunningApi]:
    """The API on SQLite, then on PostgreSQL, with the test's `api_settings` marker."""
    marker = request.node.get_closest_marker("api_settings")
    overrides = dict(marker.kwargs) if marker is not None else {}
    async with AsyncExitStack() as stack:
        if request.param == "postgres":
            overrides["database_url"] = await stack.enter_async_context(fresh_schema())
        settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url, **overrides)
        yield await stack.enter_async_context(running_api(settings))


def base_url(api: RunningApi) -> str:
    return str(api.client.make_url("/v1"))


def client(api: RunningApi, key: str = "unused") -> AsyncOpenAI:
    """The `openai` package's async client on the endpoint, without retries."""
    return AsyncOpenAI(base_url=base_url(api), api_key=key, max_retries=0)


async def ask(api: RunningApi, messages: Messages, **kw: Any) -> tuple[str, dict[str, Any]]:
    """One non-streaming completion: its content and its `consultation` field."""
    async with client(api) as openai:
        done = await openai.chat.completions.create(
            model=kw.pop("model", "consultation-3"), messages=messages, **kw
        )
    assert done.object == "chat.completion" and done.choices[0].message.role == "assistant"
    extra = done.model_extra or {}
    return done.choices[0].message.content or "", dict(extra["consultation"])


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def last_user_turn(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


async def stored(api: RunningApi, first: str, user_id: str | None = None) -> int:
    """How many consultations the store holds for the conversation starting with `first`."""
    key = conversation_key(ADDRESS_CLIENT, user_id, first)
    return len(await api.store.recent(key, 10))


async def test_a_three_round_consultation_reaches_its_final_answer_and_a_follow_up(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """Two rounds, then the final answer whose model request carries the original request,
    then a follow-up: each reply as a chat app shows it, one stored consultation."""
    api, model = served, model_server
    model.enqueue("What is your budget?")
    messages = [user(REQUEST)]
    content, state = await ask(api, messages)
    assert content == f"What is your budget?\n\n{IN_OWN_WORDS}"
    assert (state["round"], state["max_rounds"], state["final"]) == (1, 3, False)

    model.enqueue("Which city?")
    messages += [assistant(content), user("About 1000 euros")]
    content, state = await ask(api, messages)
    assert state["round"] == 2 and content.endswith(IN_OWN_WORDS)
    assert last_user_turn(model.requests[-1]) == "About 1000 euros"

    model.enqueue("Buy the ThinkPad X1.")
    messages += [assistant(content), user("Berlin")]
    content, state = await ask(api, messages)
    assert content.startswith("Buy the ThinkPad X1.") and state["final"] is True
    assert IN_OWN_WORDS not in content and WITH_OPTIONS not in content
    final_request = model.requests[-1]
    assert REQUEST in system_prompt(final_request)
    assert [m["content"] for m in final_request["messages"][1:] if m["role"] == "user"] == [
        REQUEST,
        "About 1000 euros",
        "Berlin",
    ]

    model.enqueue("Because of its keyboard.")
    messages += [assistant(content), user("Why that one?")]
    content, state = await ask(api, messages)
    assert content.startswith("Because of its keyboard.")
    assert state["follow_up"] == 1 and state["final"] is True
    assert await stored(api, REQUEST) == 1
    stats = await (await api.client.get("/api/stats")).json()
    assert (stats["today"]["started"], stats["today"]["completed"]) == (1, 1)


async def test_streaming_gives_exactly_the_content_of_a_plain_request(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The sync client streaming the same conversation as a plain request gets the same
    content: the role first, `finish_reason` last, then the usage chunk."""
    model_server.enqueue("What is your budget?")
    plain, _ = await ask(api, [user(REQUEST)], user="plain")
    model_server.enqueue("What is your budget?", chunk_size=3)

    def streamed() -> list[Any]:
        with OpenAI(base_url=base_url(api), api_key="unused", max_retries=0) as openai:
            stream = openai.chat.completions.create(
                model="consultation-3",
                messages=[user(REQUEST)],  # type: ignore[list-item]
                stream=True,
                stream_options={"include_usage": True},
                user="streamed",
            )
            return list(stream)

    chunks = await asyncio.to_thread(streamed)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain
    finished = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finished[-1] == "stop" and set(finished[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None

    model_server.enqueue("Buy the ThinkPad X1, it is light.", chunk_size=4)
    model_server.enqueue("Buy the ThinkPad X1, it is light.")
    history = [user(REQUEST), assistant(plain), user("1000 euros")]
    async with client(api) as openai:
        stream = await openai.chat.completions.create(
            model="consultation-2", messages=history, stream=True, user="streamed"
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    final, state = await ask(api, history, model="consultation-2", user="plain")
    assert state["final"] and final.startswith("Buy the ThinkPad X1, it is light.")
    assert "".join(pieces) == final


@pytest.mark.api_settings(llm_structured_questions="auto")
async def test_answers_by_label_reach_the_model_as_question_answer_lines(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A structured round shows its options as `1a)` items; a reply of labels answers by
    option, the words after them follow, as the terminal reads them."""
    api, model = served, model_server
    model.enqueue_round(
        "Two things first.",
        [("What is your budget?", ["< 500", "500–1000"]), ("Which city?", ["Berlin", "Paris"])],
    )
    messages = [user(REQUEST)]
    content, _ = await ask(api, messages)
    assert content == (
        "Two things first.\n\n1. What is your budget?\n   - 1a) < 500\n   - 1b) 500–1000\n"
        f"2. Which city?\n   - 2a) Berlin\n   - 2b) Paris\n\n{WITH_OPTIONS}"
    )
    model.enqueue_round("One more.", [("Gaming?", [])])
    messages += [assistant(content), user("1b 2a near the station")]
    await ask(api, messages)
    assert last_user_turn(model.requests[-1]) == (
        "1. What is your budget? — 500–1000\n2. Which city? — Berlin\nnear the station"
    )
    calls = len(model.requests)
    with pytest.raises(BadRequestError) as refused:
        await ask(api, [*messages[:-1], user("1c")])
    assert "no option c" in refused.value.message and len(model.requests) == calls


async def test_answer_gives_the_final_answer_now(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """`/answer` after the first of five rounds is answered by the final answer, asked for
    as such, and the next message is a follow-up."""
    api, model = served, model_server
    model.enqueue("What is your budget?")
    messages = [user(REQUEST)]
    content, _ = await ask(api, messages, model="consultation-5")
    model.enqueue("Buy the ThinkPad X1.")
    messages += [assistant(content), user("/answer")]
    content, state = await ask(api, messages, model="consultation-5")
    assert state["final"] is True and state["round"] == 2
    assert content.startswith("Buy the ThinkPad X1.")
    assert REQUEST in system_prompt(model.requests[-1])
    model.enqueue("It is light.")
    _, state = await ask(api, [*messages, assistant(content), user("Why?")], model="consultation-5")
    assert state["follow_up"] == 1


async def test_an_edited_or_branched_history_is_answered_as_sent(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A client's history wins: an answer branched from the first round, then another
    branch at the same point, then an edited first question are each answered from what
    the client sent, never from what the server kept of another branch."""
    api, model = served, model_server
    model.enqueue("What is your budget?")
    content, _ = await ask(api, [user(REQUEST)], model="consultation-2")
    model.enqueue("Buy the Framework.")
    answer, state = await ask(
        api, [user(REQUEST), assistant(content), user("2000 euros")], model="consultation-2"
    )
    assert answer.startswith("Buy the Framework.") and state["final"]
    assert await stored(api, REQUEST) == 1  # the stored consultation went on

    model.enqueue("Buy the Pixelbook.")
    answer, _ = await ask(
        api, [user(REQUEST), assistant(content), user("500 euros")], model="consultation-2"
    )
    assert "500 euros" in json.dumps(model.requests[-1])
    assert "2000 euros" not in json.dumps(model.requests[-1])
    assert await stored(api, REQUEST) == 2  # rebuilt from the other branch

    edited = "Which phone should I buy?"
    model.enqueue("Buy the Pixel.")
    answer, state = await ask(
        api, [user(edited), assistant(content), user("500 euros")], model="consultation-2"
    )
    assert answer.startswith("Buy the Pixel.") and state["final"]
    final_request = model.requests[-1]
    assert edited in system_prompt(final_request) and REQUEST not in json.dumps(final_request)


async def test_the_models_are_listed_and_an_unknown_one_is_404(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`consultation` and one id per persona are listed; an id that names no persona or a
    round count over the limit is 404 `model_not_found`, the model never called."""
    async with client(api) as openai:
        listed = [model.id async for model in openai.models.list()]
        assert listed[0] == "consultation" and "consultation-lawyer" in listed
        assert (await openai.models.retrieve("consultation-lawyer-3")).owned_by
        for wrong in ("gpt-4o", "consultation-astrologer", "consultation-99"):
            with pytest.raises(NotFoundError) as missing:
                await openai.chat.completions.create(model=wrong, messages=[user(REQUEST)])
            assert missing.value.code == "model_not_found"
        with pytest.raises(NotFoundError):
            await openai.models.retrieve("gpt-4o")
    assert model_server.requests == []


@pytest.mark.api_settings(api_token="s3cret-token")
async def test_no_or_a_wrong_token_is_401(api: RunningApi, model_server: FakeModelServer) -> None:
    """Without the API's bearer token, or with another, every `/v1/` route is 401 in the
    OpenAI shape; with it the model list is served."""
    async with client(api, "wrong") as openai:
        with pytest.raises(AuthenticationError) as refused:
            await openai.chat.completions.create(model="consultation", messages=[user("x")])
        assert refused.value.code == "invalid_api_key"
        with pytest.raises(AuthenticationError):
            await openai.models.list()
    response = await api.client.post(
        "/v1/chat/completions", json={"model": "consultation", "messages": [user("x")]}
    )
    assert response.status == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    assert (await response.json())["error"]["code"] == "invalid_api_key"
    async with client(api, "s3cret-token") as openai:
        listed = [m.id async for m in openai.models.list()]
    assert listed[0] == "consultation"
    assert model_server.requests == []


@pytest.mark.api_settings(user_daily_consultation_limit=1)
async def test_a_quota_is_429_in_the_openai_shape_and_stores_nothing(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A `user` past the consultations of the day is 429 `insufficient_quota` with
    `Retry-After`; nothing of the refused conversation is stored or sent to the model, and
    a refused regeneration leaves the stored one as it was; an edited conversation that
    already holds replies is no new consultation."""
    api = served
    model_server.enqueue("What is your budget?")
    content, _ = await ask(api, [user(REQUEST)], user="alice")
    calls = len(model_server.requests)
    with pytest.raises(RateLimitError) as refused:
        await ask(api, [user("Another question")], user="alice")
    error = refused.value
    assert error.status_code == 429 and error.code == "insufficient_quota"
    assert int(error.response.headers["Retry-After"]) >= 1
    assert isinstance(error.body, dict) and error.body["type"] == "insufficient_quota"
    with pytest.raises(RateLimitError):  # its first reply regenerated: a new consultation
        await ask(api, [user(REQUEST)], user="alice")
    assert len(model_server.requests) == calls
    assert await stored(api, "Another question", "alice") == 0
    model_server.enqueue("Buy the ThinkPad.")
    _, state = await ask(api, [user(REQUEST), assistant(content), user("1000")], user="alice")
    assert state["round"] == 2 and await stored(api, REQUEST, "alice") == 1  # left as it was
    model_server.enqueue("Buy the Framework.")
    branch = [user(REQUEST), assistant(f"Your budget?\n\n{IN_OWN_WORDS}"), user("1000 euros")]
    _, state = await ask(api, branch, user="alice")
    assert state["round"] == 2  # a history with replies stored anew is no new start


@pytest.mark.api_settings(api_rate_limit_per_minute=1)
async def test_the_rate_limit_is_429_with_retry_after(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Past API_RATE_LIMIT_PER_MINUTE a request is 429 `rate_limit_exceeded`, `Retry-After`."""
    async with client(api) as openai:
        await openai.models.list()
        with pytest.raises(RateLimitError) as refused:
            await openai.models.list()
    assert refused.value.code == "rate_limit_exceeded"
    assert int(refused.value.response.headers["Retry-After"]) >= 1


def consultations(api: RunningApi) -> int:
    with sqlite3.connect(api.settings.db_path) as db:
        return int(db.execute("SELECT COUNT(*) FROM consultations").fetchone()[0])


HOSTILE: list[tuple[str, Any, str]] = [
    ("10,000 messages", {"messages": [user("x")] * 10_000}, "messages"),
    ("a 5 MB message", {"messages": [user("x" * 5_000_000)]}, "messages[0].content"),
    ("a wrong role", {"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    (
        "a tool message",
        {"messages": [user("x"), {"role": "tool", "content": "4", "tool_call_id": "c"}]},
        "messages[1].role",
    ),
    (
        "tool calls",
        {
            "messages": [
                user("x"),
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
                user("y"),
            ]
        },
        "messages[1].role",
    ),
    ("a NUL", {"messages": [user("Which\x00laptop?")]}, "messages[0].content"),
    ("an image", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, ""),
    ("no messages", {"messages": []}, "messages"),
    ("an assistant first", {"messages": [assistant("hi"), user("x")]}, "messages"),
    ("an assistant last", {"messages": [user("x"), assistant("hi")]}, "messages"),
    ("rounds out of range", {"messages": [user("x")], "metadata": {"rounds": "99"}}, ""),
    ("a long user", {"messages": [user("x")], "user": "u" * 65}, "user"),
    ("n of 2", {"messages": [user("x")], "n": 2}, "n"),
]


@pytest.mark.parametrize(("case", "body", "param"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_a_hostile_body_is_a_precise_400_and_stores_nothing(
    api: RunningApi, model_server: FakeModelServer, case: str, body: dict[str, Any], param: str
) -> None:
    """Each body the endpoint cannot take is 400 in the OpenAI shape naming the field at
    fault; the model is not called and nothing is stored."""
    raw = json.dumps({"model": "consultation", **body}).encode()
    response = await api.client.post(
        "/v1/chat/completions",
        data=io.BytesIO(raw),
        headers={"Content-Type": "application/json", "Content-Length": str(len(raw))},
    )
    assert response.status == 400, case
    error = (await response.json())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] is not None and error["param"].startswith(param)
    assert model_server.requests == [] and consultations(api) == 0


async def test_a_body_that_is_not_json_is_400(api: RunningApi) -> None:
    """A body that is not JSON, or JSON that is not an object, is 400 in the OpenAI shape."""
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        response = await api.client.post("/v1/chat/completions", data=raw)
        assert response.status == 400
        assert (await response.json())["error"]["type"] == "invalid_request_error"


async def test_an_unknown_v1_route_is_404_in_the_openai_shape(api: RunningApi) -> None:
    """`/v1/embeddings` is no route here: 404 with the OpenAI error object."""
    response = await api.client.post("/v1/embeddings", json={})
    assert response.status == 404
    assert (await response.json())["error"]["code"] == "unknown_url"


async def test_the_clients_instructions_join_the_persona_the_model_names(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A client's system message is added after the persona `consultation-lawyer` names,
    never instead of it; `metadata.rounds` sets the rounds over the model id's count."""
    api, model = served, model_server
    model.enqueue("Which country?")
    messages = [{"role": "system", "content": "Answer in haiku."}, user(REQUEST)]
    _, state = await ask(
        api, messages, model="consultation-lawyer-3", metadata={"rounds": "4"}, user="bob"
    )
    prompt = system_prompt(model.requests[-1])
    assert "experienced lawyer" in prompt and "Answer in haiku." in prompt
    assert prompt.index("experienced lawyer") < prompt.index("Answer in haiku.")
    assert state["max_rounds"] == 4


async def test_a_reply_that_failed_is_answered_when_the_client_retries(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A model failure is 5xx in the OpenAI shape, streamed or not; the same history sent
    again answers the same stored turn: one consultation, the request sent once."""
    api, model = served, model_server
    model.enqueue(status=500)
    with pytest.raises(APIStatusError) as failed:
        await ask(api, [user(REQUEST)])
    assert failed.value.status_code >= 500 and isinstance(failed.value.body, dict)
    model.enqueue(status=500)
    async with client(api) as openai:
        with pytest.raises(APIStatusError):
            await openai.chat.completions.create(
                model="consultation-3", messages=[user(REQUEST)], stream=True
            )
    model.enqueue("What is your budget?")
    content, state = await ask(api, [user(REQUEST)])
    assert content.startswith("What is your budget?") and state["round"] == 1
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == [REQUEST]
    assert await stored(api, REQUEST) == 1


@pytest.mark.api_settings(llm_structured_questions="auto", followup_limit=1)
async def test_a_ready_model_answers_and_past_the_follow_ups_a_new_consultation_starts(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """A round saying it knows enough gives the final answer in round 1 of 3; the next
    message is its follow-up; after the last follow-up the next message is a new
    consultation's request, streamed rounds showing what plain ones do."""
    api, model = served, model_server
    model.enqueue_round("", [], True)
    model.enqueue("Buy the ThinkPad X1.")
    messages = [user(REQUEST)]
    content, state = await ask(api, messages)
    assert state["final"] and state["round"] == 1 and state["follow_ups_left"] == 1
    model.enqueue("It is light.")
    messages += [assistant(content), user("Why?")]
    content, state = await ask(api, messages)
    assert state["follow_up"] == 1 and state["follow_ups_left"] == 0
    model.enqueue_round("About phones:", [("Which budget?", ["< 300", "300+"])], chunk_size=5)
    messages += [assistant(content), user("Which phone should I buy?")]
    async with client(api) as openai:
        stream = await openai.chat.completions.create(
            model="consultation-3", messages=messages, stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert streamed.endswith(WITH_OPTIONS) and "   - 1b) 300+" in streamed
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == ["Which phone should I buy?"]


def validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    )


async def test_the_openapi_document_describes_the_routes_and_real_replies_match(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The `/v1/` routes are in the document; a real request, reply, chunk, model list and
    error validate against their schemas."""
    document = await (await api.client.get("/api/openapi.json")).json()
    assert {"/v1/models", "/v1/models/{model_id}", "/v1/chat/completions"} <= set(document["paths"])
    for name, schema in document["components"]["schemas"].items():
        if name.startswith("OpenAI"):
            Draft202012Validator.check_schema(schema)
    body = {"model": "consultation-2", "messages": [user(REQUEST)], "user": "carol"}
    validator(document, "OpenAIChatRequest").validate(body)
    model_server.enqueue("What is your budget?")
    response = await api.client.post("/v1/chat/completions", json=body)
    validator(document, "OpenAIChatCompletion").validate(await response.json())
    model_server.enqueue("What is your budget?")
    response = await api.client.post(
        "/v1/chat/completions",
        json={**body, "user": "dave", "stream": True, "stream_options": {"include_usage": True}},
    )
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    assert events[-1].data == "[DONE]" and all(e.event is None for e in events)
    for event in events[:-1]:
        validator(document, "OpenAIChatCompletionChunk").validate(event.json())
    listed = await (await api.client.get("/v1/models")).json()
    validator(document, "OpenAIModelList").validate(listed)
    assert document["components"]["schemas"]["OpenAIChatRequest"]["properties"]["model"][
        "description"
    ].startswith("One of `consultation`")
    missing = await api.client.post("/v1/chat/completions", json={**body, "model": "gpt-4o"})
    validator(document, "OpenAIError").validate(await missing.json())


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def png() -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (4, 4), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.api_settings(llm_vision=True)
async def test_files_of_the_last_message_are_read_as_the_apis_attachments(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A document part's text reaches the model in its block and a photo as an image part;
    in the next request the same files, sent again with the history, are not read again, and
    the final round's request carries the document with the original request."""
    notes = b"Budget: 1200 EUR\n"
    parts = [
        {"type": "text", "text": REQUEST},
        {
            "type": "file",
            "file": {"filename": "notes.txt", "file_data": data_url(notes, "text/plain")},
        },
        {"type": "image_url", "image_url": {"url": data_url(png(), "image/png")}},
    ]
    model_server.enqueue("Which city?")
    content, _ = await ask(api, [{"role": "user", "content": parts}], model="consultation-2")
    sent = model_server.requests[-1]["messages"][-1]
    assert '<document name="notes.txt">\nBudget: 1200 EUR\n</document>' in text_of(sent["content"])
    assert len(image_parts(sent)) == 1
    model_server.enqueue("Buy the ThinkPad.")
    history = [{"role": "user", "content": parts}, assistant(content), user("Berlin")]
    await ask(api, history, model="consultation-2")
    last = model_server.requests[-1]["messages"]
    assert sum(len(image_parts(m)) for m in last) == 0
    assert text_of(last[-1]["content"]) == "Berlin"
    assert await stored(api, REQUEST) == 1
    assert '[document "notes.txt" attached]' in system_prompt(model_server.requests[-1])


@pytest.mark.parametrize(
    ("part", "why"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.org/x.png"}}, "data: URL"),
        ({"type": "file", "file": {"file_data": "data:text/plain;base64,@@@@"}}, "base64"),
        (
            {
                "type": "file",
                "file": {
                    "filename": "x.exe",
                    "file_data": data_url(b"MZ\x90", "application/x-msdownload"),
                },
            },
            "not taken",
        ),
    ],
)
async def test_a_file_the_endpoint_cannot_take_is_400_and_stores_nothing(
    api: RunningApi, model_server: FakeModelServer, part: dict[str, Any], why: str
) -> None:
    """A remote image, data that is not base64 or a kind of file the deployment does not
    take is refused before anything is stored or sent to the model."""
    body = {"model": "consultation", "messages": [{"role": "user", "content": [part]}]}
    response = await api.client.post("/v1/chat/completions", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and why in error["message"], error
    assert model_server.requests == [] and consultations(api) == 0


def test_a_model_id_names_a_persona_and_maybe_rounds() -> None:
    """`consultation[-role][-N]` chooses a known persona and rounds within the limit;
    anything else chooses nothing."""
    roles = {"lawyer", "doctor", "tax-advisor"}
    assert choose("consultation", roles, 10) == ModelChoice("consultation", None, None)
    assert choose("consultation-3", roles, 10) == ModelChoice("consultation-3", None, 3)
    assert choose("consultation-lawyer", roles, 10) == ModelChoice(
        "consultation-lawyer", "lawyer", None
    )
    assert choose("consultation-tax-advisor-2", roles, 10) == ModelChoice(
        "consultation-tax-advisor-2", "tax-advisor", 2
    )
    for wrong in ("consultation-0", "consultation-11", "consultation-", "consultation-x", "gpt"):
        assert choose(wrong, roles, 10) is None, wrong
    assert choose("consultation-lawyer-٣", roles, 10) is None  # only ASCII digits count
    assert model_ids(roles) == [
        "consultation",
        "consultation-doctor",
        "consultation-lawyer",
        "consultation-tax-advisor",
    ]


@pytest.mark.api_settings(memory_enabled=True)
async def test_a_users_completed_consultation_is_remembered_for_their_next(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """With `user`, a completed consultation's facts are kept for that user, read back at
    `/api/users/{user}/memory`, and sent in their next consultation."""
    model_server.enqueue("Use drip irrigation.")
    model_server.enqueue("Lives in Riga\nGrows tomatoes")
    _, state = await ask(
        api, [user("I live in Riga and grow tomatoes.")], model="consultation-1", user="u-1"
    )
    assert state["final"]

    async def kept() -> bool:
        body = await (await api.client.get("/api/users/u-1/memory")).json()
        return len(body["facts"]) == 2

    await until(kept, "u-1 has two facts")
    model_server.enqueue("Next answer.")
    model_server.enqueue("none")
    await ask(api, [user("What now?")], model="consultation-1", user="u-1")
    prompt = text_of(model_server.requests[2]["messages"][0]["content"])
    assert "- Lives in Riga" in prompt


async def test_a_regenerated_reply_is_a_new_answer_from_the_same_history(
    served: RunningApi, model_server: FakeModelServer
) -> None:
    """The same conversation sent again after it was answered (a chat app's regenerate) is
    answered anew from what it holds, never replayed, and stored beside the first."""
    api, model = served, model_server
    model.enqueue("What is your budget?")
    content, _ = await ask(api, [user(REQUEST)], model="consultation-2")
    history = [user(REQUEST), assistant(content), user("1000 euros")]
    model.enqueue("Buy the ThinkPad.")
    first, _ = await ask(api, history, model="consultation-2")
    model.enqueue("Buy the Framework.")
    again, state = await ask(api, history, model="consultation-2")
    assert first.startswith("Buy the ThinkPad.") and again.startswith("Buy the Framework.")
    assert state["final"] and state["round"] == 2
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == [REQUEST, "1000 euros"]
    assert await stored(api, REQUEST) == 2


async def test_a_configured_persona_is_a_model_of_its_own(
    tmp_path: Any, model_server: FakeModelServer
) -> None:
    """A persona in PROMPTS_DIR/roles is listed as `consultation-<key>`, and choosing it
    sends its text to the model."""
    roles = tmp_path / "prompts" / "roles"
    roles.mkdir(parents=True)
    (roles / "gardener.mustache").write_text(
        "{{! title: Gardener }}\nYour persona: a patient gardener.\n"
    )
    settings = api_settings(
        tmp_path / "api.sqlite3", model_server.base_url, prompts_dir=tmp_path / "prompts"
    )
    async with running_api(settings) as api, client(api) as openai:
        listed = [model.id async for model in openai.models.list()]
        assert "consultation-gardener" in listed and "consultation-lawyer" in listed
        model_server.enqueue("Which soil?")
        await openai.chat.completions.create(
            model="consultation-gardener", messages=[user("Tomatoes?")]
        )
    assert "a patient gardener" in system_prompt(model_server.requests[-1])


async def test_a_final_answer_failing_mid_stream_ends_in_an_error_and_can_be_asked_again(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A final answer streamed as it comes breaks off after some text: the client reads that
    text, then the stream's error object (the `openai` package raises it), and asking again
    with the same history gets the whole answer, stored once."""
    model_server.enqueue("What is your budget?")
    round_, _ = await ask(api, [user(REQUEST)], model="consultation-2", user="mid")
    history = [user(REQUEST), assistant(round_), user("1000 euros")]
    answer = "Buy the ThinkPad X1, it is light and fast."
    event = b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n'
    broken = b'data: {"error": {"message": "scripted mid-stream failure"}}\n\n'
    pieces_sent = [event % answer[i : i + 8].encode() for i in range(0, 24, 8)]
    model_server.enqueue(raw_events=[*pieces_sent, broken], chunk_delay=0.05)
    pieces: list[str] = []

    async def read_all() -> None:
        async with client(api) as openai:
            stream = await openai.chat.completions.create(
                model="consultation-2", messages=history, stream=True, user="mid"
            )
            async for chunk in stream:
                if chunk.choices:
                    pieces.append(chunk.choices[0].delta.content or "")

    with pytest.raises(APIError):
        await read_all()
    assert "".join(pieces).startswith("Buy the ThinkPad X1")

    model_server.enqueue(answer)
    final, state = await ask(api, history, model="consultation-2", user="mid")
    assert state["final"] and final.startswith(answer.strip())
    assert await stored(api, REQUEST, "mid") == 1
