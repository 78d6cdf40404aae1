"""A `POST /v1/chat/completions` body read into a plain value (`CompletionAsk`).

Invariants: everything a stranger sends is checked here before anything else happens, and
a body the endpoint cannot take is a 400 naming the field (`param`, such as
`messages[3].content`) and why: not an object, no or too many messages, a role it does not
take (tool and function messages: this model calls no client tools), content that is not
text, text with NUL characters or unpaired surrogates, a user or system message over
MAX_INPUT_CHARS, a `user` over `MAX_USER_CHARS`, `metadata.rounds` that is not a round
count within MAX_ROUNDS_LIMIT, `n` other than 1. Fields the endpoint has no use for
(`temperature`, `max_tokens`, …) are accepted and ignored, as chat apps send them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from api.openai_compat.errors import invalid
from core.domain.client_history import Sent

MAX_MESSAGES = 500
"""A conversation of more messages is refused: ten rounds and fifty follow-ups are 122."""
MAX_USER_CHARS = 64
MAX_METADATA_KEYS = 16
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True, slots=True)
class CompletionAsk:
    """What a chat completion request asks, checked."""

    model: str
    messages: tuple[Sent, ...]
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    rounds: int | None = None  # metadata.rounds


def parse_completion(
    raw: bytes | bytearray, *, max_input_chars: int, max_rounds: int
) -> CompletionAsk:
    """The request in `raw`; raises `OpenAIError` (400) naming what is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise invalid("the body is not valid JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise invalid("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: a model id is required (GET /v1/models)", "model")
    if body.get("n", 1) != 1:
        raise invalid("n: only one choice is given", "n")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("stream: must be true or false", "stream")
    return CompletionAsk(
        model=model,
        messages=_messages(body.get("messages"), max_input_chars),
        stream=stream,
        include_usage=_include_usage(body.get("stream_options"), stream),
        user=_user(body.get("user")),
        rounds=_rounds(body.get("metadata"), max_rounds),
    )


def _messages(value: Any, max_input_chars: int) -> tuple[Sent, ...]:
    if not isinstance(value, list) or not value:
        raise invalid("messages: a non-empty list of messages is required", "messages")
    if len(value) > MAX_MESSAGES:
        raise invalid(
            f"messages: at most {MAX_MESSAGES} messages are taken; start a new chat",
            "messages",
        )
    sent = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise invalid(f"{where}: must be an object", where)
        role = message.get("role")
        if (
            role in ("tool", "function")
            or message.get("tool_calls")
            or message.get("function_call")
        ):
            raise invalid(
                f"{where}: tool calls and tool messages are not taken: this model calls no "
                "client tools",
                f"{where}.role",
            )
        if role not in ROLES:
            raise invalid(
                f"{where}.role: must be one of system, developer, user, assistant",
                f"{where}.role",
            )
        text = _text(message.get("content"), f"{where}.content")
        if ROLES[role] != "assistant" and len(text) > max_input_chars:
            raise invalid(
                f"{where}.content: over MAX_INPUT_CHARS ({max_input_chars} characters)",
                f"{where}.content",
                code="string_above_max_length",
            )
        sent.append(Sent(ROLES[role], text))
    return tuple(sent)


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif kind in ("image_url", "input_audio", "file"):
                raise invalid(
                    f"{where}[{index}]: {kind} parts are not taken by this endpoint yet: "
                    "send text (the JSON API, /api/chat, takes files)",
                    f"{where}[{index}]",
                )
            else:
                raise invalid(f"{where}[{index}]: a content part must be text", f"{where}[{index}]")
        text = "\n".join(pieces)
    else:
        raise invalid(f"{where}: must be a string or a list of text parts", where)
    if "\x00" in text:
        raise invalid(f"{where}: NUL characters are not taken", where)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"{where}: unpaired surrogates are not text", where) from None
    return text


def _include_usage(value: Any, stream: bool) -> bool:
    if value is None:
        return False
    if not stream:
        raise invalid("stream_options: only taken when stream is true", "stream_options")
    if not isinstance(value, dict):
        raise invalid("stream_options: must be an object", "stream_options")
    usage = value.get("include_usage", False)
    if not isinstance(usage, bool):
        raise invalid("stream_options.include_usage: must be true or false", "stream_options")
    return usage


def _user(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_USER_CHARS or "\x00" in value:
        raise invalid(f"user: a string of at most {MAX_USER_CHARS} characters", "user")
    return value


def _rounds(value: Any, max_rounds: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_METADATA_KEYS:
        raise invalid(f"metadata: an object of at most {MAX_METADATA_KEYS} strings", "metadata")
    rounds = value.get("rounds")
    if rounds is None:
        return None
    text = str(rounds) if isinstance(rounds, int) and not isinstance(rounds, bool) else rounds
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 3:
        raise invalid("metadata.rounds: a whole number of rounds", "metadata.rounds")
    if not 1 <= int(text) <= max_rounds:
        raise invalid(
            f"metadata.rounds: between 1 and {max_rounds} (MAX_ROUNDS_LIMIT)", "metadata.rounds"
        )
    return int(text)
