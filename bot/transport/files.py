"""Files in Telegram messages: which one a message carries, its name, and fetching it.

Invariants: a message yields at most one `TelegramFile` (voice, audio, video note,
document or photo), described by plain values known before anything is downloaded, so
size limits are checked first and an oversized file is never fetched. Names follow what
transcription services and readers expect: a voice note is OGG/Opus, named "voice.ogg";
a video note "video_note.mp4"; an audio file keeps its name or gets an extension from its
MIME type. Of a photo's sizes the largest within the image byte limit is taken (else the
smallest, which the limit then refuses). A download is bounded by a timeout and by the
byte limit it is given: the limit is enforced while the bytes arrive (a message may omit
the size), so at most the limit plus one byte is ever read, and nothing is kept of a file
over it. Every way a download fails becomes one `DownloadFailed`, except that a file over
the limit, or one Telegram will not hand out for its size, is refused (`AttachmentRefused`,
TOO_LARGE) like any file over a limit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from telegram import Message, PhotoSize
from telegram.error import BadRequest, TelegramError

from bot.transport.target import AnyBot
from bot.transport.telegram_http import AiohttpRequest, BodyTooLarge
from core.domain.errors import AttachmentProblem, AttachmentRefused

TELEGRAM_DOWNLOAD_LIMIT = 20_000_000
"""The largest file the cloud Bot API hands out (getFile answers "file is too big"),
as users are told it: 20 MB."""

_AUDIO_EXTENSIONS = {
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/m4a": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "aac",
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
}


@dataclass(frozen=True, slots=True)
class TelegramFile:
    """A file a message carries. `kind` is the intake's: "voice" (voice and video notes,
    audio), "photo" (photos, images sent as files) or "document"."""

    kind: str
    file_id: str
    file_size: int | None
    name: str
    mime: str | None

    @property
    def kind_hint(self) -> str | None:
        """What the reader is told the file is; a document's kind it decides itself."""
        return None if self.kind == "document" else self.kind


class DownloadFailed(Exception):
    """The file could not be fetched from Telegram (gone, network, timeout)."""


def file_of(message: Message | None, *, max_image_bytes: int | None = None) -> TelegramFile | None:
    """The file `message` carries, or None (text, stickers, videos, anything else)."""
    if message is None:
        return None
    if message.voice is not None:
        voice = message.voice
        voice_mime = voice.mime_type or "audio/ogg"
        return TelegramFile("voice", voice.file_id, voice.file_size, "voice.ogg", voice_mime)
    if message.video_note is not None:
        note = message.video_note
        return TelegramFile("voice", note.file_id, note.file_size, "video_note.mp4", "video/mp4")
    if message.audio is not None:
        audio = message.audio
        name = audio.file_name or f"audio.{audio_extension(audio.mime_type)}"
        return TelegramFile("voice", audio.file_id, audio.file_size, name, audio.mime_type)
    if message.document is not None:
        document = message.document
        mime = document.mime_type
        return TelegramFile(
            _document_kind(mime),
            document.file_id,
            document.file_size,
            document.file_name or "document",
            mime,
        )
    if message.photo:
        size = photo_size(message.photo, max_image_bytes)
        return TelegramFile("photo", size.file_id, size.file_size, "photo.jpg", "image/jpeg")
    return None


def audio_extension(mime: str | None) -> str:
    """The usual extension for an audio MIME type (mp3 when it says nothing known)."""
    return _AUDIO_EXTENSIONS.get((mime or "").split(";")[0].strip().lower(), "mp3")


def photo_size(sizes: tuple[PhotoSize, ...], max_bytes: int | None) -> PhotoSize:
    """The largest size within `max_bytes` (a size of unknown bytes counts as within);
    the smallest when none is."""
    by_area = sorted(sizes, key=lambda size: size.width * size.height)
    fitting = [
        size
        for size in by_area
        if max_bytes is None or size.file_size is None or size.file_size <= max_bytes
    ]
    return fitting[-1] if fitting else by_area[0]


def _document_kind(mime: str | None) -> str:
    """Images and audio sent as files are read as photos and voice; the rest as documents."""
    major = (mime or "").split("/", 1)[0].lower()
    return {"image": "photo", "audio": "voice"}.get(major, "document")


async def download(
    bot: AnyBot,
    file: TelegramFile,
    *,
    timeout: float,  # noqa: ASYNC109
    max_bytes: int,
) -> bytes:
    """The file's bytes: getFile, then its download, within `timeout` seconds in all and
    never past `max_bytes`; raises `DownloadFailed`, or `AttachmentRefused` for a file over
    `max_bytes` or too big for Telegram. The bot must send its requests through
    `AiohttpRequest` (as `bot.app` builds it), whose `fetch` enforces the limit."""
    request = bot.request
    if not isinstance(request, AiohttpRequest):
        raise TypeError("downloads need the bot's requests made by AiohttpRequest")
    try:
        async with asyncio.timeout(timeout):
            remote = await bot.get_file(file.file_id)
            if remote.file_path is None:
                raise DownloadFailed("getFile gave no file_path")
            return await request.fetch(_encoded(remote.file_path), max_bytes=max_bytes)
    except BodyTooLarge as exc:
        raise AttachmentRefused(
            AttachmentProblem.TOO_LARGE, str(exc), limit=max_bytes, name=file.name
        ) from exc
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise AttachmentRefused(
                AttachmentProblem.TOO_LARGE,
                exc.message,
                limit=TELEGRAM_DOWNLOAD_LIMIT,
                name=file.name,
            ) from exc
        raise DownloadFailed(exc.message) from exc
    except TelegramError as exc:
        raise DownloadFailed(f"{type(exc).__name__}: {exc.message}") from exc
    except TimeoutError as exc:
        raise DownloadFailed(f"no file within {timeout:g} s") from exc


def _encoded(url: str) -> str:
    """`url` with its path percent-encoded (a file path may hold any UTF-8 character)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=quote(parts.path)))
