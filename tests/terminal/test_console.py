"""`python -m bot console` as a real process with piped stdin, against the fake model server:
what a person typing in a terminal sees."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from fakes.model_server import FakeModelServer
from terminal.repl import STOPPED


def console_env(tmp_path: Path, model: FakeModelServer) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MAX_RETRIES": "0",
        "DB_PATH": str(tmp_path / "console.sqlite3"),
        "LOG_LEVEL": "WARNING",
        "LLM_STRUCTURED_QUESTIONS": "off",  # structured rounds have tests of their own
        "MEMORY_ENABLED": "false",  # client memory has tests of its own
    }


async def console(
    tmp_path: Path, model: FakeModelServer, lines: list[str], **settings: str
) -> tuple[int, str]:
    """Run the console with `lines` as its input (then EOF), `settings` added to its
    environment; return exit code and stdout."""
    env = console_env(tmp_path, model) | settings
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
    try:
        out, err = await asyncio.wait_for(process.communicate(data), 30)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"the console did not finish its input: {lines}") from None
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
    assert "Reply to: A quick question\n[final answer, consultation complete; ask about it" in out
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


PASSAGE = (
    "Check the hinge first: a loose hinge wobbles when you type, and the screen drifts "
    "backwards on a train. Then the keyboard: press each key near the edges, listen for "
    "rattles, and make sure the backlight covers every row evenly. "
)


async def test_an_answer_cut_for_looping_shows_the_kept_text_once_and_says_so(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A model that repeats a 200+ character passage is stopped: the kept text is not
    printed a second time, and a line says the repeated tail was dropped."""
    assert len(PASSAGE) > 200
    model_server.enqueue("Here is my checklist. " + PASSAGE * 12, chunk_size=40)
    code, out = await console(tmp_path, model_server, ["/rounds 1", "How to test a laptop?"])
    assert code == 0
    assert out.count("Here is my checklist.") == 1
    assert out.count(PASSAGE) < 12
    assert "[the answer began repeating itself: the repeated part above" in out
    assert "was dropped]" in out
    assert "[final answer" in out


async def test_sigterm_stops_the_console_with_a_line_and_keeps_the_consultation(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """SIGTERM at the prompt (stdin still open) prints one line and exits 0; the
    consultation is there on the next start."""
    model_server.enqueue("Which budget do you have in mind?")
    env = console_env(tmp_path, model_server)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"Help me choose a laptop\n")
    await process.stdin.drain()
    seen = b""
    while b"[round 1 of 3]" not in seen or not seen.endswith(b"> "):
        chunk = await asyncio.wait_for(process.stdout.read(1024), 30)
        assert chunk, seen.decode()
        seen += chunk
    process.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode() and "Fatal" not in err.decode(), err.decode()
    assert out.decode().rstrip().endswith(STOPPED)
    code, again = await console(tmp_path, model_server, ["/status"])
    assert code == 0
    assert "(resuming: 1 of 3 rounds answered)" in again


async def test_sigterm_mid_answer_keeps_the_message_for_retry(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """SIGTERM while the model is answering: the call is dropped, the line is printed, the
    exit code is 0, and the next start finds the message waiting for /retry."""
    model_server.enqueue("never finished", hold=asyncio.Event())
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", env=console_env(tmp_path, model_server),
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(b"Help me choose a laptop\n")
    await process.stdin.drain()
    await model_server.wait_requests(1, timeout=30)
    process.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode(), err.decode()
    assert out.decode().rstrip().endswith(STOPPED)
    model_server.enqueue("Which budget do you have in mind?")
    code, again = await console(tmp_path, model_server, ["/status", "/retry"])
    assert code == 0
    assert "your last message awaits an answer: /retry" in again
    assert "Which budget do you have in mind?" in again


async def test_memory_is_noted_listed_deleted_and_turned_off(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A completed consultation's facts are noted after its answer, listed by /memory,
    deleted by number (a number not listed deletes nothing), and /memory off stops both
    using and noting them."""
    model_server.enqueue("Plant in May.")
    model_server.enqueue("Lives in Riga\nGrows tomatoes")
    code, out = await console(
        tmp_path,
        model_server,
        [
            "/rounds 1",
            "I live in Riga. When do I plant tomatoes?",
            "/memory",
            "/memory delete 7",
            "/memory delete x",
            "/memory delete 1",
            "/memory",
            "/memory off",
            "Another question",
            "/memory",
            "/memory sideways",
        ],
        MEMORY_ENABLED="true",
    )
    assert code == 0
    assert "Plant in May.\n[final answer, consultation complete; ask about it" in out
    assert "[I noted lasting facts you told me" in out
    assert "1. Grows tomatoes\n2. Lives in Riga" in out
    assert "[no fact number 7: /memory lists them]" in out
    assert "[no fact number x: /memory lists them]" in out
    assert "[deleted: Grows tomatoes]" in out
    assert "1. Lives in Riga\n" in out
    assert "[memory off]" in out and "[memory is off: /memory on to turn it on]" in out
    assert "/memory delete N" in out  # the usage line
    assert len(model_server.requests) == 3  # no extraction while off
    assert "What this person told you" not in str(model_server.requests[2]["messages"][0])


async def test_usage_counts_the_replies_and_the_memory_note_at_their_prices(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """/usage shows the chat's tokens and cost today and this month: the final answer and
    the memory extraction after it, priced by MODEL_PRICES; before any call, zero."""
    model_server.enqueue("Plant in May.", usage={"prompt_tokens": 100, "completion_tokens": 4})
    model_server.enqueue("Lives in Riga", usage={"prompt_tokens": 50, "completion_tokens": 6})
    code, out = await console(
        tmp_path,
        model_server,
        ["/usage", "/rounds 1", "I live in Riga. When do I plant tomatoes?", "/usage"],
        MEMORY_ENABLED="true",
        MODEL_PRICES='{"gpt-4o-mini": {"input": 1000, "output": 2000}}',
    )
    assert code == 0
    assert "[today: 0 tokens in, 0 out, $0.0000]" in out
    assert "[today: 150 tokens in, 10 out, $0.1700]" in out
    assert "[this month: 150 tokens in, 10 out, $0.1700]" in out
