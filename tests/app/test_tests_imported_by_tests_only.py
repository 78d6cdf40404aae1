"""Only tests import `tests`: no product, benchmark or script module does, so the shipped
code, `python -m bench` and the scripts run without the test tree and its harnesses (what
they share with the tests lives in `fakes`).

Every import statement counts, lazy ones inside a function included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE_TESTS = (
    "admin",
    "api",
    "app",
    "bot",
    "core",
    "evaluation",
    "fakes",
    "i18n",
    "media",
    "prompts",
    "storage",
    "telemetry",
    "terminal",
    "tools",
    "providers",
    "bench",
    "scripts",
    "container",
)


def imported_modules(source: str, path: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a source file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_no_module_outside_tests_imports_tests() -> None:
    offenders = [
        f"{file.relative_to(ROOT)}:{line} imports {module}"
        for folder in OUTSIDE_TESTS
        for file in sorted((ROOT / folder).rglob("*.py"))
        for line, module in imported_modules(file.read_text(), str(file))
        if module == "tests" or module.startswith("tests.")
    ]
    assert offenders == []
