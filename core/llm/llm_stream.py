"""Decoding one OpenAI-style chat stream: its events' data, its chunks into text pieces and
a `Completion`.

Invariant: anything not shaped like OpenAI's `chat.completion.chunk` — an event that is
not JSON, a chunk that is not an object, a field of the wrong type — is a
`core.domain.errors.ModelError` ("malformed stream") at the chunk that carries it, never a
`TypeError` later and far from here. Fields OpenAI does not define (citations,
search_results, …) are kept as the completion's extras. A stream of a request offering
tools collects its `tool_calls` deltas (`ToolCallParts`): joined by their `index`, within
`MAX_TOOL_CALLS` calls and `MAX_ARGUMENT_CHARS` of arguments (more is left out, never
kept growing); a stream without tools never looks for them. The usage is the one a chunk
reported, or one estimated by `core.domain.tokens` (and marked so) when none did. Knows nothing
of the openai SDK: `EventData` splits the server-sent events of the bytes the SDK reads
(each event as the SDK's own decoder would yield it), and the rest reads the JSON chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from core.domain.consultation import Usage
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import Completion, CompletionRequest
from core.domain.tokens import estimate_prompt_tokens, estimate_tokens
from core.domain.tools import ToolCall

DRAIN_SECONDS = 0.1
"""How long the rest of a body after `[DONE]` is read, at most (as the SDK does)."""
STREAM_ERROR = "An error occurred during streaming"
"""What an error event without a message of its own says (the SDK's words)."""
MAX_TOOL_CALLS = 16
"""Tool calls kept of one reply; a model asking for more gets the first ones."""
MAX_ARGUMENT_CHARS = 64_000
"""Characters of arguments kept of one reply's calls in all: a call whose arguments go
past it keeps what fitted, which is no JSON object, and its tool is not run."""

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


class EventData:
    """The data of each server-sent event in a byte stream, fed as it arrives.

    The same events as the openai SDK's decoder (the WHATWG event-stream rules): lines end
    at CR, LF or CRLF, also across chunks; a blank line ends an event, which counts when
    it had data, a non-empty event name, a retry, or when a non-empty id was given (ids
    outlive their event); `:` starts a comment; one space after a field's colon is
    dropped; data lines join with LF. A line that is not UTF-8 raises
    `UnicodeDecodeError`. Each chunk costs time in its own length: an unfinished line is
    kept in a growing buffer, never copied whole per chunk.
    """

    __slots__ = ("_data", "_event", "_id", "_rest", "_retry", "_skip_lf")

    def __init__(self) -> None:
        self._rest = bytearray()  # the unfinished line
        self._skip_lf = False  # the last chunk ended in CR: a LF opening the next ends nothing
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[str]:
        """The data of each event `chunk` ends."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = chunk.rfind(b"\n")
        if end == -1:
            self._rest += chunk
            return []
        lines = chunk[:end]
        if self._rest:
            self._rest += lines
            lines = bytes(self._rest)
        self._rest = bytearray(chunk[end + 1 :])
        ended: list[str] = []
        for line in lines.split(b"\n"):
            self._line(line, ended)
        return ended

    def finish(self) -> None:
        """The stream ended: an unfinished line is read (it ends no event)."""
        if self._rest:
            self._line(bytes(self._rest), [])
            self._rest.clear()

    def _line(self, raw: bytes, ended: list[str]) -> None:
        if not raw:
            if self._data or self._event or self._id or self._retry is not None:
                ended.append("\n".join(self._data))
            self._data, self._event, self._retry = [], "", None
            return
        line = raw.decode()
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)


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

    __slots__ = ("calls", "extras", "finish_reason", "model", "pieces", "reported", "usage")

    def __init__(self, model: str, *, tools: bool = False) -> None:
        """`tools`: the request offered tools, so `tool_calls` deltas are collected."""
        self.pieces: list[str] = []
        self.finish_reason: str | None = None
        self.model = model
        self.usage = Usage()
        self.reported = False  # a chunk carried usage
        self.extras: dict[str, Any] = {}
        self.calls = ToolCallParts() if tools else None

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
        if self.calls is not None and (parts := delta.get("tool_calls")) is not None:
            self.calls.feed(parts)
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
            tool_calls=self.calls.joined() if self.calls is not None else (),
        )

    @property
    def called(self) -> bool:
        """Whether the stream asked for any tool call."""
        return self.calls is not None and bool(self.calls.parts)


class ToolCallParts:
    """The `tool_calls` deltas of one stream, joined per call.

    OpenAI sends a call's `index`, `id`, `type` and `function.name` in its first delta
    and its `function.arguments` in pieces after; llama.cpp's server and others may send
    a whole call in one delta, repeat the name, leave out `index` (a delta with a new id
    is then a new call, one without continues the last) or the id (one is made up). A
    delta of another shape is a malformed stream; arguments sent as a JSON object are
    kept as its text.
    """

    __slots__ = ("_size", "parts")

    def __init__(self) -> None:
        self.parts: dict[int, _CallParts] = {}
        self._size = 0  # characters of arguments kept

    def feed(self, deltas: Any) -> None:
        for delta in _typed(deltas, list, "tool_calls"):
            if not isinstance(delta, dict):
                raise malformed(f"a tool_calls entry is {type(delta).__name__}, not an object")
            call_id = _typed(delta.get("id"), str, "tool call id")
            index = _typed(delta.get("index"), int, "tool call index")
            if index is None or isinstance(index, bool):
                index = self._index_of(call_id)
            function = _typed(delta.get("function"), dict, "function") or {}
            name = _typed(function.get("name"), str, "function name")
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # a server that sends the object itself
                arguments = json.dumps(arguments, ensure_ascii=False)
            arguments = _typed(arguments, str, "function arguments")
            parts = self.parts.get(index)
            if parts is None:
                if len(self.parts) >= MAX_TOOL_CALLS:
                    continue  # past the limit: left out
                parts = self.parts[index] = _CallParts()
            if call_id and not parts.id:
                parts.id = call_id
            if name and name != parts.name:
                parts.name = (name if not parts.name else parts.name + name)[:_MAX_NAME]
            if arguments:
                kept = arguments[: max(MAX_ARGUMENT_CHARS - self._size, 0)]
                parts.arguments.append(kept)
                self._size += len(kept)

    def _index_of(self, call_id: str | None) -> int:
        """Where a delta without `index` goes: a new id opens a call, else the last one."""
        if not self.parts:
            return 0
        last = max(self.parts)
        if call_id and self.parts[last].id and self.parts[last].id != call_id:
            return last + 1
        return last

    def joined(self) -> tuple[ToolCall, ...]:
        """The calls in their index order; a call without a name is a malformed stream."""
        calls = []
        for index in sorted(self.parts):
            parts = self.parts[index]
            if not parts.name:
                raise malformed(f"tool call {index} has no function name")
            arguments = "".join(parts.arguments)
            calls.append(ToolCall(parts.id or f"call_{index}", parts.name, arguments))
        return tuple(calls)


_MAX_NAME = 128
"""A function name kept at most (a valid one has 64 characters)."""


class _CallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


def _typed(value: Any, kind: type, name: str) -> Any:
    """`value` if it is None or a `kind`; otherwise the stream is malformed."""
    if value is None or isinstance(value, kind):
        return value
    raise malformed(f"{name} is {type(value).__name__}, not {kind.__name__}")


async def read_out(pieces: AsyncIterator[object], failures: tuple[type[Exception], ...]) -> None:
    """Read what follows `[DONE]` to the body's end, for at most `DRAIN_SECONDS`, so the
    connection can be used again; a timeout or one of `failures` there changes nothing."""
    with contextlib.suppress(TimeoutError, *failures):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in pieces:
                pass


def stream_error_message(error: object) -> str:
    """What an error event in a stream says: its `message`, or the SDK's generic words."""
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else STREAM_ERROR
