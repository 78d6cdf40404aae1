"""A `POST /v1/chat/completions` body read into a plain value (`CompletionAsk`).

Invariants: everything a stranger sends is checked here before anything else happens, and
a body the endpoint cannot take is a 400 naming the field (`param`, such as
`messages[3].content`) and why: not an object, no or too many messages, a role it does not
take (tool and function messages: this model calls no client tools), content that is not
text, text with NUL characters or unpaired surrogates, a user or system message over
MAX_INPUT_CHARS, a `user` over `MAX_USER_CHARS`, `metadata.rounds` that is not a round
count within MAX_ROUNDS_LIMIT, `metadata.bot` that names no bot as `api.bots` reads one,
`n` other than 1. Fields the endpoint has no use for
(`temperature`, `max_tokens`, …) are accepted and ignored, as chat apps send them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from api.attachments import MAX_ATTACHMENTS
from api.bots import BotRef, parse_bot
from api.errors import ApiError
from api.openai_compat.errors import invalid
from core.domain.client_history import Sent

MAX_MESSAGES = 500
"""A conversation of more messages is refused: ten rounds and fifty follow-ups are 122."""
MAX_USER_CHARS = 64
MAX_METADATA_KEYS = 16
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,", re.ASCII)
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_IMAGE_NAMES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file of the last user message, as `api.attachments` reads one: its name, MIME
    type and base64 data (checked there)."""

    name: str
    mime_type: str | None
    data: str


@dataclass(frozen=True, slots=True)
class CompletionAsk:
    """What a chat completion request asks, checked."""

    model: str
    messages: tuple[Sent, ...]
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    rounds: int | None = None  # metadata.rounds
    bot: BotRef | None = None  # metadata.bot (None: none named)
    files: tuple[SentFile, ...] = ()  # the last user message's


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
    messages, files = _messages(body.get("messages"), max_input_chars)
    return CompletionAsk(
        model=model,
        messages=messages,
        files=files,
        stream=stream,
        include_usage=_include_usage(body.get("stream_options"), stream),
        user=_user(body.get("user")),
        rounds=_rounds(body.get("metadata"), max_rounds),
        bot=_bot(body.get("metadata")),
    )


def _messages(value: Any, max_input_chars: int) -> tuple[tuple[Sent, ...], tuple[SentFile, ...]]:
    """The messages, and the files of the last one when it is the user's."""
    if not isinstance(value, list) or not value:
        raise invalid("messages: a non-empty list of messages is required", "messages")
    if len(value) > MAX_MESSAGES:
        raise invalid(
            f"messages: at most {MAX_MESSAGES} messages are taken; start a new chat",
            "messages",
        )
    sent = []
    files: list[SentFile] = []
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
        text, files = _content(message.get("content"), f"{where}.content", ROLES[role] == "user")
        if ROLES[role] != "assistant" and len(text) > max_input_chars:
            raise invalid(
                f"{where}.content: over MAX_INPUT_CHARS ({max_input_chars} characters)",
                f"{where}.content",
                code="string_above_max_length",
            )
        sent.append(Sent(ROLES[role], text))
    return tuple(sent), tuple(files)


def _content(content: Any, where: str, files_allowed: bool) -> tuple[str, list[SentFile]]:
    """A message's text (a string, or the text parts of a list of content parts) and its
    files (a user message's parts)."""
    files: list[SentFile] = []
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for index, part in enumerate(content):
            at = f"{where}[{index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif kind in ("image_url", "file", "input_audio") and files_allowed:
                files.append(_file(part, kind, at, len(files)))
                if len(files) > MAX_ATTACHMENTS:
                    raise invalid(f"{where}: at most {MAX_ATTACHMENTS} files a message", at)
            else:
                raise invalid(f"{at}: a content part must be text or a user's file", at)
        text = "\n".join(pieces)
    else:
        raise invalid(f"{where}: must be a string or a list of content parts", where)
    if "\x00" in text:
        raise invalid(f"{where}: NUL characters are not taken", where)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"{where}: unpaired surrogates are not text", where) from None
    return text, files


def _file(part: dict[str, Any], kind: str, at: str, number: int) -> SentFile:
    """A file content part as an attachment (its base64 checked by `api.attachments`)."""
    inner = part.get(kind)
    if not isinstance(inner, dict):
        raise invalid(f"{at}.{kind}: must be an object", f"{at}.{kind}")
    if kind == "input_audio":
        data, audio = inner.get("data"), inner.get("format")
        if not isinstance(data, str) or audio not in _AUDIO_TYPES:
            raise invalid(f"{at}.input_audio: base64 `data` and a `format` of wav or mp3", at)
        return SentFile(f"voice.{audio}", _AUDIO_TYPES[audio], data)
    url = inner.get("url") if kind == "image_url" else inner.get("file_data")
    if not isinstance(url, str) or (found := _DATA_URL.match(url)) is None:
        field = "image_url.url" if kind == "image_url" else "file.file_data"
        raise invalid(
            f"{at}.{field}: a data: URL with base64 data (the server fetches nothing)",
            f"{at}.{field}",
        )
    mime = found[1]
    if kind == "image_url":
        name = f"image-{number + 1}.{_IMAGE_NAMES.get(mime or '', 'png')}"
    else:
        given = inner.get("filename")
        name = given if isinstance(given, str) and 0 < len(given) <= 255 else f"file-{number + 1}"
        name = "".join(c for c in name if c.isprintable())
    return SentFile(name or f"file-{number + 1}", mime, url[found.end() :])


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


def _bot(metadata: Any) -> BotRef | None:
    """`metadata.bot` (checked an object by `_rounds`), the deployment's own bot without it."""
    value = metadata.get("bot") if isinstance(metadata, dict) else None
    try:
        return parse_bot(value, "metadata.bot")
    except ApiError as exc:
        raise invalid(exc.message, "metadata.bot") from None


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
