"""`python -m bot console` as a real process: the conversation on stdout stays free of log
lines, and model errors no retry can fix say what to do."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

from fakes.model_server import CONTEXT_ERRORS, FakeModelServer


async def console(
    tmp_path: Path, base_url: str, lines: list[str], **values: str
) -> tuple[str, str]:
    """Run the console with `lines` as its input (then EOF); return stdout after the help
    text, and stderr."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": base_url,
        "DB_PATH": str(tmp_path / "console.sqlite3"),
        **values,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    data = "".join(line + "\n" for line in lines).encode()
    out, err = await asyncio.wait_for(process.communicate(data), 30)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode(), err.decode()
    return out.decode().split("this list", 1)[1], err.decode()  # what follows the help


async def test_the_sdks_retry_lines_stay_out_of_the_console(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """At the default LOG_LEVEL, a call the SDK retries prints no "Retrying request" line
    anywhere: the conversation shows only the answer."""
    model_server.enqueue("busy", status=500)
    code_out, code_err = await console(
        tmp_path, model_server.base_url, ["Hello", "/quit"], LLM_MAX_RETRIES="1"
    )

    assert "Reply to: Hello" in code_out
    assert "Retrying" not in code_out + code_err
    assert "HTTP Request" not in code_out + code_err


async def test_a_conversation_over_the_context_says_reset(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A context overflow tells the user to /reset or send less (not to retry), and the
    operator's line on stderr names HISTORY_BUDGET_CHARS."""
    message, code = CONTEXT_ERRORS["vllm"]
    model_server.enqueue(message, status=400, error_code=code)

    out, err = await console(tmp_path, model_server.base_url, ["A long story", "/quit"])

    assert "too long" in out and "/reset" in out and "/retry" not in out
    assert "HISTORY_BUDGET_CHARS" in err and "4096 tokens" in err
    assert "HISTORY_BUDGET_CHARS" not in out


async def test_a_wrong_base_url_is_a_start_up_warning_and_a_configuration_error(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A base URL without /v1: a WARNING on stderr at start, and a question answered with a
    configuration problem naming the settings to fix, not "try again"."""
    model_server.models = ["gpt-4o-mini"]
    base = model_server.base_url.removesuffix("/v1")

    out, err = await console(tmp_path, base, ["Hello", "/quit"], LLM_MAX_RETRIES="0")

    assert "WARNING" in err and "OPENAI_BASE_URL" in err
    assert "configured" in out and "try again" not in out
    assert "OPENAI_BASE_URL" in out and "LLM_MODEL" in out
    assert "WARNING" not in out


async def test_a_rejected_key_names_the_setting_not_an_operator(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """In the console the user is the operator: a 401 names OPENAI_API_KEY and the model
    settings to check, never "the operator has been told"."""
    model_server.enqueue("Incorrect API key provided", status=401)

    out, _ = await console(tmp_path, model_server.base_url, ["Hello", "/quit"], LLM_MAX_RETRIES="0")

    assert "operator" not in out
    assert "OPENAI_API_KEY" in out and "LLM_MODEL" in out
    assert "/retry" in out  # the message is kept for when the setting is fixed


async def test_an_unreachable_server_is_named_with_its_address(tmp_path: Path) -> None:
    """A refused connection says which server did not answer and which setting points
    at it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"

    out, _ = await console(tmp_path, base, ["Hello", "/quit"], LLM_MAX_RETRIES="0")

    assert f"the model server at {base} (OPENAI_BASE_URL) is unavailable" in out
    assert "/retry" in out
