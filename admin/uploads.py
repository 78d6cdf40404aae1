"""Files uploaded to the console: a multipart body read to its end, within bounds, before
any file is loaded.

The gate (`admin.auth.read_form`) reads a multipart form's leading text fields — its
CSRF token among them — and stops at the first file, handing the rest of the body on as
`PendingFiles`; no byte of a file is read before the token was checked. `read_upload`
then reads the rest into anonymous temporary files, so loading (parsing, cutting,
storing: seconds a document) starts only once the whole body is in, never holding the
connection past the server's body deadline (HTTP_BODY_TIMEOUT_SECONDS), and the whole
upload is judged before anything is stored.

Invariants:
- memory holds at most `SPOOL_CHUNK` of a file while it is read; each file is kept (on
  disk, unlinked) up to `max_bytes`, a longer one is read on to its end without being
  kept and comes back with its size and no data;
- the files' bytes read, kept or not, stop at `max_total`: past it nothing more is read
  and the upload is refused (`Upload.refused`); so is one that breaks off or is
  malformed (a part without its closing boundary, headers the parser refuses), and one
  holding more than `max_files` files (the ones past it counted, never kept);
- a file input left empty (no name, no bytes: what a browser sends when no file was
  chosen) is no file; parts are kept as sent (no content or transfer encoding undone),
  so nothing unpacks to more than was sent;
- `Upload.close` removes every file kept; the caller closes it whatever happens.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from enum import Enum
from typing import IO

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

CHUNK = 64 * 1024
SPOOL_CHUNK = 1024 * 1024
"""Bytes of a file gathered in memory before they are written to its temporary file."""
BROKEN_BODY = (ValueError, RuntimeError, ConnectionError, HttpProcessingError, web.HTTPException)
"""What reading a malformed or cut multipart body raises (aiohttp's parser, part headers
past the server's line limit, the stream's end)."""


@dataclass(slots=True)
class PendingFiles:
    """The rest of a multipart body once its leading fields were read: its reader and
    the first file part, not yet read."""

    reader: MultipartReader
    first: BodyPartReader


class Refusal(Enum):
    """Why a whole upload is refused, nothing of it loaded."""

    BROKEN = "broken"  # it broke off, or a part is malformed
    OVER_TOTAL = "over_total"  # its files passed the upload's limit
    TOO_MANY = "too_many"  # more than `max_files` files


@dataclass(slots=True)
class UploadedFile:
    """One file: `name` as the client sent it, `size` its bytes; `kept` holds them, or is
    None when the file is over the limit."""

    name: str
    size: int
    kept: IO[bytes] | None

    async def data(self) -> bytes:
        """The file's bytes (only for a file kept)."""
        assert self.kept is not None
        return await asyncio.to_thread(_read_back, self.kept)


@dataclass(slots=True)
class Upload:
    """What a body held: its `files` (at most `max_files`), how many it `given` in all,
    and why it is `refused`, if it is."""

    files: list[UploadedFile] = field(default_factory=list)
    given: int = 0
    refused: Refusal | None = None

    def close(self) -> None:
        for file in self.files:
            if file.kept is not None:
                file.kept.close()


class _Stopped(Exception):
    def __init__(self, why: Refusal) -> None:
        self.why = why


async def read_upload(
    pending: PendingFiles, *, max_bytes: int, max_files: int, max_total: int
) -> Upload:
    """Read the body's files to its end (see the module's bounds)."""
    upload = Upload()
    reading = _Reading(pending.reader, max_total)
    part: BodyPartReader | None = pending.first
    try:
        while part is not None:
            if part.filename is None:  # a field after the files: the form's come first
                await reading.skip(part)
            else:
                first = await reading.chunk(part)
                if first or part.filename:  # else an empty file input: no file
                    upload.given += 1
                    if upload.given > max_files:
                        await reading.skip(part)
                    else:
                        upload.files.append(await reading.keep(part, first, max_bytes))
            part = await reading.next_part()
    except _Stopped as stopped:
        upload.refused = stopped.why
        return upload
    if upload.given > max_files:
        upload.refused = Refusal.TOO_MANY
    return upload


class _Reading:
    """One body's parts read chunk by chunk, every byte counted against `max_total`."""

    def __init__(self, reader: MultipartReader, max_total: int) -> None:
        self._reader = reader
        self._max_total = max_total
        self._total = 0

    async def next_part(self) -> BodyPartReader | None:
        try:
            found = await self._reader.next()
        except BROKEN_BODY:
            raise _Stopped(Refusal.BROKEN) from None
        if found is None:
            return None
        if not isinstance(found, BodyPartReader):  # a nested multipart: no form's
            raise _Stopped(Refusal.BROKEN)
        return found

    async def chunk(self, part: BodyPartReader) -> bytes:
        """The part's next bytes; b"" at its end (`_Stopped` if the body ended first)."""
        try:
            data = await part.read_chunk(CHUNK)
        except BROKEN_BODY:
            raise _Stopped(Refusal.BROKEN) from None
        if not data:
            if not part.at_eof():  # the body ended before the part's closing boundary
                raise _Stopped(Refusal.BROKEN)
            return b""
        self._total += len(data)
        if self._total > self._max_total:
            raise _Stopped(Refusal.OVER_TOTAL)
        return data

    async def skip(self, part: BodyPartReader) -> int:
        """Read the rest of `part` keeping nothing; how many bytes that was."""
        size = 0
        while data := await self.chunk(part):
            size += len(data)
        return size

    async def keep(self, part: BodyPartReader, first: bytes, max_bytes: int) -> UploadedFile:
        """The file `part` (its `first` bytes already read), kept up to `max_bytes`."""
        name = part.filename or ""
        kept = await asyncio.to_thread(tempfile.TemporaryFile)
        size = 0
        gathered = bytearray()
        data = first
        try:
            while data:
                size += len(data)
                if size > max_bytes:
                    kept.close()
                    return UploadedFile(name, size + await self.skip(part), None)
                gathered += data
                if len(gathered) >= SPOOL_CHUNK:
                    await asyncio.to_thread(kept.write, bytes(gathered))
                    gathered.clear()
                data = await self.chunk(part)
            await asyncio.to_thread(kept.write, bytes(gathered))
        except BaseException:
            kept.close()
            raise
        return UploadedFile(name, size, kept)


def _read_back(file: IO[bytes]) -> bytes:
    file.seek(0)
    return file.read()
