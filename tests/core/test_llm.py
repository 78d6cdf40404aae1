"""OpenAICompleter against the fake OpenAI-compatible server, through the real openai SDK."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from core.domain.consultation import Usage
from core.domain.errors import ConfigError, ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.llm.llm import OpenAICompleter
from fakes.model_server import CONTEXT_ERRORS, FakeModelServer
from tests.wires import Transport, wire_for

USER = [{"role": "user", "content": "How do I brew tea?"}]


def make_completer(
    server: FakeModelServer,
    transport: Transport,
    *,
    timeout: float = 5.0,
    max_retries: int = 0,
    **kwargs: object,
) -> OpenAICompleter:
    return OpenAICompleter(
        api_key="test-key",
        base_url=server.base_url,
        timeout=timeout,
        max_retries=max_retries,
        wire=wire_for(transport, timeout),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(params=["httpx", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> Transport:
    """Every behaviour holds on both paths: the wire (production's) and the SDK."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def completer(
    model_server: FakeModelServer, transport: Transport
) -> AsyncIterator[OpenAICompleter]:
    completer = make_completer(model_server, transport)
    yield completer
    await completer.close()


async def test_deltas_arrive_in_order_and_make_the_text(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Streamed pieces reach on_delta in order and concatenate to the completion text."""
    text = "Заварите чай 🍵 при 90 °C, три минуты. " * 5
    model_server.enqueue(text, chunk_size=7)
    seen: list[str] = []

    async def on_delta(piece: str) -> None:
        seen.append(piece)

    result = await completer.complete(CompletionRequest(USER, "test-model"), on_delta)

    assert result.text == text
    assert "".join(seen) == text
    assert len(seen) > 1
    assert result.finish_reason == "stop"
    assert result.model == "test-model"


async def test_every_call_streams_with_usage(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The request asks for a stream with usage; the usage of the last chunk is kept."""
    model_server.enqueue(
        "Short.", usage={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    )

    result = await completer.complete(CompletionRequest(USER, "m"))

    assert result.usage == Usage(11, 3)
    body = model_server.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == USER


async def test_provider_extras_are_kept(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Unknown top-level chunk fields such as Perplexity's citations end up in extras."""
    citations = ["https://example.org/tea", "https://example.org/water"]
    model_server.enqueue(
        "See sources.", extras={"citations": citations, "search_results": [{"title": "Tea"}]}
    )

    result = await completer.complete(CompletionRequest(USER, "sonar"))

    assert result.extras["citations"] == citations
    assert result.extras["search_results"] == [{"title": "Tea"}]


async def test_options_reach_the_server(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """extra_body is merged over the defaults; max_tokens and JSON mode are sent."""
    completer = make_completer(
        model_server, transport, default_extra_body={"disable_search": False, "search_mode": "web"}
    )
    model_server.enqueue('{"ok": true}')
    request = CompletionRequest(
        USER, "sonar", max_tokens=123, json_mode=True, extra_body={"disable_search": True}
    )
    try:
        await completer.complete(request)
    finally:
        await completer.close()

    body = model_server.requests[0]
    assert body["disable_search"] is True
    assert body["search_mode"] == "web"
    assert body["max_tokens"] == 123
    assert body["response_format"] == {"type": "json_object"}


async def test_plain_request_sends_no_optional_fields(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Without options, no max_tokens, response_format or provider fields are sent."""
    await completer.complete(CompletionRequest(USER, "m"))

    body = model_server.requests[0]
    assert not {"max_tokens", "response_format", "disable_search"} & body.keys()


async def test_length_finish_reason_is_reported(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A reply cut by the token limit reports finish_reason "length"."""
    model_server.enqueue("The answer is cut", finish_reason="length")

    result = await completer.complete(CompletionRequest(USER, "m", max_tokens=5))

    assert (result.text, result.finish_reason) == ("The answer is cut", "length")


async def test_server_errors_are_retried_by_the_sdk(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """Two 500s then a success succeed with max_retries=2."""
    completer = make_completer(model_server, transport, max_retries=2)
    model_server.enqueue(status=500)
    model_server.enqueue(status=500)
    model_server.enqueue("Third time lucky.")
    try:
        result = await completer.complete(CompletionRequest(USER, "m"))
    finally:
        await completer.close()

    assert result.text == "Third time lucky."
    assert len(model_server.requests) == 3


async def test_persistent_server_error_is_unavailable(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """5xx after every retry becomes ModelError(unavailable)."""
    completer = make_completer(model_server, transport, max_retries=2)
    for _ in range(3):
        model_server.enqueue(status=503)
    try:
        with pytest.raises(ModelError) as caught:
            await completer.complete(CompletionRequest(USER, "m"))
    finally:
        await completer.close()

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE
    assert len(model_server.requests) == 3


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, ModelErrorKind.RATE_LIMITED),
        (400, ModelErrorKind.REJECTED),
        (422, ModelErrorKind.REJECTED),
        (401, ModelErrorKind.MISCONFIGURED),
        (403, ModelErrorKind.MISCONFIGURED),
        (404, ModelErrorKind.MISCONFIGURED),
    ],
)
async def test_http_errors_map_to_kinds(
    model_server: FakeModelServer, completer: OpenAICompleter, status: int, kind: ModelErrorKind
) -> None:
    """429 is rate_limited; 401, 403 and 404 are a configuration problem (no retry can help);
    other 4xx are rejected."""
    model_server.enqueue("scripted failure", status=status)

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"))

    assert caught.value.kind is kind
    assert "scripted failure" in caught.value.detail


async def test_slow_server_is_a_timeout(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """A reply slower than the timeout becomes ModelError(timeout)."""
    completer = make_completer(model_server, transport, timeout=0.2)
    model_server.enqueue("Too late.", delay=2.0)
    try:
        with pytest.raises(ModelError) as caught:
            await completer.complete(CompletionRequest(USER, "m"))
    finally:
        await completer.close()

    assert caught.value.kind is ModelErrorKind.TIMEOUT


async def test_error_mid_stream_is_a_model_error(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """An error event after some text has streamed becomes ModelError, not a silent cut."""
    model_server.enqueue("This answer will break halfway.", chunk_size=4, error_after=3)
    seen: list[str] = []

    async def on_delta(piece: str) -> None:
        seen.append(piece)

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"), on_delta)

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE
    assert "".join(seen) == "This answer "


MALFORMED = {
    "not-json": b"data: not json\n\n",
    "content-number": b'data: {"choices": [{"index": 0, "delta": {"content": 5}}]}\n\n',
    "content-list": b'data: {"choices": [{"index": 0, "delta": {"content": ["a"]}}]}\n\n',
    "choices-object": b'data: {"choices": {"0": {"delta": {"content": "a"}}}}\n\n',
    "delta-string": b'data: {"choices": [{"index": 0, "delta": "text"}]}\n\n',
    "finish-number": b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": 7}]}\n\n',
    "usage-string": b'data: {"choices": [], "usage": {"prompt_tokens": "many"}}\n\n',
    "number": b"data: 5\n\n",
    "string": b'data: "text"\n\n',
    "array": b"data: [1, 2]\n\n",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_stream_is_unavailable(
    model_server: FakeModelServer, completer: OpenAICompleter, raw: bytes
) -> None:
    """An event that is not JSON or not shaped like a chunk is a ModelError, nothing else."""
    model_server.enqueue(
        raw_events=[b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\n', raw]
    )

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"), _ignore)

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE
    assert "malformed stream" in str(caught.value)


async def test_null_content_is_no_text(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A chunk whose content is null (a role or tool chunk) adds no text."""
    chunk = b'data: {"choices": [{"index": 0, "delta": {"content": %s}, "finish_reason": %s}]}\n\n'
    model_server.enqueue(
        raw_events=[chunk % (b'"Tea."', b"null"), chunk % (b"null", b'"stop"'), b"data: [DONE]\n\n"]
    )

    result = await completer.complete(CompletionRequest(USER, "m"))

    assert (result.text, result.finish_reason) == ("Tea.", "stop")


async def test_stream_ending_without_finish_reason_reports_none(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Content, then the connection ends (no finish_reason, no [DONE]): the text is kept and
    finish_reason is None, so the caller can tell the answer was cut off."""
    model_server.enqueue("Half of the answ", stop_early=True)

    result = await completer.complete(CompletionRequest(USER, "m"))

    assert (result.text, result.finish_reason) == ("Half of the answ", None)


async def test_a_long_stream_lets_other_tasks_run(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Between any two turns of another task, only a bounded number of deltas are handled:
    a fast provider streaming thousands of chunks never monopolises the event loop."""
    model_server.enqueue("ab" * 20_000, chunk_size=2)
    ticks = 0
    runs: list[int] = []
    last_tick = -1

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def on_delta(piece: str) -> None:
        nonlocal last_tick
        if ticks != last_tick:
            runs.append(0)
            last_tick = ticks
        runs[-1] += 1

    task = asyncio.create_task(ticker())
    try:
        result = await completer.complete(CompletionRequest(USER, "m"), on_delta)
    finally:
        task.cancel()
    assert len(result.text) == 40_000
    assert max(runs) <= 64, max(runs)


async def _ignore(piece: str) -> None:
    pass


async def test_unreachable_server_is_unavailable(transport: Transport) -> None:
    """A refused connection becomes ModelError(unavailable)."""
    server = FakeModelServer()
    await server.start()
    await server.stop()
    completer = make_completer(server, transport, timeout=2)
    try:
        with pytest.raises(ModelError) as caught:
            await completer.complete(CompletionRequest(USER, "m"))
    finally:
        await completer.close()

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE


async def test_default_reply_echoes_the_last_user_message(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """With nothing queued, the fake answers deterministically."""
    result = await completer.complete(CompletionRequest(USER, "m"))

    assert result.text == "Reply to: How do I brew tea?"


async def test_the_endpoint_from_settings_carries_the_deployment_values(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """The bot's endpoint wires key, base URL and default extra body from Settings."""
    settings = Settings(
        openai_api_key="k",
        openai_base_url=model_server.base_url,
        llm_extra_body={"disable_search": True},
        _env_file=None,  # type: ignore[call-arg]
    )
    completer = OpenAICompleter.from_endpoint(settings.model_endpoint())
    try:
        await completer.complete(CompletionRequest(USER, "m"))
    finally:
        await completer.close()

    assert model_server.requests[0]["disable_search"] is True


def test_an_endpoint_without_key_fails_at_start_up() -> None:
    """A missing OPENAI_API_KEY is a ConfigError naming the variable."""
    settings = Settings(openai_api_key=None, _env_file=None)  # type: ignore[call-arg]

    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        settings.model_endpoint()


def test_only_core_llm_imports_openai() -> None:
    """core/ stays free of Telegram, aiohttp and aiosqlite; openai lives in core/llm/llm.py only."""
    core = Path(__file__).resolve().parents[2] / "core"
    paths = sorted(core.rglob("*.py"))
    assert core / "llm" / "llm.py" in paths and len(paths) > 50  # every floor is read
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
        }
        assert not roots & {"telegram", "aiohttp", "aiosqlite", "asyncpg"}, path
        if path != core / "llm" / "llm.py":
            assert "openai" not in roots, path


# -- what real servers do: context overflow, wrong settings, no usage, JSON schemas ----------


async def failure(completer: OpenAICompleter, request: CompletionRequest | None = None) -> str:
    """The kind and text of the ModelError a call ends in, as "kind: detail"."""
    with pytest.raises(ModelError) as caught:
        await completer.complete(request or CompletionRequest(USER, "m"))
    return str(caught.value)


@pytest.mark.parametrize("provider", CONTEXT_ERRORS)
async def test_a_prompt_over_the_context_is_context_too_long(
    model_server: FakeModelServer, completer: OpenAICompleter, provider: str
) -> None:
    """A 400 worded as OpenAI, llama.cpp or vLLM word a context overflow is CONTEXT_TOO_LONG,
    and the error names the setting to lower and the context size when the server gave it."""
    message, code = CONTEXT_ERRORS[provider]
    model_server.enqueue(message, status=400, error_code=code)

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"))

    assert caught.value.kind is ModelErrorKind.CONTEXT_TOO_LONG
    assert "HISTORY_BUDGET_CHARS" in str(caught.value)
    size = {"openai": 8192, "llama.cpp-window": 8192, "vllm": 4096}.get(provider)
    assert caught.value.context_tokens == size
    if size is not None:
        assert f"{size} tokens" in str(caught.value)


async def test_the_openai_code_alone_is_context_too_long(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """OpenAI's `context_length_exceeded` code is enough, whatever the message says."""
    model_server.enqueue("too many tokens", status=400, error_code="context_length_exceeded")

    assert (await failure(completer)).startswith("context_too_long:")


async def test_a_stream_ending_before_any_text_is_context_too_long(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A stream that ends with no text and no finish_reason (how llama.cpp's server answers a
    streamed prompt over its context) is CONTEXT_TOO_LONG, not an empty answer."""
    model_server.enqueue("", stop_early=True)

    error = await failure(completer)

    assert error.startswith("context_too_long:") and "HISTORY_BUDGET_CHARS" in error


async def test_an_empty_answer_that_finished_is_not_a_context_error(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """An empty answer with finish_reason "stop" is returned as it is (the engine judges it)."""
    model_server.enqueue("")

    result = await completer.complete(CompletionRequest(USER, "m"))

    assert (result.text, result.finish_reason) == ("", "stop")


async def test_a_wrong_base_path_is_misconfigured(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """A base URL without the API's path answers 404: a configuration problem naming the
    settings to check, not a retryable failure."""
    completer = OpenAICompleter(
        api_key="k",
        base_url=model_server.base_url.removesuffix("/v1"),
        timeout=5,
        max_retries=0,
        wire=wire_for(transport, 5),
    )
    try:
        error = await failure(completer)
    finally:
        await completer.close()

    assert error.startswith("misconfigured:")
    assert "OPENAI_BASE_URL" in error and "LLM_MODEL" in error


async def test_a_refused_key_is_misconfigured_naming_the_key(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """401 names OPENAI_API_KEY as the setting to check."""
    model_server.enqueue("Incorrect API key provided", status=401)

    error = await failure(completer)

    assert error.startswith("misconfigured:") and "OPENAI_API_KEY" in error


async def test_usage_is_estimated_when_the_stream_reports_none(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A server that ignores include_usage (llama.cpp's) still yields token counts, marked
    estimated; reported counts are not marked."""
    answer = "Brew green tea at 80 °C for two minutes, then pour. " * 4
    model_server.enqueue(answer, no_usage=True)
    model_server.enqueue("Short.", usage={"prompt_tokens": 11, "completion_tokens": 3})

    estimated = await completer.complete(CompletionRequest(USER, "m"))
    reported = await completer.complete(CompletionRequest(USER, "m"))

    assert estimated.usage.estimated
    assert 30 <= estimated.usage.completion_tokens <= 80  # about 55 tokens of English
    assert 5 <= estimated.usage.prompt_tokens <= 30
    assert reported.usage == Usage(11, 3) and not reported.usage.estimated


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def test_an_output_schema_is_sent_as_json_schema(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A JSON request with a schema asks the server for that schema (strict off)."""
    model_server.enqueue('{"name": "tea"}')

    await completer.complete(CompletionRequest(USER, "m", json_mode=True, json_schema=SCHEMA))

    assert model_server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": False},
    }


SCHEMA_REFUSALS: dict[str, dict[str, Any]] = {
    "400 about response_format": {
        "text": "Invalid parameter: 'response_format' of type 'json_schema' is not supported",
        "status": 400,
    },
    "422 about response_format": {
        "text": "body.response_format.type: Input should be 'text' or 'json_object'",
        "status": 422,
    },
    "500 naming response_format (llama-cpp-python)": {
        "text": "1 validation error: ('body', 'response_format', 'type') Input should be "
        "'text' or 'json_object'",
        "status": 500,
    },
    "hang-up (llama-cpp-python)": {"drop": True},
}


@pytest.mark.parametrize("refusal", SCHEMA_REFUSALS.values(), ids=SCHEMA_REFUSALS.keys())
async def test_a_server_refusing_json_schema_falls_back_to_json_object_once(
    model_server: FakeModelServer, completer: OpenAICompleter, refusal: dict[str, Any]
) -> None:
    """A refused json_schema (an error status naming response_format, or a hang-up without an
    answer, as llama-cpp-python's server does) is asked again with json_object, and later calls go
    straight to json_object: the failed attempt is paid once per process."""
    model_server.enqueue(**refusal)
    model_server.enqueue('{"name": "tea"}')
    model_server.enqueue('{"name": "coffee"}')
    request = CompletionRequest(USER, "m", json_mode=True, json_schema=SCHEMA)

    first = await completer.complete(request)
    second = await completer.complete(request)

    assert (first.text, second.text) == ('{"name": "tea"}', '{"name": "coffee"}')
    formats = [body["response_format"]["type"] for body in model_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]


async def test_a_failed_fallback_keeps_json_schema_for_later_calls(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """When the json_object attempt fails too, the server is down, not refusing the schema:
    the error is reported and the next call asks for json_schema again."""
    model_server.enqueue(drop=True)
    model_server.enqueue(status=503)
    model_server.enqueue('{"name": "tea"}')
    request = CompletionRequest(USER, "m", json_mode=True, json_schema=SCHEMA)

    assert (await failure(completer, request)).startswith("unavailable:")
    await completer.complete(request)

    formats = [body["response_format"]["type"] for body in model_server.requests]
    assert formats == ["json_schema", "json_object", "json_schema"]


async def test_another_400_is_not_taken_for_a_schema_refusal(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A 400 that is not about response_format is rejected at once, not retried."""
    model_server.enqueue("messages: invalid role", status=400)

    request = CompletionRequest(USER, "m", json_mode=True, json_schema=SCHEMA)
    assert (await failure(completer, request)).startswith("rejected:")
    assert len(model_server.requests) == 1


# -- the start-up check of the model endpoint -------------------------------------------------


async def _check(base_url: str, transport: Transport, model: str = "m") -> list[str]:
    completer = OpenAICompleter(
        api_key="k", base_url=base_url, timeout=5, max_retries=2, wire=wire_for(transport, 5)
    )
    try:
        return await completer.check_endpoint(model)
    finally:
        await completer.close()


async def test_check_passes_a_listed_model(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """A server listing LLM_MODEL gives no warning."""
    model_server.models = ["m", "other"]

    assert await _check(model_server.base_url, transport) == []


async def test_check_tolerates_a_provider_without_models(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """A 404 on /models under a base URL with a path is no proof of anything: no warning."""
    assert await _check(model_server.base_url, transport) == []


async def test_check_warns_of_a_base_url_without_its_path(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """No path and a 404: one warning naming OPENAI_BASE_URL and the usual /v1."""
    model_server.models = ["m"]

    [warning] = await _check(model_server.base_url.removesuffix("/v1"), transport)

    assert "OPENAI_BASE_URL" in warning and "/v1" in warning


async def test_check_warns_of_an_unlisted_model(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """LLM_MODEL missing from a non-empty list of ids: one warning naming LLM_MODEL."""
    model_server.models = ["gpt-4o", "gpt-4o-mini"]

    [warning] = await _check(model_server.base_url, transport, model="gpt-5-typo")

    assert "LLM_MODEL" in warning and "gpt-5-typo" in warning and "gpt-4o-mini" in warning


async def test_check_warns_of_a_server_that_is_not_there(transport: Transport) -> None:
    """Connection refused: one warning naming OPENAI_BASE_URL, at once (no retries)."""
    server = FakeModelServer()
    await server.start()
    await server.stop()

    [warning] = await _check(server.base_url, transport)

    assert "OPENAI_BASE_URL" in warning and "connect" in warning


async def test_check_warns_of_a_refused_key(
    model_server: FakeModelServer, transport: Transport
) -> None:
    """401 on /models: one warning naming OPENAI_API_KEY."""
    model_server.models = ["m"]
    model_server.refuse_key = True

    [warning] = await _check(model_server.base_url, transport)

    assert "OPENAI_API_KEY" in warning


async def test_calls_carry_no_sdk_telemetry_headers(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A completion sends the key and the JSON, not the SDK's X-Stainless-* headers."""
    await completer.complete(CompletionRequest(messages=USER, model="m"))
    headers = model_server.request_headers[-1]
    assert headers["authorization"] == "Bearer test-key"
    assert headers["content-type"] == "application/json"
    assert [name for name in headers if name.startswith("x-stainless")] == []
