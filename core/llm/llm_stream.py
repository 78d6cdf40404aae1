"""Decoding one OpenAI-style chat stream: its chunks into text pieces and a `Completion`.

Invariant: anything not shaped like OpenAI's `chat.completion.chunk` — an event that is
not JSON, a chunk that is not an object, a field of the wrong type — is a
`core.domain.errors.ModelError` ("malformed stream") at the chunk that carries it, never a
`TypeError` later and far from here. Fields OpenAI does not define (citations,
search_results, …) are kept as the completion's extras. The usage is the one a chunk
reported, or one estimated by `core.domain.tokens` (and marked so) when none did. Knows nothing
of the openai SDK: it reads the decoded JSON the SDK's stream yields.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from core.domain.consultation import Usage
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import Completion, CompletionRequest
from core.domain.tokens import estimate_prompt_tokens, estimate_tokens

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


async def decoded(stream: AsyncIterable[object]) -> AsyncIterator[Any]:
    """The stream's decoded chunks; an event that is not JSON is a malformed stream."""
    chunks = aiter(stream)
    while True:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
            raise malformed(exc) from exc
        yield chunk


def malformed(problem: object) -> ModelError:
    return ModelError(ModelErrorKind.UNAVAILABLE, f"malformed stream: {problem}")


class StreamState:
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
            raise malformed(f"a chunk is {type(chunk).__name__}, not an object")
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
    raise malformed(f"{name} is {type(value).__name__}, not {kind.__name__}")
