"""Files in an API request: base64 inside the JSON body, checked before they are decoded.

Invariants:
- a file's size is computed from its base64 length and checked against its kind's limit
  (`media.intake.Intake.check_head`) before the data is decoded; only a small head is
  decoded first, so the kind can be told by its magic bytes as well as its name and type;
- the data must be strict base64 (standard alphabet, `=` padding, no whitespace or line
  breaks): anything else is the client's mistake (VALIDATION_ERROR), not a refused file;
- `/api/chat` admits a body of API_MAX_BODY_BYTES plus the base64 size of the largest
  single file the deployment takes (`chat_body_limit`), so one file at its limit fits and
  the server's memory per request stays bounded.
"""

from __future__ import annotations

import asyncio
import binascii
import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from api.errors import ApiError
from core.domain.attachments import Attachment
from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.config import IntakeConfig
from media.intake import Intake

MAX_ATTACHMENTS = 10
"""Files per request (Telegram's album limit)."""

HEAD_CHARS = 4096
"""Base64 characters decoded before the size check (3 KB), to tell the file's kind."""

BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![\s\S])"
"""What the OpenAPI document says `data` is: standard, padded base64 (RFC 4648 §4)."""


class AttachmentBody(Protocol):
    """One `attachments` item as `api.schemas` parsed it (or a file part of the
    OpenAI-compatible endpoint, `api.openai_compat.requests.SentFile`), read only."""

    @property
    def name(self) -> str: ...

    @property
    def mime_type(self) -> str | None: ...

    @property
    def data(self) -> str: ...


def base64_length(size: int) -> int:
    """How many base64 characters carry `size` bytes (padded)."""
    return (size + 2) // 3 * 4


def largest_file(config: IntakeConfig) -> int:
    """The byte limit of the largest file this deployment takes (voice and photos count
    only when they are switched on)."""
    limits = [config.max_document_bytes]
    if config.voice:
        limits.append(config.max_voice_bytes)
    if config.vision:
        limits.append(config.max_image_bytes)
    return max(limits)


def chat_body_limit(max_body_bytes: int, intake: Intake | None) -> int:
    """The body limit of the chat endpoints: API_MAX_BODY_BYTES for the JSON around the
    files, plus room for one file of the largest kind, base64-encoded."""
    if intake is None:
        return max_body_bytes
    return max_body_bytes + base64_length(largest_file(intake.config))


OFF_LOOP_CHARS = 256_000
"""Base64 characters from which decoding moves to a worker thread: a 10 MB file takes tens
of milliseconds to decode, too long to hold the event loop (and every other request)."""

_DECODE_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="base64")
"""Decoding's own threads: never queued behind other work on the loop's default executor."""


async def read_attachments(
    items: Sequence[AttachmentBody], intake: Intake | None
) -> list[Attachment]:
    """`decode_attachments`, off the event loop when the files are large."""
    if sum(len(item.data) for item in items) < OFF_LOOP_CHARS:
        return decode_attachments(items, intake)
    decoding = functools.partial(decode_attachments, items, intake)
    return await asyncio.get_running_loop().run_in_executor(_DECODE_THREADS, decoding)


def decode_attachments(items: Sequence[AttachmentBody], intake: Intake | None) -> list[Attachment]:
    """Check each file's kind and size, then decode it; raise `ApiError` for data that
    is not base64, `AttachmentRefused` for a file the deployment does not take."""
    if not items:
        return []
    if intake is None:
        raise AttachmentRefused(AttachmentProblem.UNSUPPORTED, "this server takes no attachments")
    files: list[Attachment] = []
    for index, item in enumerate(items):
        field = f"attachments[{index}].data"
        size = _decoded_size(item.data)
        if size is None:
            raise _not_base64(field)
        head = Attachment(item.name, item.mime_type, _decode(item.data[:HEAD_CHARS], field))
        intake.check_head(head, size)
        files.append(Attachment(item.name, item.mime_type, _decode(item.data, field)))
    return files


def _decoded_size(data: str) -> int | None:
    """The byte count `data` decodes to, from its length alone (None: not a base64 length)."""
    if not data or len(data) % 4:
        return None
    return len(data) // 4 * 3 - len(data[-2:]) + len(data[-2:].rstrip("="))


def _decode(data: str, field: str) -> bytes:
    try:  # an ASCII str is decoded as it is: no bytes copy of the whole base64 text
        return binascii.a2b_base64(data, strict_mode=True)
    except ValueError:  # binascii.Error, or a character beyond ASCII
        raise _not_base64(field) from None


def _not_base64(field: str) -> ApiError:
    return ApiError(
        "VALIDATION_ERROR",
        f"{field}: not valid base64 (standard alphabet with = padding, no line breaks)",
    )
