"""The fake model server's habits with structured output, seen through the real openai SDK:
the default clarifying round, refusals of json_schema, prose instead of JSON, JSON cut by the
token limit, and scripted rounds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from core.domain.clarifying import ROUND_SCHEMA, SCHEMA_NAME, ClarifyingRound, Question, parse_reply
from core.domain.facts import FACTS_SCHEMA
from core.domain.facts import SCHEMA_NAME as FACTS_SCHEMA_NAME
from core.prompting.prompts import PromptLibrary
from fakes.model_server import (
    FORMAT_ERRORS,
    FakeModelServer,
    echo_reply,
    echo_round,
    prose_round,
    response_format_of,
    schema_asked,
)

QUESTION = "I want to   start running.\nWhere do I begin?"
ROUND_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": ROUND_SCHEMA},
}
ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "strict": False, "schema": {"type": "object"}},
}


@pytest.fixture
async def client(model_server: FakeModelServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """The raw openai SDK on the fake server, without retries."""
    sdk = openai.AsyncOpenAI(base_url=model_server.base_url, api_key="x", max_retries=0)
    yield sdk
    await sdk.close()


def body(response_format: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
    }
    if response_format is not None:
        request["response_format"] = response_format
    return request


async def ask(
    client: openai.AsyncOpenAI, response_format: dict[str, Any] | None = None
) -> tuple[str, str | None]:
    """The streamed reply's text and its finish_reason."""
    stream = await client.chat.completions.create(**body(response_format))
    text, finish = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


