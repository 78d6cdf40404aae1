"""`python -m bot console` as a real process with piped stdin, against the fake model server:
what a person typing in a terminal sees."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.model_server import FakeModelServer


async def console(tmp_path: Path, model: FakeModelServer, lines: list[str]) -> tuple[int, str]:
    """Run the console with `lines` as its input (then EOF); return exit code and stdout."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MAX_RETRIES": "0",
        "DB_PATH": str(tmp_path / "console.sqlite3"),
        "LOG_LEVEL": "WARNING",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "console",
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    data = "".join(line + "\n" for line in lines).encode()
    out, err = await asyncio.wait_for(process.communicate(data), 30)
    assert "Traceback" not in err.decode(), err.decode()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_a_consultation_with_commands(tmp_path: Path, model_server: FakeModelServer) -> None:
    """A question streams an answer with its round; /status, /reset, /rounds and /quit work."""
    model_server.enqueue("Which budget do you have in mind?", chunk_size=3)
    code, out = await console(
        tmp_path,
        model_server,
        [
            "Help me choose a laptop",
            "/status",
            "/reset",
            "/status",
            "/rounds 1",
            "A quick question",
            "/quit",
            "never read",
        ],
    )
    assert code == 0
    assert out.count("Which budget do you have in mind?") == 1
    assert "[round 1 of 3]" in out
    assert "[1 of 3 rounds answered" in out
    assert "[reset]" in out
    assert "[no active consultation" in out
    assert "[rounds: 1, next answer is final]" in out
    assert "Reply to: A quick question\n[final answer, consultation complete]" in out
    assert len(model_server.requests) == 2
    assert "True" not in out and "False" not in out


async def test_bad_input_gets_a_clear_line_and_no_model_call(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Invalid /rounds values, /help and unknown commands are answered locally, never sent to
    the model; EOF ends the session with exit code 0."""
    code, out = await console(
        tmp_path,
        model_server,
        ["/rounds abc", "/rounds 0", "/rounds", "/help", "/foo", "", "/retry"],
    )
    assert code == 0
    assert model_server.requests == []
    assert "invalid literal" not in out
    assert out.count("[rounds must be a whole number from 1 to 10]") == 2
    assert "[rounds: 3 (1–10)]" in out
    assert out.count("/rounds N") == 2  # the greeting and /help
    assert "[unknown command /foo: /help lists the commands]" in out
    assert "[no message is waiting for an answer]" in out
    assert out.endswith("\n")


async def test_a_model_error_keeps_the_message_for_retry(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A failed call says so; /retry answers the saved message, and a restart resumes it."""
    model_server.enqueue("down", status=500)
    code, out = await console(tmp_path, model_server, ["Is my message kept?", "/retry"])
    assert code == 0
    assert "model error" in out and "/retry" in out
    assert "Reply to: Is my message kept?\n[round 1 of 3]" in out
    code, out = await console(tmp_path, model_server, ["/status"])
    assert "(resuming: 1 of 3 rounds answered)" in out


async def test_an_answer_cut_off_by_the_length_limit_says_so(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A final answer still cut off after every continuation is printed whole, with a note."""
    for n in range(4):
        model_server.enqueue(f"Part {n} of a very long answer. ", finish_reason="length")
    code, out = await console(tmp_path, model_server, ["/rounds 1", "Tell me everything"])
    assert code == 0
    assert "Part 0" in out and "Part 3" in out
    assert "[final answer (it may be incomplete: it was cut off before its end)" in out
