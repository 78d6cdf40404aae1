"""Dependencies point inward: core knows no Telegram, HTTP server or SQLite driver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(package: str) -> dict[str, set[str]]:
    """Top-level module names imported by each file of a package (from the source)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("core", {"telegram", "aiohttp", "aiosqlite", "sqlite3", "bot", "storage", "api"}),
        ("storage", {"telegram", "aiohttp", "openai", "bot", "api"}),
    ],
)
def test_inner_packages_do_not_import_the_edges(package: str, forbidden: set[str]) -> None:
    """No file of an inner package imports an edge library or package."""
    offenders = {
        path: sorted(names & forbidden)
        for path, names in imported_modules(package).items()
        if names & forbidden
    }
    assert offenders == {}


def test_core_depends_on_the_model_vendor_in_one_module_only() -> None:
    """Only core/llm.py knows the openai SDK; the rest of core sees the Completer port."""
    users = [path for path, names in imported_modules("core").items() if "openai" in names]
    assert users == ["core/llm.py"]
