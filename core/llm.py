"""The one module that knows the openai SDK: `Completer` over any OpenAI-compatible API.

Invariant: every call streams, and whatever the SDK raises once its own retries
(429, 5xx, timeouts, dropped connections, with backoff honouring `retry-after`)
are spent leaves this module as `core.errors.ModelError` with a kind the edges
can explain — including an error in the middle of a stream and a stream that is
not valid JSON or not shaped like OpenAI's chunks ("malformed stream"). A stream
that ends without a finish_reason after some text reports `finish_reason=None`
(a cut-off answer), never a made-up "stop"; one that ends so before any text is
how llama.cpp's server answers a prompt over its context, and is reported as
CONTEXT_TOO_LONG like the providers' own 400s for it. Errors no retry can fix say
which setting to look at: HISTORY_BUDGET_CHARS for a context overflow,
OPENAI_API_KEY for 401/403, OPENAI_BASE_URL and LLM_MODEL for 404. A request with
images that the server refuses for them (a model that reads text only) is
IMAGES_REJECTED, whatever the status the server chose for it, so the caller can ask
again without them; a request without images never is.

Every completion has a usage: reported by the provider, or estimated by
`core.tokens` (and marked so) when the stream carried none. A JSON request with a
schema asks for `response_format: json_schema`; a server that refuses that (a 400
about response_format) is asked again with `json_object`, and so are all later
calls of this completer. Reading a fast stream yields to the event loop every
`YIELD_EVERY` chunks. One `AsyncOpenAI` client (one connection pool) is shared by
all calls.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI, AsyncStream

from core.errors import ModelError, ModelErrorKind
from core.models import Usage
from core.ports import Completion, CompletionRequest, OnDelta
from core.tokens import estimate_prompt_tokens, estimate_tokens

YIELD_EVERY = 32
"""Chunks handled between two turns of the event loop: a provider streaming faster than
the bot parses (or a buffer full of small chunks) must not starve other chats."""

CHECK_SECONDS = 3.0
"""How long the start-up check of the model endpoint may take, at most."""

SCHEMA_NAME = "answer"
"""The `json_schema.name` sent with an output schema (providers require one)."""

_JSON_FORMAT = {"type": "json_object"}
_CONTEXT_ERROR = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? (?:the )?(?:available )?"
    r"context (?:size|window)|context window of|prompt is too long",
    re.IGNORECASE,
)
_CONTEXT_SIZE = re.compile(
    r"(?:maximum context length is|context window of|context size \(|context size of)\s*(\d+)",
    re.IGNORECASE,
)
_FORMAT_REFUSED = re.compile(r"response_format|json_schema", re.IGNORECASE)
# How servers refuse image parts for a model that reads text only. OpenAI: "Invalid
# content type. image_url is only supported by certain models."; llama.cpp without a
# projector (HTTP 500): "image input is not supported - hint: … provide the mmproj";
# vLLM: "<model> is not a multimodal model"; Groq: "'messages.1' : for 'role:user' the
# following must be satisfied[('messages.1.content' : value must be a string)]";
# DeepSeek: "messages[1]: unknown variant `image_url`, expected `text`"; Ollama and LM
# Studio: "… does not support images"; OpenRouter (404): "No endpoints found that
# support image input".
_IMAGES_REFUSED = re.compile(
    r"image_url|image input|images? (?:is |are )?(?:not supported|unsupported)|"
    r"(?:not|n't|cannot|unable to) (?:support|accept|process|handle) (?:images?|vision|multimodal)|"
    r"multimodal|vision|content' ?: value must be a string|content must be a string|"
    r"expected `text`|only 'text' content|missing data required for image",
    re.IGNORECASE,
)
_IMAGES_REFUSED_STATUS = frozenset({400, 404, 415, 422, 500})
_STREAM_OPTIONS = {"include_usage": True}
# Fields of an OpenAI chat.completion.chunk; anything else is a provider extra.
_CHUNK_FIELDS = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "system_fingerprint",
        "service_tier",
        "obfuscation",
    }
)


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """One OpenAI-compatible model as configured: where it is, how it is called, its limits.

    `name` says which of the process's models it is ("bot"; the evaluator adds more).
    The deadlines bound each whole call (`core.deadline`); the timeout, each read.
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