async def test_the_default_round_reads_as_the_echo_text(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """Unscripted, a clarifying_round request gets valid round JSON whose one question is the
    echo text on one line, so the engine shows the echo."""
    text, finish = await ask(client, ROUND_FORMAT)

    assert text == echo_round(body(ROUND_FORMAT))
    assert json.loads(text) == {
        "preamble": "",
        "questions": [
            {"text": "Reply to: I want to start running. Where do I begin?", "options": []}
        ],
        "ready_for_final": False,
    }
    found = parse_reply(text)
    assert found is not None
    assert found.text == " ".join(echo_reply(body()).split())
    assert finish == "stop"
    assert response_format_of(model_server.requests[0]) == SCHEMA_NAME


@pytest.mark.parametrize(
    "response_format",
    [None, {"type": "json_object"}, ANSWER_FORMAT],
    ids=["free text", "json_object", "answer schema"],
)
async def test_other_requests_keep_the_echo_text(
    model_server: FakeModelServer, client: openai.AsyncOpenAI, response_format: Any
) -> None:
    """Without a clarifying_round schema, the default reply is the echo text as it was."""
    text, _ = await ask(client, response_format)

    assert text == echo_reply(body()) == f"Reply to: {QUESTION}"


async def test_a_custom_default_reply_becomes_the_rounds_question(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """A test's own default reply is shaped as a round too; one that is JSON already is sent
    as it is."""
    model_server.default_reply = lambda _: "Which  distance?"
    shaped, _ = await ask(client, ROUND_FORMAT)
    own = '{"preamble": "Hi", "questions": [], "ready_for_final": true}'
    model_server.default_reply = lambda _: own
    kept, _ = await ask(client, ROUND_FORMAT)

    assert parse_reply(shaped) == ClarifyingRound("", (Question("Which distance?"),))
    assert kept == own == prose_round(own)


@pytest.mark.parametrize("server", sorted(k for k, v in FORMAT_ERRORS.items() if v[0]))
async def test_refuse_format_refuses_every_json_schema_request(
    model_server: FakeModelServer, client: openai.AsyncOpenAI, server: str
) -> None:
    """A server without structured output refuses each json_schema request with its own
    status and body naming response_format, and still answers the others in order."""
    model_server.refuse_format = server
    model_server.enqueue("plain")
    model_server.enqueue("object")
    status, message, _ = FORMAT_ERRORS[server]

    for _ in range(2):
        with pytest.raises(openai.APIStatusError) as refused:
            await ask(client, ROUND_FORMAT)
        assert refused.value.status_code == status
        refusal = refused.value.body
        assert isinstance(refusal, dict)
        assert "response_format" in json.dumps(refusal)
        assert (refusal.get("message") or refusal["detail"][0]["msg"]) == message
    with pytest.raises(openai.APIStatusError):
        await ask(client, ANSWER_FORMAT)
    assert (await ask(client))[0] == "plain"
    assert (await ask(client, {"type": "json_object"}))[0] == "object"

    assert [response_format_of(r) for r in model_server.requests] == [
        SCHEMA_NAME,
        SCHEMA_NAME,
        "answer",
        None,
        "json_object",
    ]


async def test_fastapis_422_keeps_its_words_out_of_the_sdks_message(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """FastAPI's validation body has no error.message: the SDK's message is the status
    alone, and response_format is named only in the body's detail."""
    model_server.refuse_format = "fastapi"

    with pytest.raises(openai.UnprocessableEntityError) as refused:
        await ask(client, ROUND_FORMAT)

    assert refused.value.message == "Error code: 422"
    assert refused.value.body == {
        "detail": [
            {
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": FORMAT_ERRORS["fastapi"][1],
                "input": "json_schema",
            }
        ]
    }


async def test_a_hanging_up_server_drops_every_json_schema_request(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """llama-cpp-python's habit: the json_schema request ends without a response, each time,
    while a free-text request is answered."""
    model_server.refuse_format = "llama-cpp-python"

    for _ in range(2):
        with pytest.raises(openai.APIConnectionError):
            await ask(client, ROUND_FORMAT)
    text, _ = await ask(client)

    assert text == echo_reply(body())
    assert len(model_server.requests) == 3


async def test_llama_cpp_pythons_server_refuses_json_schema_but_takes_json_object_with_it(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """llama-cpp-python's server (its source's habit): json_schema is a 500 whose words name
    response_format; json_object with the round's schema gets the default round, with the
    facts' schema no facts, and without a schema the echo text."""
    model_server.refuse_format = "llama-cpp-python-500"

    with pytest.raises(openai.InternalServerError) as refused:
        await ask(client, ROUND_FORMAT)
    as_object, _ = await ask(client, {"type": "json_object", "schema": ROUND_SCHEMA})
    facts, _ = await ask(client, {"type": "json_object", "schema": FACTS_SCHEMA})
    plain, _ = await ask(client, {"type": "json_object"})

    assert "'response_format', 'type'" in refused.value.message
    assert as_object == echo_round(body()) and json.loads(facts) == {"facts": []}
    assert plain == echo_reply(body())
    asked = [schema_asked(r) for r in model_server.requests]
    assert asked == [SCHEMA_NAME, SCHEMA_NAME, FACTS_SCHEMA_NAME, None]


async def test_a_scripted_format_error_refuses_once(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """`enqueue(format_error=...)` is one refusal in the queue; the next request is answered."""
    model_server.enqueue(format_error="openai")

    with pytest.raises(openai.BadRequestError) as refused:
        await ask(client, ROUND_FORMAT)
    text, _ = await ask(client, ROUND_FORMAT)

    assert refused.value.body == {
        "message": FORMAT_ERRORS["openai"][1],
        "type": "invalid_request_error",
        "param": "response_format",
        "code": "400",
    }
    assert text == echo_round(body(ROUND_FORMAT))
    with pytest.raises(KeyError):
        model_server.enqueue(format_error="no-such-server")


async def test_ignore_format_answers_prose(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """A server ignoring response_format answers the echo text, and scripted text unchanged."""
    model_server.ignore_format = True
    model_server.enqueue("Tell me more about your knees.")

    scripted, _ = await ask(client, ROUND_FORMAT)
    default, _ = await ask(client, ROUND_FORMAT)

    assert scripted == "Tell me more about your knees."
    assert default == echo_reply(body())
    assert parse_reply(default) is None


async def test_a_round_cut_by_the_token_limit_ends_with_length(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """`enqueue_round(..., cut_at=n)` streams the first n characters of the round's JSON with
    finish_reason length; the complete question before the cut can still be read."""
    questions = [("How far can you run now?", ["1 km", "5 km"]), ("Any injuries?", [])]
    full = model_server.enqueue_round("First:", questions)
    cut = model_server.enqueue_round("First:", questions, cut_at=full.index("Any") + 3)

    whole, whole_finish = await ask(client, ROUND_FORMAT)
    text, finish = await ask(client, ROUND_FORMAT)

    assert (whole, whole_finish) == (full, "stop")
    assert (text, finish) == (cut, "length")
    assert cut == full[: len(cut)] and not cut.endswith("}")
    found = parse_reply(text, cut_off=True)
    assert found is not None
    assert found.questions == (Question("How far can you run now?", ("1 km", "5 km")),)


async def test_enqueue_round_round_trips(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """A scripted round, its questions given as tuples or as JSON objects, is read back by
    the engine as the same round."""
    model_server.enqueue_round(
        "Before I plan:",
        [("Your goal?", ("Distance", "Speed")), {"text": "Days per week?", "options": ["3"]}],
    )
    model_server.enqueue_round("", [], ready_for_final=True)

    asked, _ = await ask(client, ROUND_FORMAT)
    ready, _ = await ask(client, ROUND_FORMAT)

    assert parse_reply(asked) == ClarifyingRound(
        "Before I plan:",
        (Question("Your goal?", ("Distance", "Speed")), Question("Days per week?", ("3",))),
    )
    assert parse_reply(ready) == ClarifyingRound("", (), ready_for_final=True)


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [
        ({}, None),
        ({"response_format": "json_schema"}, None),
        ({"response_format": {"type": "json_schema"}}, "json_schema"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": 7}}}, "json_schema"),
        ({"response_format": {"type": ["x"]}}, None),
        ({"response_format": {"type": "text"}}, "text"),
    ],
)
def test_response_format_of_reads_forged_formats_without_failing(
    request_body: dict[str, Any], expected: str | None
) -> None:
    """A malformed response_format reads as its type or nothing, never an exception."""
    assert response_format_of(request_body) == expected


async def test_a_malformed_response_format_gets_the_echo_text(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """A json_schema without a usable name is not a clarifying round: the echo text answers,
    and refuse_format still refuses it as json_schema."""
    forged = {"type": "json_schema", "json_schema": {"name": ["clarifying_round"]}}

    text, _ = await ask(client, forged)
    model_server.refuse_format = "openai"
    with pytest.raises(openai.BadRequestError):
        await ask(client, forged)

    assert text == echo_reply(body())


async def test_a_facts_request_asked_in_text_gets_none_and_others_their_echo(
    model_server: FakeModelServer, client: openai.AsyncOpenAI
) -> None:
    """The users the fakes play state no lasting facts: an extraction asked one fact a line
    is answered "none", as a model would; any other system message leaves the echo."""
    instruction = PromptLibrary().extract_facts(["Lives in Riga"], structured=False)
    system = [{"role": "system", "content": instruction}]
    stream = await client.chat.completions.create(
        model="m", messages=[*system, {"role": "user", "content": QUESTION}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "none"
    other = [{"role": "system", "content": "You are an expert."}]
    stream = await client.chat.completions.create(
        model="m", messages=[*other, {"role": "user", "content": QUESTION}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text != "none" and QUESTION in text
