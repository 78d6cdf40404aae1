"""Files users send, as the fake Bot API serves them: `getFile` and the download URL.

Invariant: a test registers bytes and gets the file object Telegram would put in a message
(voice, audio, video note, document, photo sizes); `getFile` answers like Telegram
(`file_path` to download from, "file is too big" over 20 MB, "invalid file_id" for an
unknown one) and `GET /file/bot<token>/<file_path>` returns the bytes. The size a message
announces may be set apart from the bytes (`size=`), so a 25 MB voice note needs no 25 MB,
or left out (`size=UNANNOUNCED`), as Telegram does for some documents: such a file is then
served without a Content-Length, in chunks, and `sent` counts the bytes that went out, so a
test sees where a download stopped.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]

GET_FILE_LIMIT = 20 * 1024 * 1024
"""Telegram's cloud Bot API hands out files up to 20 MB."""

UNANNOUNCED = -1
"""`size=` for a file whose message carries no `file_size`."""

_FOLDERS = {
    "voice": "voice",
    "audio": "music",
    "video_note": "video_notes",
    "document": "documents",
    "photo": "photos",
}


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    unique_id: str
    data: bytes
    size: int | None  # what Telegram reports (the bytes' length unless a test says else)
    path: str


class BotFiles:
    """Mixed into the fake Bot API: the files it can hand out."""

    def __init__(self) -> None:
        self.files: dict[str, StoredFile] = {}
        self.by_path: dict[str, StoredFile] = {}
        self._file_numbers = itertools.count(1)
        self.sent: dict[str, int] = {}  # bytes sent so far by file path (unannounced files)

    def register_file(
        self, data: bytes, *, kind: str = "document", extension: str = "", size: int | None = None
    ) -> StoredFile:
        """Keep `data` for download; `size` is the size Telegram reports (default: the bytes;
        `UNANNOUNCED`: none)."""
        number = next(self._file_numbers)
        path = f"{_FOLDERS.get(kind, 'documents')}/file_{number}{extension}"
        reported = len(data) if size is None else None if size == UNANNOUNCED else size
        stored = StoredFile(f"FILE{number}-{kind}", f"U{number}", data, reported, path)
        self.files[stored.file_id] = stored
        self.by_path[path] = stored
        return stored

    # -- the message fields Telegram sends ---------------------------------------------------

    def voice(
        self, data: bytes, *, size: int | None = None, mime: str | None = "audio/ogg"
    ) -> JSON:
        stored = self.register_file(data, kind="voice", extension=".oga", size=size)
        voice = {**_file_fields(stored), "duration": 3}
        if mime is not None:
            voice["mime_type"] = mime
        return {"voice": voice}

    def audio(
        self, data: bytes, *, name: str | None = None, mime: str | None = "audio/mpeg"
    ) -> JSON:
        stored = self.register_file(data, kind="audio", extension=".mp3")
        audio = {**_file_fields(stored), "duration": 3}
        if name is not None:
            audio["file_name"] = name
        if mime is not None:
            audio["mime_type"] = mime
        return {"audio": audio}

    def video_note(self, data: bytes) -> JSON:
        stored = self.register_file(data, kind="video_note", extension=".mp4")
        return {"video_note": {**_file_fields(stored), "length": 240, "duration": 3}}

    def document(
        self, data: bytes, name: str | None, mime: str | None = None, *, size: int | None = None
    ) -> JSON:
        extension = "." + name.rsplit(".", 1)[-1] if name and "." in name else ""
        stored = self.register_file(data, kind="document", extension=extension, size=size)
        document = _file_fields(stored)
        if name is not None:
            document["file_name"] = name
        if mime is not None:
            document["mime_type"] = mime
        return {"document": document}

    def photo(self, *sizes: bytes | tuple[bytes, int]) -> JSON:
        """A photo in several sizes, smallest first as Telegram lists them; a size given as
        `(bytes, claimed size)` reports the claimed size."""
        photo = []
        for index, given in enumerate(sizes):
            data, size = given if isinstance(given, tuple) else (given, None)
            stored = self.register_file(data, kind="photo", extension=".jpg", size=size)
            side = 90 * (index + 1)
            photo.append({**_file_fields(stored), "width": side, "height": side})
        return {"photo": photo}

    # -- the Bot API side --------------------------------------------------------------------

    def get_file(self, file_id: str) -> tuple[int, str | JSON]:
        """(200, the File object) or (400, Telegram's description)."""
        stored = self.files.get(file_id)
        if stored is None:
            return 400, "Bad Request: invalid file_id"
        if (len(stored.data) if stored.size is None else stored.size) > GET_FILE_LIMIT:
            return 400, "Bad Request: file is too big"
        return 200, {**_file_fields(stored), "file_path": stored.path}


def _file_fields(stored: StoredFile) -> JSON:
    fields: JSON = {"file_id": stored.file_id, "file_unique_id": stored.unique_id}
    if stored.size is not None:
        fields["file_size"] = stored.size
    return fields
