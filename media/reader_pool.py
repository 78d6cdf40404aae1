"""A small pool of reader processes: where PDF and DOCX documents are parsed.

Invariants: a PDF or DOCX is parsed only in a reader process (`media.reader_process`),
never in this one, at most `processes` at a time (more wait their turn), and at most
`max(1, processes - 1)` of them for one owner while another owner waits, all of them for
a lone owner (`media.reader_shares`); each reader
runs with an address-space limit, a CPU-time limit per document, a minimal environment
(none of this process's secrets) and no way to write to this process but its answer. A
document not read within `timeout_seconds` has its reader killed at that moment, and a
reader that dies (its CPU or memory limit) or is interrupted (the turn cancelled) is
never used again: either way the document is refused as TOO_COSTLY and the next one
gets a fresh reader, so a hostile file costs at most one reader's limits and never this
process's memory, event loop or threads. Plain text needs no parser: it is decoded on
the pool's own threads (`media.text`, linear in the size the byte limit bounds).
Closing the pool kills every reader at once, and a reader never outlives this process,
even one killed with SIGKILL (`media.parent_death`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.config import ReaderConfig
from media.documents import Extracted, document_format, is_html, read_text
from media.frames import LENGTH, MAX_HEADER_BYTES, frame
from media.reader_shares import ReaderShares

log = logging.getLogger(__name__)

_SOURCE_ROOT = str(Path(__file__).resolve().parent.parent)
STARTUP_SECONDS = 60.0  # for a reader to import its libraries, on a loaded machine
_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")  # what a reader inherits


class ReadersClosed(RuntimeError):
    """The pool was closed (the process is stopping) before the document was read."""


class _Reader:
    """One reader process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, memory_mb: int) -> _Reader:
        environment = {key: os.environ[key] for key in _ENVIRONMENT if key in os.environ}
        environment["PYTHONPATH"] = _SOURCE_ROOT
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "media.reader_process",
            str(memory_mb),
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=environment,
        )
        reader = cls(process)
        assert process.stdout is not None
        try:  # the deadline is the document's: starting (imports) is not counted in it
            async with asyncio.timeout(STARTUP_SECONDS):
                ready = await process.stdout.readexactly(LENGTH.size)
        except BaseException:
            await asyncio.shield(reader.stop())
            raise
        if LENGTH.unpack(ready) != (0,):
            await reader.stop()
            raise RuntimeError("a document reader did not start")
        return reader

    async def ask(self, request: dict[str, Any], data: bytes, reply_limit: int) -> dict[str, Any]:
        """Send one document, wait for the answer; raises `asyncio.IncompleteReadError`
        or `ConnectionError` when the reader ends first."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(frame(json.dumps(request).encode()))
        stdin.write(LENGTH.pack(len(data)))
        stdin.write(data)
        await stdin.drain()
        (size,) = LENGTH.unpack(await stdout.readexactly(LENGTH.size))
        if size > reply_limit:
            raise ConnectionError(f"an answer of {size} bytes, over {reply_limit}")
        reply: dict[str, Any] = json.loads(await stdout.readexactly(size))
        return reply

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()

    async def stop(self) -> int:
        """Kill the reader (if it still runs) and reap it; its exit status."""
        self.kill()
        return await self.process.wait()


class DocumentReaders:
    """Reads documents' text: PDF and DOCX in reader processes, plain text on threads."""

    def __init__(self, config: ReaderConfig) -> None:
        self.config = config
        self._idle: list[_Reader] = []
        self._busy: set[_Reader] = set()
        self._shares = ReaderShares(config.processes)
        self._text_threads = ThreadPoolExecutor(
            max_workers=config.processes, thread_name_prefix="document-text"
        )
        self._closed = False

    async def __aenter__(self) -> DocumentReaders:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def read(
        self,
        data: bytes,
        *,
        name: str,
        mime: str | None,
        max_bytes: int,
        max_chars: int,
        owner: str | None = None,
        outline: bool = False,
    ) -> Extracted:
        """The text of the document `data` (see `media.parsers.read_document`); raises
        `AttachmentRefused`, TOO_COSTLY when reading it went past a reader's limits.
        `owner` (who asked) holds at most its share of the readers while another owner
        waits (`media.reader_shares`); None: no per-owner bound. With `outline`, its
        headings, pages and title too, and an HTML page read as text without its markup
        (in a reader as well)."""
        read = functools.partial(read_text, data, name=name)
        kind = document_format(data, name=name, mime=mime)
        if kind == "text" and not (outline and is_html(name, mime)):
            return await asyncio.get_running_loop().run_in_executor(self._text_threads, read)
        request = {
            "name": name,
            "mime": mime,
            "max_bytes": max_bytes,
            "max_chars": max_chars,
            "size": len(data),
            "cpu_seconds": self.config.timeout_seconds,
            "outline": outline,
        }
        async with self._shares.reader(owner):
            reply = await self._ask(request, data, reply_limit=12 * max_chars + MAX_HEADER_BYTES)
        if "problem" in reply:
            problem = AttachmentProblem(reply["problem"])
            raise AttachmentRefused(problem, str(reply.get("detail", "")), name=name or None)
        pages = tuple((int(offset), int(page)) for offset, page in reply.get("pages", ()))
        return Extracted(
            str(reply["text"]), bool(reply["complete"]), pages, str(reply.get("title", ""))
        )

    async def _ask(self, request: dict[str, Any], data: bytes, reply_limit: int) -> dict[str, Any]:
        if self._closed:
            raise ReadersClosed
        reader = self._idle.pop() if self._idle else await _Reader.start(self.config.memory_mb)
        if self._closed:  # closed while the reader started
            await asyncio.shield(reader.stop())
            raise ReadersClosed
        self._busy.add(reader)
        keep = False
        try:
            async with asyncio.timeout(self.config.timeout_seconds):
                reply = await reader.ask(request, data, reply_limit)
            keep = reply.get("problem") != AttachmentProblem.TOO_COSTLY.value
            return reply
        except TimeoutError:
            seconds = self.config.timeout_seconds
            log.warning("document %r not read in %g s", request["name"], seconds)
            raise _too_costly(request, f"not read in {seconds:g} s") from None
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            status = await asyncio.shield(reader.stop())
            if self._closed:
                raise ReadersClosed from None
            log.warning("document %r: the reader ended (%s): %s", request["name"], status, exc)
            raise _too_costly(request, f"the reader ended: {_status(status)}") from None
        finally:
            self._busy.discard(reader)
            if keep and not self._closed:
                self._idle.append(reader)
            else:  # mid-read (a deadline, a cancelled turn) or spent: never reused
                await asyncio.shield(reader.stop())  # killed, then reaped within milliseconds

    async def close(self) -> None:
        """Kill every reader now (a read in progress raises `ReadersClosed`) and stop the
        threads."""
        self._closed = True
        readers = [*self._idle, *self._busy]
        self._idle.clear()
        for reader in readers:
            with contextlib.suppress(ProcessLookupError):
                await reader.stop()
        self._text_threads.shutdown(wait=False, cancel_futures=True)


def _too_costly(request: dict[str, Any], detail: str) -> AttachmentRefused:
    return AttachmentRefused(AttachmentProblem.TOO_COSTLY, detail, name=request["name"] or None)


def _status(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-status).name
    return f"exit status {status}"
