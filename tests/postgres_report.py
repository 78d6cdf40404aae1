"""A pytest plugin: the run's summary says in ONE line how many tests were skipped because
PostgreSQL could not be reached, instead of a line each, so that failures and errors
(`-rfExX` in the project's addopts) are not buried under them. Any other skip is still
listed, one line per reason and place."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.postgres import UNREACHABLE

PREFIX = "Skipped: "


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped report gives, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix(PREFIX)
    return str(longrepr)


def skip_lines(reports: list[pytest.TestReport | pytest.CollectReport], root: Path) -> list[str]:
    """The summary's skip lines: one per reason and place other than PostgreSQL's, with its
    count, then one for all the unreachable-PostgreSQL skips, naming the first's reason."""
    unreachable = [r for r in reports if skip_reason(r).startswith(UNREACHABLE)]
    others = Counter(
        (_place(r, root), skip_reason(r))
        for r in reports
        if not skip_reason(r).startswith(UNREACHABLE)
    )
    lines = [f"SKIPPED [{n}] {place}: {reason}" for (place, reason), n in others.items()]
    if unreachable:
        lines.append(
            f"SKIPPED [{len(unreachable)}] tests that need PostgreSQL: "
            f"{skip_reason(unreachable[0])} (REQUIRE_POSTGRES=1 makes them fail instead)"
        )
    return lines


def _place(report: pytest.TestReport | pytest.CollectReport, root: Path) -> str:
    """Where the skip was raised, relative to the run's root, as pytest prints it."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, line, _ = longrepr
        return f"{os.path.relpath(path, root)}:{line}"
    return report.nodeid


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None]:
    """After pytest's own short summary, unless `-rs`/`-ra` already listed the skips."""
    try:
        return (yield)
    finally:
        skipped = terminalreporter.stats.get("skipped", [])
        if skipped and not terminalreporter.hasopt("s"):
            for line in skip_lines(skipped, terminalreporter.config.rootpath):
                terminalreporter.write_line(line, yellow=True)
