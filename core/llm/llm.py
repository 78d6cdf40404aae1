"""The one module that knows the openai SDK: `Completer` over any OpenAI-compatible API.

Invariant: every call streams, and whatever the SDK raises once its own retries
(429, 5xx, timeouts, dropped connections, with backoff honouring `retry-after`)
are spent leaves this module as `core.domain.errors.ModelError` with a kind the edges
can explain — including an error in the middle of a stream and a stream that is
not valid JSON or not shaped like OpenAI's chunks ("malformed stream"). A stream
that ends without a finish_reason after some text reports `finish_reason=None`
(a cut-off answer), never a made-up "stop"; one that ends so before any text is
how llama.cpp's server answers a prompt over its context, and is reported as
CONTEXT_TOO_LONG like the providers' own 400s for it. A request with images that
the server refuses for them is IMAGES_REJECTED, so the caller can ask again without
them; a request without images never is. A request offering tools (`CompletionRequest.tools`)
carries them with `tool_choice: "auto"`, its stream's `tool_calls` are collected
(`core.llm.llm_stream.ToolCallParts`), and a server refusing them (a 400, 404 or 422 that
names tools or function calling) is TOOLS_REFUSED, for `core.llm.tool_loop` to ask again
without; a request without tools never is.

Every completion has a usage: reported by the provider, or estimated (and marked
so) when the stream carried none. A JSON request with a schema asks for
`response_format: json_schema`; a server that refuses that (a 400 about
response_format) is asked again with `json_object`, and so are all later calls of
this completer. A required schema (a clarifying round's, client memory's) is sent in
the form its request names (`SchemaForm`: `json_schema`, or `json_object` with the
schema) and a refusal is FORMAT_REFUSED, for `core.domain.llm_format` to choose the next
form; a form the server has not answered yet goes without the SDK's retries first.
Reading a fast stream yields to the event loop every
`YIELD_EVERY` chunks. One `AsyncOpenAI` client (one connection pool) is shared by
all calls; they leave out the SDK's X-Stainless-* telemetry headers.

Two parts that need no SDK live next to it: `core.llm.llm_stream` splits a stream's
events and decodes its chunks (malformed streams, extras, usage), and
`core.llm.llm_errors` holds what a refusal's status and words mean (context overflow,
IMAGES_REJECTED wordings, which setting to check, hang-ups and refused connections);
this module maps the SDK's exception types onto those rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI, AsyncStream

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.llm_format import SchemaForm
from core.domain.ports import Completion, CompletionRequest, OnDelta
from core.llm.call_failure import CallFailed, model_error, retried, schema_refused
from core.llm.chat_wire import ChatWire
from core.llm.llm_errors import ended_before_text, refused
from core.llm.llm_stream import (
    EventData,
    StreamState,
    decoded,
    read_out,
    stream_error_message,
)
from core.llm.wire_calls import WireCalls

YIELD_EVERY = 32
"""Chunks handled between two passes of the event loop: a provider streaming faster than
the bot parses (or a buffer full of small chunks) must not starve other chats."""

CHECK_SECONDS = 3.0
"""How long the start-up check of the model endpoint may take, at most."""

_UNSENT_HEADERS = dict.fromkeys(
    (
        "X-Stainless-Async",
        "X-Stainless-Lang",
        "X-Stainless-Package-Version",
        "X-Stainless-OS",
        "X-Stainless-Arch",
        "X-Stainless-Runtime",
        "X-Stainless-Runtime-Version",
        "X-Stainless-Retry-Count",
        "X-Stainless-Read-Timeout",
    ),
    openai.omit,
)
"""The SDK's telemetry headers, which no OpenAI-compatible server needs: each call with
hundreds in flight carries its headers in three forms (the SDK's, httpx2's bytes, aiohttp's
strings), and these nine are half of them (see docs/performance.md)."""
_CALL_OPTIONS: openai.RequestOptions = {"headers": _UNSENT_HEADERS}
_PROBE_OPTIONS: openai.RequestOptions = {"headers": _UNSENT_HEADERS, "max_retries": 0}
"""A required schema's form not yet answered by the server is sent once without the SDK's
retries: a refusal (llama-cpp-python's 500 for json_schema) costs one request, not one
per retry after backoffs; another error gets the call again with them."""

_JSON_FORMAT = {"type": "json_object"}
_STREAM_OPTIONS = {"include_usage": True}


class _EventData:
    """The SDK's decoder interface (`aiter_bytes`) over `EventData`: the data of each event."""

    async def aiter_bytes(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
        events = EventData()
        async for chunk in chunks:
            for data in events.feed(chunk):
                yield data
        events.finish()


class _Chunks(AsyncStream[object]):
    """The SDK's stream of one call, each chunk left as decoded JSON (no model built per
    chunk), its events split by `EventData`.

    The SDK reads the bytes and turns transport failures into its errors
    (`_iter_events`); what it does with each event is done here with less work per
    chunk (its generic `Mapping` checks, the event objects, a cancel scope to drain
    the body, and three generators left suspended for the loop to close, each call):
    `[DONE]` ends the chunks, and what follows is read to the end (`read_out`) so the
    connection can be used again; an event carrying an `error` object raises
    `openai.APIError` with its message; an event that is not JSON raises ValueError, as
    the SDK's `json()` does.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._decoder = cast(Any, _EventData())  # yields each event's data, not an event

    def __aiter__(self) -> AsyncIterator[object]:
        return self._iterator

    async def __stream__(self) -> AsyncIterator[object]:
        events = cast(AsyncIterator[str], self._iter_events())
        try:
            async for data in events:
                if data.startswith("[DONE]"):
                    await read_out(events, (ValueError, openai.APIError))
                    return
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    message = stream_error_message(error)
                    raise openai.APIError(message, self.response.request, body=error)
                yield chunk
        finally:
            await self.response.aclose()


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """One OpenAI-compatible model as configured: where it is, how it is called, its limits.

    `name` says which of the process's models it is ("bot"; the evaluator adds more).
    The deadlines bound each whole call (`core.llm.deadline`); the timeout, each read.
    """

    name: str
    api_key: str
    base_url: str | None
    model: str
    timeout_seconds: float = 120.0
    max_retries: int = 2
    extra_body: dict[str, Any] = field(default_factory=dict)
    transport: Literal["httpx", "aiohttp"] = "aiohttp"
    temperature: float | None = None  # None: the server's default
    first_token_timeout_seconds: float = 120.0
    total_timeout_seconds: float = 600.0


class LeanAsyncOpenAI(AsyncOpenAI):
    """`AsyncOpenAI` without two costs the SDK pays again for every request.

    - The request's URL (the base URL joined with the path, parsed twice by httpx2) is
      made once per path and base URL and kept (`URL` objects are immutable); a base URL
      set anew is a new object, so it is never joined with an old one's path.
    - The idempotency key made for each POST (a `uuid4`) is a per-process random prefix
      and a counter: as unique, at a twentieth of the cost. The SDK sends it only under
      a header this client does not set (`_idempotency_header` is None), yet makes it.
    """

    _MAX_URLS = 32
    """Paths kept (this bot uses three); past that the kept ones are forgotten at once."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._urls: dict[str, tuple[object, Any]] = {}  # path -> (base URL, its URL)
        self._keys = itertools.count()
        self._key_prefix = f"stainless-python-retry-{secrets.token_hex(8)}-"

    def _prepare_url(self, url: str) -> Any:
        base = self.base_url
        kept = self._urls.get(url)
        if kept is not None and kept[0] is base:
            return kept[1]
        prepared = super()._prepare_url(url)
        if len(self._urls) >= self._MAX_URLS:
            self._urls.clear()
        self._urls[url] = (base, prepared)
        return prepared

    def _idempotency_key(self) -> str:
        return f"{self._key_prefix}{next(self._keys)}"


class OpenAICompleter:
    """`core.domain.ports.Completer` backed by `openai.AsyncOpenAI`, streaming every call."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        default_extra_body: dict[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
        wire: ChatWire | None = None,
        temperature: float | None = None,
    ) -> None:
        """With a `wire` (the deployment's default, `providers.chat_http`) chat completions
        are POSTed over it with the SDK's retry rule (`core.llm.wire_calls`), at a quarter
        of the client CPU the SDK's own layers cost per call; without one they go through
        the SDK (over httpx), the reference path. The SDK client serves everything else
        (the start-up check's model list). The completer closes the wire."""
        self._owns_client = client is None
        if client is None:
            client = LeanAsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
        self._client = client
        self._wire = (
            None
            if wire is None
            else WireCalls(
                wire,
                base_url=str(client.base_url),
                headers=_wire_headers(client),
                max_retries=max_retries,
            )
        )
        self._default_extra_body = dict(default_extra_body or {})
        if temperature is not None:
            self._default_extra_body.setdefault("temperature", temperature)
        self._schema_refused = False  # the server refused json_schema once: json_object now
        self._answered: set[tuple[str, SchemaForm]] = set()  # required forms it answered

    @classmethod
    def from_endpoint(
        cls, endpoint: ModelEndpoint, wire: ChatWire | None = None
    ) -> OpenAICompleter:
        """The completer of `endpoint`; `wire` for its chat completions when its transport
        is "aiohttp" (the caller makes it: the engine knows no HTTP library)."""
        return cls(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout_seconds,
            max_retries=endpoint.max_retries,
            default_extra_body=endpoint.extra_body,
            wire=wire,
            temperature=endpoint.temperature,
        )

    async def close(self) -> None:
        """Close the connection pools: the wire's, and the SDK's if this completer made it."""
        if self._wire is not None:
            await self._wire.close()
        if self._owns_client:
            await self._client.close()

    def _body(self, request: CompletionRequest, *, schema: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self._default_extra_body,
            **request.extra_body,  # provider fields (disable_search, …) as extra_body would
            "model": request.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": _STREAM_OPTIONS,
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = [spec.as_openai() for spec in request.tools]
            body["tool_choice"] = "auto"
        if request.json_mode:
            body["response_format"] = _JSON_FORMAT
            if schema and request.json_schema is not None and _in_json_object(request):
                # llama-cpp-python's form: it turns the schema into a grammar.
                body["response_format"] = {"type": "json_object", "schema": request.json_schema}
            elif schema and request.json_schema is not None:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.schema_name,
                        "schema": request.json_schema,
                        # A client's schema may use any keyword, not only OpenAI's strict
                        # subset; a required one is written within that subset.
                        "strict": request.schema_required,
                    },
                }
        return body

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        """Stream one completion, passing each text piece to `on_delta` in order.

        A call with a schema that the server refuses — an error naming response_format,
        or a hang-up before any answer (llama-cpp-python's server) — is made again with
        `json_object`; when that one succeeds, the server is known to lack json_schema
        and later calls skip it. (When it fails too, the server is down, not refusing.)
        A call whose schema is required (`schema_required`) is sent in the form it names
        (`schema_form`) and not made again: a refusal fails it with FORMAT_REFUSED (its
        caller, `core.domain.llm_format`, knows the next form), at once when it names json_schema
        and the server is known to lack it.
        """
        schema = request.json_mode and request.json_schema is not None
        if schema and request.schema_required:
            return await self._complete_required(request, on_delta)
        if not schema or self._schema_refused:
            return await self._complete(request, on_delta, schema=False)
        state = StreamState(request.model, tools=bool(request.tools))  # pieces: text streamed?
        try:
            return await self._complete(request, on_delta, schema=True, state=state)
        except CallFailed as exc:
            if state.pieces or not schema_refused(exc):
                raise model_error(exc, request) from exc
        completion = await self._complete(request, on_delta, schema=False)
        self._schema_refused = True
        return completion

    async def _complete_required(
        self, request: CompletionRequest, on_delta: OnDelta | None
    ) -> Completion:
        """One call with a required schema in its form; a refusal is FORMAT_REFUSED. A
        form the server has not answered yet is sent without the SDK's retries first
        (`_PROBE_OPTIONS`)."""
        if self._schema_refused and not _in_json_object(request):
            raise ModelError(ModelErrorKind.FORMAT_REFUSED, "the server lacks json_schema")
        form = (request.model, request.schema_form)
        probe = form not in self._answered
        state = StreamState(request.model, tools=bool(request.tools))  # pieces: text streamed?
        try:
            completion = await self._complete(
                request, on_delta, schema=True, state=state, probe=probe
            )
        except CallFailed as exc:
            if not state.pieces and schema_refused(exc):
                said = exc.message if exc.message.strip() else "the connection ended"
                raise ModelError(ModelErrorKind.FORMAT_REFUSED, said) from exc
            if not (probe and not state.pieces and retried(exc)):
                raise model_error(exc, request) from exc
            completion = await self._complete(request, on_delta, schema=True)
        self._answered.add(form)
        return completion

    async def _complete(
        self,
        request: CompletionRequest,
        on_delta: OnDelta | None,
        *,
        schema: bool,
        state: StreamState | None = None,
        probe: bool = False,
    ) -> Completion:
        """One streamed call (without retries when `probe`); a failure leaves as
        `ModelError`, or as `CallFailed` when the caller gives the `state` to read after it."""
        raw_errors = state is not None
        if state is None:
            state = StreamState(request.model, tools=bool(request.tools))
        body = self._body(request, schema=schema)
        try:
            async with self._stream(body, probe=probe) as chunks:
                count = 0
                async for chunk in decoded(chunks):
                    piece = state.feed(chunk)
                    if piece and on_delta is not None:
                        await on_delta(piece)  # may raise to stop reading: the stream closes
                    count += 1
                    if count % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        except CallFailed as exc:
            if raw_errors:
                raise
            raise model_error(exc, request) from exc
        if state.finish_reason is None and not state.pieces and not state.called:
            raise ended_before_text(tools=bool(request.tools))
        return state.completion(request)

    @contextlib.asynccontextmanager
    async def _stream(
        self, body: dict[str, Any], *, probe: bool
    ) -> AsyncIterator[AsyncIterator[Any]]:
        """The answer's chunks as decoded JSON, over the wire or through the SDK; every
        failure of either is a `CallFailed`."""
        if self._wire is not None:
            retries = 0 if probe else self._wire.max_retries
            async with self._wire.stream(body, retries=retries) as chunks:
                yield chunks
            return
        try:
            # The SDK's generic `post` keeps its retries, timeouts, SSE decoding and
            # error events, but leaves chunks as decoded JSON: building a pydantic model
            # per chunk (what `chat.completions.create` does) cost more than all the rest.
            stream = await self._client.post(
                "/chat/completions",
                body=body,
                cast_to=object,
                stream=True,
                stream_cls=_Chunks,
                options=_PROBE_OPTIONS if probe else _CALL_OPTIONS,
            )
            async with stream:
                yield cast(AsyncIterator[Any], stream)
        except openai.APIError as exc:
            raise _failure(exc) from exc

    async def check_endpoint(self, model: str) -> list[str]:
        """Problems with OPENAI_BASE_URL, OPENAI_API_KEY or LLM_MODEL that `GET /models`
        reveals, one line each; [] when none shows (or the provider has no such endpoint).

        Takes at most `CHECK_SECONDS`, without retries. Only clear signs count: a 404
        on /models alone is not one (some providers lack it), but a 404 under a base URL
        without any path almost always means the `/v1` is missing.
        """
        base = str(self._client.base_url)
        client = self._client.with_options(timeout=CHECK_SECONDS, max_retries=0)
        try:
            async with asyncio.timeout(CHECK_SECONDS):
                page = await client.models.list()
        except (TimeoutError, openai.APITimeoutError) as exc:
            if not refused(exc):
                return [f"OPENAI_BASE_URL: {base} did not answer within {CHECK_SECONDS:g} s"]
            return [f"OPENAI_BASE_URL: cannot connect to {base}; is the model server running?"]
        except openai.APIConnectionError:
            return [f"OPENAI_BASE_URL: cannot connect to {base}; is the model server running?"]
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            return [f"OPENAI_API_KEY: {base} refused the key (HTTP {exc.status_code})"]
        except openai.NotFoundError:
            if urlsplit(base).path.strip("/"):
                return []
            return [
                f"OPENAI_BASE_URL: {base} answers 404 and has no path; OpenAI-compatible "
                f"servers usually serve under /v1 (e.g. {base.rstrip('/')}/v1)"
            ]
        except openai.APIError:
            return []  # another answer proves nothing about the settings
        ids = [getattr(item, "id", None) for item in page.data]
        listed = [i for i in ids if isinstance(i, str) and i]
        if not ids or len(listed) != len(ids) or model in listed:
            return []  # nothing listed, or not clearly a list of model ids
        shown = ", ".join(sorted(listed)[:10]) + (", …" if len(listed) > 10 else "")
        return [
            f"LLM_MODEL: {model!r} is not among the models {base} lists ({shown}); servers "
            "that serve one model whatever the name (llama.cpp) answer anyway"
        ]


def _in_json_object(request: CompletionRequest) -> bool:
    """Whether a required schema goes as `json_object` with its schema (see `SchemaForm`)."""
    return request.schema_required and request.schema_form is SchemaForm.JSON_OBJECT


def _failure(exc: openai.APIError) -> CallFailed:
    """The SDK's exception in the shape every path's failures take (raise it from `exc`)."""
    if isinstance(exc, openai.APIStatusError):
        code = exc.code if isinstance(exc.code, str) else None
        return CallFailed(
            exc.message, status=exc.status_code, code=code, body=exc.body, url=str(exc.request.url)
        )
    if isinstance(exc, openai.APITimeoutError):
        return CallFailed(exc.message, timed_out=True)
    code = exc.code if isinstance(exc.code, str) else None
    return CallFailed(
        exc.message, code=code, body=exc.body, connection=isinstance(exc, openai.APIConnectionError)
    )


def _wire_headers(client: AsyncOpenAI) -> dict[str, str]:
    """What the SDK sends with every request (its key, organization and project, its user
    agent, JSON), without its X-Stainless-* telemetry."""
    sent = {**client.default_headers, **client.auth_headers}
    return {
        name: value
        for name, value in sent.items()
        if isinstance(value, str) and not name.lower().startswith("x-stainless")
    }
