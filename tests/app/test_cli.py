"""`consultation-bot run|api|console`: the installed console script and its `python -m` forms
behave as one entry point family (same checks, same one-line errors, exit code 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "consultation-bot"


def run(
    tmp_path: Path, *argv: str, stdin: str = "", **values: str
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **values}
    return subprocess.run(
        list(argv), env=env, cwd=tmp_path, input=stdin, capture_output=True, text=True, timeout=30
    )


def test_the_console_script_is_installed_and_lists_its_commands(tmp_path: Path) -> None:
    """`consultation-bot --help` names every command and the `python -m` forms."""
    done = run(tmp_path, str(SCRIPT), "--help")
    assert done.returncode == 0, done.stderr
    for command in ("run", "api", "console", "python -m bot", "python -m api"):
        assert command in done.stdout


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_python_m_api_help_shows_the_usage_and_exits_0(tmp_path: Path, flag: str) -> None:
    done = run(tmp_path, sys.executable, "-m", "api", flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: consultation-bot")
    assert "python -m api" in done.stdout and done.stderr == ""


def test_an_unknown_command_exits_2_and_shows_the_usage(tmp_path: Path) -> None:
    done = run(tmp_path, str(SCRIPT), "serve")
    assert done.returncode == 2
    assert done.stderr.startswith("unknown command 'serve'")
    assert "usage: consultation-bot" in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    "argv",
    [
        (str(SCRIPT), "api"),
        (sys.executable, "-m", "api"),
        (str(SCRIPT), "console"),
        (sys.executable, "-m", "bot", "console"),
        (str(SCRIPT), "run"),
        (str(SCRIPT),),
    ],
    ids=["script api", "python -m api", "script console", "python -m bot console", "run", "bare"],
)
def test_every_form_names_the_missing_key_in_one_line(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """Without OPENAI_API_KEY every entry point stops the same way: one line, exit code 2."""
    done = run(tmp_path, *argv, TELEGRAM_BOT_TOKEN="123:abc")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_the_api_command_refuses_an_open_address_without_a_token(tmp_path: Path) -> None:
    """`consultation-bot api` runs the same exposure check as `python -m api`."""
    done = run(tmp_path, str(SCRIPT), "api", OPENAI_API_KEY="k", API_HOST="0.0.0.0")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "API_TOKEN" in lines[0], done.stderr


def test_the_console_command_ends_cleanly_at_end_of_input(tmp_path: Path) -> None:
    """`consultation-bot console` with no input shows the help and leaves with code 0; the
    model server is not running, which is a warning on stderr, not a failure."""
    done = run(
        tmp_path,
        str(SCRIPT),
        "console",
        OPENAI_API_KEY="k",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        DB_PATH=str(tmp_path / "console.sqlite3"),
    )
    assert done.returncode == 0, done.stderr
    assert "/rounds N" in done.stdout
    assert "Traceback" not in done.stderr
    assert (tmp_path / "console.sqlite3").exists()