class OpenAICompleter:
    """`core.ports.Completer` backed by `openai.AsyncOpenAI`, streaming every call."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        default_extra_body: dict[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
        transport: Literal["httpx", "aiohttp"] = "httpx",
        temperature: float | None = None,
    ) -> None:
        """`transport="aiohttp"` (the SDK's own aiohttp transport) roughly halves the
        client CPU per call at hundreds of concurrent streams, where the httpx pool's
        bookkeeping dominates; httpx stays the default as the SDK's reference path."""
        self._owns_client = client is None
        if client is None:
            http_client = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
            client = AsyncOpenAI(
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
                http_client=http_client,
            )
        self._client = client
        self._default_extra_body = dict(default_extra_body or {})
        if temperature is not None:
            self._default_extra_body.setdefault("temperature", temperature)
        self._schema_refused = False  # the server refused json_schema once: json_object now

    @classmethod
    def from_endpoint(cls, endpoint: ModelEndpoint) -> OpenAICompleter:
        return cls(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout_seconds,
            max_retries=endpoint.max_retries,
            default_extra_body=endpoint.extra_body,
            transport=endpoint.transport,
            temperature=endpoint.temperature,
        )

    async def close(self) -> None:
        """Close the connection pool if this completer created it."""
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
        if request.json_mode:
            body["response_format"] = _JSON_FORMAT
            if schema and request.json_schema is not None:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": SCHEMA_NAME,
                        "schema": request.json_schema,
                        "strict": False,  # any schema the client sent, not OpenAI's subset
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
        """
        schema = request.json_mode and request.json_schema is not None
        if not schema or self._schema_refused:
            return await self._complete(request, on_delta, schema=False)
        streamed = False

        async def delta(piece: str) -> None:
            nonlocal streamed
            streamed = True
            if on_delta is not None:
                await on_delta(piece)

        try:
            return await self._complete(request, delta, schema=True, raw_errors=True)
        except openai.APIError as exc:
            if streamed or not _schema_refused(exc):
                raise _model_error(exc, images=_has_images(request)) from exc
        completion = await self._complete(request, on_delta, schema=False)
        self._schema_refused = True
        return completion

    async def _complete(
        self,
        request: CompletionRequest,
        on_delta: OnDelta | None,
        *,
        schema: bool,
        raw_errors: bool = False,
    ) -> Completion:
        """One streamed call; SDK errors leave as `ModelError` (as they are: `raw_errors`)."""
        state = _StreamState(request.model)
        try:
            # The SDK's generic `post` keeps its retries, timeouts, SSE decoding and
            # error events, but leaves chunks as decoded JSON: building a pydantic model
            # per chunk (what `chat.completions.create` does) cost more than all the rest.
            stream = await self._client.post(
                "/chat/completions",
                body=self._body(request, schema=schema),
                cast_to=object,
                stream=True,
                stream_cls=AsyncStream[object],
            )
            async with stream:
                count = 0
                async for chunk in _decoded(stream):
                    piece = state.feed(chunk)
                    if piece and on_delta is not None:
                        await on_delta(piece)  # may raise to stop reading: the stream closes
                    count += 1
                    if count % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        except openai.APIError as exc:
            if raw_errors:
                raise
            raise _model_error(exc, images=_has_images(request)) from exc
        if state.finish_reason is None and not state.pieces:
            raise ModelError(
                ModelErrorKind.CONTEXT_TOO_LONG,
                "the stream ended before any text and without a finish_reason, as servers "
                f"such as llama.cpp's do for a prompt over the model's context: {_LOWER_BUDGET}",
            )
        return state.completion(request)

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
            if not _refused(exc):
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


async def _decoded(stream: AsyncStream[object]) -> AsyncIterator[Any]:
    """The stream's decoded chunks; an event that is not JSON is a malformed stream."""
    chunks = aiter(stream)
    while True:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
            raise _malformed(exc) from exc
        yield chunk


def _malformed(problem: object) -> ModelError:
    return ModelError(ModelErrorKind.UNAVAILABLE, f"malformed stream: {problem}")


class _StreamState:
    """What the chunks of one stream have said so far."""

    __slots__ = ("extras", "finish_reason", "model", "pieces", "reported", "usage")

    def __init__(self, model: str) -> None:
        self.pieces: list[str] = []
        self.finish_reason: str | None = None
        self.model = model
        self.usage = Usage()
        self.reported = False  # a chunk carried usage
        self.extras: dict[str, Any] = {}

    def feed(self, chunk: Any) -> str | None:
        """Take one decoded chunk; return its text piece, if any.

        Raises ModelError ("malformed stream") for anything not shaped like an OpenAI
        chunk: a value of the wrong type would otherwise surface later, far from here.
        """
        if not isinstance(chunk, dict):
            raise _malformed(f"a chunk is {type(chunk).__name__}, not an object")
        if not _CHUNK_FIELDS.issuperset(chunk):  # citations, search_results, …
            self.extras.update((k, v) for k, v in chunk.items() if k not in _CHUNK_FIELDS)
        self.model = _typed(chunk.get("model"), str, "model") or self.model
        if (counts := _typed(chunk.get("usage"), dict, "usage")) is not None:
            self.reported = True
            self.usage = Usage(
                _typed(counts.get("prompt_tokens"), int, "prompt_tokens") or 0,
                _typed(counts.get("completion_tokens"), int, "completion_tokens") or 0,
            )
        choices = _typed(chunk.get("choices"), list, "choices")
        if not choices:
            return None
        choice = _typed(choices[0], dict, "choice") or {}
        if (reason := _typed(choice.get("finish_reason"), str, "finish_reason")) is not None:
            self.finish_reason = reason
        delta = _typed(choice.get("delta"), dict, "delta") or {}
        piece = _typed(delta.get("content"), str, "content")
        if piece:
            self.pieces.append(piece)
        return piece or None

    def completion(self, request: CompletionRequest) -> Completion:
        """The completion so far; its usage is estimated when no chunk reported one."""
        text = "".join(self.pieces)
        usage = self.usage
        if not self.reported:
            usage = Usage(
                estimate_prompt_tokens(request.messages), estimate_tokens(text), estimated=True
            )
        return Completion(
            text=text,
            finish_reason=self.finish_reason,
            model=self.model,
            usage=usage,
            extras=self.extras,
        )


def _typed(value: Any, kind: type, name: str) -> Any:
    """`value` if it is None or a `kind`; otherwise the stream is malformed."""
    if value is None or isinstance(value, kind):
        return value
    raise _malformed(f"{name} is {type(value).__name__}, not {kind.__name__}")


_LOWER_BUDGET = "lower HISTORY_BUDGET_CHARS (or use a model with a larger context)"


def _has_images(request: CompletionRequest) -> bool:
    """Whether any message of `request` carries an image part."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in request.messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _images_refused(exc: openai.APIError) -> bool:
    """Whether a request with images failed for them (see `_IMAGES_REFUSED`)."""
    return (
        isinstance(exc, openai.APIStatusError)
        and exc.status_code in _IMAGES_REFUSED_STATUS
        and bool(_IMAGES_REFUSED.search(exc.message))
        and not _CONTEXT_ERROR.search(exc.message)
    )


def _model_error(exc: openai.APIError, *, images: bool = False) -> ModelError:
    """Classify what is left after the SDK's retries into the engine's error kinds
    (`images`: the request carried image parts)."""
    detail = exc.message
    if images and _images_refused(exc):
        return ModelError(
            ModelErrorKind.IMAGES_REJECTED,
            f"the model refused the images (set LLM_VISION=false if it reads text only): {detail}",
        )
    if exc.code == "context_length_exceeded" or _CONTEXT_ERROR.search(detail):
        size = _CONTEXT_SIZE.search(detail)
        tokens = int(size.group(1)) if size else None
        context = f" of {tokens} tokens" if tokens else ""
        return ModelError(
            ModelErrorKind.CONTEXT_TOO_LONG,
            f"the prompt is over the model's context{context}: {_LOWER_BUDGET} ({detail})",
            context_tokens=tokens,
        )
    if isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403):
        return ModelError(
            ModelErrorKind.MISCONFIGURED,
            f"HTTP {exc.status_code}: check OPENAI_API_KEY ({detail})",
        )
    if isinstance(exc, openai.APIStatusError) and exc.status_code == 404:
        return ModelError(
            ModelErrorKind.MISCONFIGURED,
            f"HTTP 404 at {exc.request.url}: check OPENAI_BASE_URL (usually ending in /v1) "
            f"and LLM_MODEL ({detail})",
        )
    if isinstance(exc, openai.APITimeoutError):
        if _refused(exc):  # the aiohttp transport reports a refused connect as a timeout
            return ModelError(ModelErrorKind.UNAVAILABLE, "connection failed")
        return ModelError(ModelErrorKind.TIMEOUT, detail)
    if isinstance(exc, openai.RateLimitError):
        return ModelError(ModelErrorKind.RATE_LIMITED, detail)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 408:
            return ModelError(ModelErrorKind.TIMEOUT, detail)
        if status >= 500 or status == 409:
            return ModelError(ModelErrorKind.UNAVAILABLE, f"HTTP {status}: {detail}")
        return ModelError(ModelErrorKind.REJECTED, f"HTTP {status}: {detail}")
    # Connection refused/reset, an error event mid-stream, an unparsable response.
    return ModelError(ModelErrorKind.UNAVAILABLE, detail)


def _schema_refused(exc: openai.APIError) -> bool:
    """Whether a call with json_schema may have failed for the schema: an error status whose
    message names the response format (400 or 422; llama-cpp-python's server answers 500 with
    its validation error), or a hang-up without an answer (not a refused connect, not a
    timeout)."""
    if isinstance(exc, openai.APIStatusError):
        message = exc.message
        return bool(_FORMAT_REFUSED.search(message)) and not _CONTEXT_ERROR.search(message)
    return isinstance(exc, openai.APIConnectionError) and _hung_up(exc)


_HANG_UPS = frozenset({"RemoteProtocolError", "ServerDisconnectedError"})
"""httpx's and aiohttp's names for a server that closed the connection without an answer."""


def _hung_up(exc: BaseException) -> bool:
    """Whether the server closed the connection without answering behind `exc` (the
    aiohttp transport reports that as a timeout, so the cause tells)."""
    return any(type(cause).__name__ in _HANG_UPS for cause in _causes(exc))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """What `exc` was raised from, nearest first."""
    seen: BaseException | None = exc
    for _ in range(8):  # causes form a short chain; the bound guards against cycles
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            return
        yield seen


def _refused(exc: BaseException) -> bool:
    """Whether an OS-level connection failure (not a timeout) is behind `exc`."""
    return any(isinstance(c, OSError) and not isinstance(c, TimeoutError) for c in _causes(exc))
