"""The console in a terminal's hands: Ctrl-C while a reply streams stops the reply, not
the console; Ctrl-C at the prompt leaves; a warning logged during a reply is written
after it, never inside the streamed text. A real process against the fake model server,
its stderr on the same pipe as its stdout, as they share a terminal."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from fakes.model_server import FakeModelServer
from terminal.interrupts import INTERRUPTED
from terminal.repl import STOPPED
from tests.terminal.test_console import console_env

LONG = "Here is a long answer that streams slowly, word by word. " * 20


async def started(
    tmp_path: Path, model: FakeModelServer, **settings: str
) -> asyncio.subprocess.Process:
    env = console_env(tmp_path, model) | settings
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


async def read_until(process: asyncio.subprocess.Process, seen: bytes, wanted: bytes) -> bytes:
    assert process.stdout is not None
    while wanted not in seen:
        chunk = await asyncio.wait_for(process.stdout.read(1024), 30)
        assert chunk, seen.decode()
        seen += chunk
    return seen


async def send(process: asyncio.subprocess.Process, line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line.encode() + b"\n")
    await process.stdin.drain()


async def finish(process: asyncio.subprocess.Process, seen: bytes) -> str:
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, (seen + out).decode()
    return (seen + out).decode()


async def test_ctrl_c_while_a_reply_streams_stops_the_reply_and_the_console_goes_on(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The reply stops where it was, one line says the message is saved, the prompt comes
    back, and /retry answers the message."""
    model_server.enqueue(LONG, chunk_size=8, chunk_delay=0.05)
    model_server.enqueue("Which budget do you have in mind?")
    process = await started(tmp_path, model_server)
    await send(process, "Help me choose a laptop")
    seen = await read_until(process, b"", b"Here is a long")
    process.send_signal(signal.SIGINT)
    seen = await read_until(process, seen, INTERRUPTED.encode())
    await send(process, "/retry")
    seen = await read_until(process, seen, b"[round 1 of 3]")
    await send(process, "/quit")
    out = await finish(process, seen)
    assert LONG not in out  # the reply was stopped before its end
    assert "Which budget do you have in mind?\n[round 1 of 3]" in out
    assert STOPPED not in out and "Traceback" not in out and "KeyboardInterrupt" not in out


async def test_ctrl_c_at_the_prompt_stops_the_console(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    process = await started(tmp_path, model_server)
    seen = await read_until(process, b"", b"\n> ")
    process.send_signal(signal.SIGINT)
    out = await finish(process, seen)
    assert out.rstrip().endswith(STOPPED)


async def test_a_warning_logged_during_a_reply_is_written_after_it(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """An endpoint answering prose where a structured round was asked: the prose streams as
    the round, and the warning that says so comes after the reply's state line, on its own
    line."""
    model_server.enqueue("Which budget do you have in mind?", chunk_size=3)
    process = await started(tmp_path, model_server, LLM_STRUCTURED_QUESTIONS="auto")
    await send(process, "Help me choose a laptop")
    seen = await read_until(process, b"", b"[round 1 of 3]")
    await send(process, "/quit")
    out = await finish(process, seen)
    assert "Which budget do you have in mind?\n[round 1 of 3]\n" in out, out
    warning = next(line for line in out.splitlines() if "structured replies" in line)
    assert " WARNING core.domain.llm_format: " in warning and warning[:4].isdigit(), out
    assert out.index(warning) > out.index("[round 1 of 3]"), out


def test_held_records_are_bounded_and_keep_their_order() -> None:
    """A flood of records during one reply holds at most MAX_HELD; the rest are one line."""
    import logging

    from terminal.logs import MAX_HELD, HeldLogs

    written: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append(record.getMessage())

    held = HeldLogs([Recorder()])
    logger = logging.getLogger("tests.console.flood")
    logger.addHandler(held)
    logger.propagate = False
    try:
        with held.held():
            for n in range(MAX_HELD + 50):
                logger.warning("record %d", n)
            assert written == []
        assert written[:MAX_HELD] == [f"record {n}" for n in range(MAX_HELD)]
        assert written[MAX_HELD:] == ["50 more log records were left out"]
    finally:
        logger.removeHandler(held)
