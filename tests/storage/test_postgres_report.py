"""Without PostgreSQL a run stays green and says so once: every test that needs it is
skipped, and the summary counts those skips in one line while failures, errors, xfails
and other skips keep their lines. With REQUIRE_POSTGRES they fail instead. Each case runs
pytest in a child process with PostgreSQL pointed at a port nobody listens on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TINY_SUITE = {
    "conftest.py": 'pytest_plugins = ["tests.postgres_report"]\n',
    "test_tiny.py": """
import asyncio

import pytest

from tests.postgres import connect_or_skip, database_url_for_tests


@pytest.mark.parametrize("n", range(5))
def test_needs_postgres(n):
    asyncio.run(connect_or_skip(database_url_for_tests()))


def test_skipped_for_another_reason():
    pytest.skip("no chromium here")


def test_fails():
    assert 1 == 2


@pytest.mark.xfail(reason="known gap")
def test_known_gap():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_errors(broken):
    pass
""",
}


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/test"


def run_pytest(cwd: Path, *args: str, require: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE_POSTGRES"}
    env |= {"TEST_DATABASE_URL": closed_port_url(), "PYTHONPATH": str(ROOT)}
    if require:
        env["REQUIRE_POSTGRES"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_unreachable_postgres_is_one_summary_line_beside_the_failures(tmp_path: Path) -> None:
    for name, text in TINY_SUITE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = -rfExX\nasyncio_default_fixture_loop_scope = function\n"
    )
    out = run_pytest(tmp_path)
    lines = out.splitlines()
    unreachable = [line for line in lines if "PostgreSQL is not reachable" in line]
    assert len(unreachable) == 1, out
    assert unreachable[0].startswith("SKIPPED [5] tests that need PostgreSQL:"), out
    assert "REQUIRE_POSTGRES=1" in unreachable[0]
    assert any(line.endswith(": no chromium here") for line in lines), out
    assert "FAILED test_tiny.py::test_fails - assert 1 == 2" in out
    assert "ERROR test_tiny.py::test_errors - RuntimeError: fixture broke" in out
    assert "XFAIL test_tiny.py::test_known_gap - known gap" in out
    assert "1 failed, 6 skipped, 1 xfailed, 1 error" in lines[-1], out


def test_the_postgres_search_tests_skip_without_postgres_and_fail_when_required() -> None:
    """Every PostgreSQL test of the search contract, the one that creates a role without
    pg_trgm included, skips without a server; with REQUIRE_POSTGRES each fails."""
    target = ["tests/contract/test_request_search.py", "-k", "postgres", "-q"]
    skipped = run_pytest(ROOT, *target).splitlines()[-1]
    assert "skipped" in skipped and "failed" not in skipped and "error" not in skipped
    required = run_pytest(ROOT, *target, require=True).splitlines()[-1]
    assert "failed" in required and "passed" not in required and "skipped" not in required
