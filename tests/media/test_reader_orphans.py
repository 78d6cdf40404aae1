"""A reader process never outlives the process it reads for (`media.reader_process`): a
bot killed with SIGKILL takes its busy readers with it (the kernel's parent-death signal),
a reader whose answer pipe closes ends mid-read (the portable way), and a reader whose
parent is gone before it could ask for that signal exits at once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakes.hostile_documents import costly_pages_pdf
from media.frames import LENGTH, frame

ROOT = Path(__file__).resolve().parents[2]
# Minutes of parsing: without a way to notice its parent is gone, a reader reads on.
COSTLY = costly_pages_pdf(pages=600)

PARENT = """
import asyncio
from media.config import ReaderConfig
from media.reader_pool import DocumentReaders
from fakes.hostile_documents import costly_pages_pdf
from tests.media.test_media_documents import pdf_with_text

async def main() -> None:
    readers = DocumentReaders(ReaderConfig(processes=1, timeout_seconds=600))
    read = dict(mime=None, max_bytes=10_000_000, max_chars=30_000)
    await readers.read(pdf_with_text("warm"), name="warm.pdf", **read)  # a reader is up
    reading = asyncio.create_task(
        readers.read(costly_pages_pdf(pages=600), name="pages.pdf", **read)
    )
    for _ in range(3):  # the request is written to the reader before the first wait
        await asyncio.sleep(0)
    print("sent", flush=True)
    await reading

asyncio.run(main())
"""


def children(parent: int) -> list[int]:
    """The pids of `parent`'s reader processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = (entry / "status").read_text()
            if (
                f"\nPPid:\t{parent}\n" in status
                and b"media.reader_process" in (entry / "cmdline").read_bytes()
            ):
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether `pid` still runs: a zombie (ended, not yet reaped by whoever adopted it)
    does not."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "zombie" not in state


def ended_soon(pid: int) -> bool:
    """Whether `pid` ends within a bounded wait (20 s, minutes short of the reader's
    CPU limit)."""
    for _ in range(200):
        if not running(pid):
            return True
        time.sleep(0.1)
    return False


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def reader_command(parent: int) -> list[str]:
    return [sys.executable, "-m", "media.reader_process", "256", str(parent)]


def request(data: bytes) -> bytes:
    header = {"name": "pages.pdf", "mime": None, "max_bytes": 10_000_000}
    header |= {"max_chars": 30_000, "size": len(data), "cpu_seconds": 600}
    return frame(json.dumps(header).encode()) + frame(data)


def test_a_busy_reader_dies_with_its_parent_killed_by_sigkill() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    readers: list[int] = []
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline() == b"sent\n"
        readers = children(parent.pid)
        assert len(readers) == 1

        parent.kill()
        parent.wait()

        assert ended_soon(readers[0])
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        for pid in readers:
            kill(pid)


def test_a_busy_reader_whose_answer_pipe_closes_ends() -> None:
    """Its parent lives on (no parent-death signal), but nobody can read the answer."""
    with subprocess.Popen(
        reader_command(os.getpid()), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as reader:
        try:
            assert reader.stdin is not None and reader.stdout is not None
            assert reader.stdout.read(LENGTH.size) == LENGTH.pack(0)  # ready
            reader.stdin.write(request(COSTLY))
            reader.stdin.flush()

            reader.stdout.close()

            assert ended_soon(reader.pid)
        finally:
            reader.kill()


def test_a_reader_whose_parent_is_already_gone_exits_without_starting() -> None:
    """Started for a process that is not (any longer) its parent: no ready frame."""
    reader = subprocess.run(
        reader_command(os.getpid() + 1_000_000), cwd=ROOT, input=b"", capture_output=True
    )

    assert reader.stdout == b""
    assert reader.returncode != 0
