"""The one module that knows the openai SDK: `Completer` over any OpenAI-compatible API.

Invariant: every call streams, and whatever the SDK raises once its own retries
(429, 5xx, timeouts, dropped connections, with backoff honouring `retry-after`)
are spent leaves this module as `core.errors.ModelError` with a kind the edges
can explain — including an error in the middle of a stream and a stream that is
not valid JSON or not shaped like OpenAI's chunks ("malformed stream"). A stream
that ends without a finish_reason (a server that gave up, e.g. on a prompt over
its context) reports `finish_reason=None`, never a made-up "stop". Reading a fast
stream yields to the event loop every `YIELD_EVERY` chunks. One `AsyncOpenAI`
client (one connection pool) is shared by all calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal

import openai
from openai import AsyncOpenAI, AsyncStream

from core.errors import ModelError, ModelErrorKind
from core.models import Usage
from core.ports import Completion, CompletionRequest, OnDelta
from core.settings import ConfigError, Settings

YIELD_EVERY = 32
"""Chunks handled between two turns of the event loop: a provider streaming faster than
the bot parses (or a buffer full of small chunks) must not starve other chats."""

_JSON_FORMAT = {"type": "json_object"}
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

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompleter:
        """Build from deployment settings; a missing key fails at start-up, not per call."""
        api_key = settings.secret("openai_api_key")
        if not api_key:
            raise ConfigError(
                "OPENAI_API_KEY: required (any non-empty value for providers without keys)"
            )
        return cls(
            api_key=api_key,
            base_url=settings.openai_base_url,
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            default_extra_body=settings.llm_extra_body,
            transport=settings.llm_http_transport,
        )

    async def close(self) -> None:
        """Close the connection pool if this completer created it."""
        if self._owns_client:
            await self._client.close()

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
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
        return body

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        """Stream one completion, passing each text piece to `on_delta` in order."""
        state = _StreamState(request.model)
        try:
            # The SDK's generic `post` keeps its retries, timeouts, SSE decoding and
            # error events, but leaves chunks as decoded JSON: building a pydantic model
            # per chunk (what `chat.completions.create` does) cost more than all the rest.
            stream = await self._client.post(
                "/chat/completions",
                body=self._body(request),
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
            raise _model_error(exc) from exc
        return state.completion()


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

    __slots__ = ("extras", "finish_reason", "model", "pieces", "usage")

    def __init__(self, model: str) -> None:
        self.pieces: list[str] = []
        self.finish_reason: str | None = None
        self.model = model
        self.usage = Usage()
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

    def completion(self) -> Completion:
        return Completion(
            text="".join(self.pieces),
            finish_reason=self.finish_reason,
            model=self.model,
            usage=self.usage,
            extras=self.extras,
        )


def _typed(value: Any, kind: type, name: str) -> Any:
    """`value` if it is None or a `kind`; otherwise the stream is malformed."""
    if value is None or isinstance(value, kind):
        return value
    raise _malformed(f"{name} is {type(value).__name__}, not {kind.__name__}")


def _model_error(exc: openai.APIError) -> ModelError:
    """Classify what is left after the SDK's retries into the engine's error kinds."""
    detail = exc.message
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


def _refused(exc: BaseException) -> bool:
    """Whether an OS-level connection failure (not a timeout) is behind `exc`."""
    seen: BaseException | None = exc
    for _ in range(8):  # causes form a short chain; the bound guards against cycles
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            return False
        if isinstance(seen, OSError) and not isinstance(seen, TimeoutError):
            return True
    return False
