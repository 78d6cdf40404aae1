"""Dependencies point inward: the package graph has no cycle and follows the layering rules.

Every import statement of every product file counts: top-level ones, lazy ones inside a
function and those under `if TYPE_CHECKING:` (a type-only import still couples the packages:
whoever changes the imported module must check the importer). `ALLOWED` is the whole
picture (docs/ARCHITECTURE.md draws it); each rule also has its own test, so a failure names
the rule that broke and the file and line that broke it.

Names come from where they are defined: a module that merely imports a name does not hand
it on (no re-exports), so whoever moves a name moves its importers along and a reader
finds every name where its import says.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = (
    "admin",
    "app",
    "api",
    "bot",
    "core",
    "storage",
    "telemetry",
    "evaluation",
    "prompts",
    "media",
)
PROJECT = (*PRODUCT, "tests", "bench", "scripts")
"""Every folder of Python code in the repository: importers of product names, all of them."""

# `python -m bot` and `python -m api` run these two files; nothing imports them. They call
# `app.cli.main`, so they are programs on top of the composition root, not part of the edge
# they are named after: counting them as `app` keeps `bot` and `api` free of `app`.
ENTRY_SHIMS = {"bot/__main__.py": "app", "api/__main__.py": "app"}

ALLOWED: dict[str, set[str]] = {
    "app": {"admin", "api", "bot", "core", "storage", "telemetry", "prompts", "media"},
    "admin": {"core"},
    "evaluation": {"app", "core", "telemetry", "prompts"},
    "api": {"core", "telemetry", "prompts", "media"},
    "bot": {"core", "telemetry", "prompts", "media"},
    "media": {"core"},
    "storage": {"core", "telemetry", "prompts"},
    "telemetry": {"core"},
    "core": {"prompts"},
    "prompts": set(),
}
"""Which product packages each package may import (itself always)."""


@dataclass(frozen=True)
class Import:
    """One imported module as written in one file (relative imports resolved)."""

    path: str
    line: int
    module: str
    lazy: bool  # inside a function body: runs on the first call, not at import time

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.module}" + (" (lazily)" if self.lazy else "")


class _Walker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.package = path.removesuffix(".py").split("/")[:-1]  # the file's package
        self.depth = 0  # enclosing function bodies
        self.found: list[Import] = []

    def _add(self, node: ast.stmt, module: str) -> None:
        self.found.append(Import(self.path, node.lineno, module, self.depth > 0))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self.package[: len(self.package) - node.level + 1] if node.level else []
        self._add(node, ".".join([*base, *([node.module] if node.module else [])]))


def imports_in(source: str, path: str) -> list[Import]:
    """Every import statement of a source file, wherever it stands in the file."""
    walker = _Walker(path)
    walker.visit(ast.parse(source, path))
    return walker.found


@functools.cache
def product_imports() -> tuple[Import, ...]:
    """The imports of every product file (read once per test session)."""
    found: list[Import] = []
    for package in PRODUCT:
        for file in sorted((ROOT / package).rglob("*.py")):
            found += imports_in(file.read_text(), file.relative_to(ROOT).as_posix())
    return tuple(found)


def owner(path: str) -> str:
    """The package a file belongs to in the graph (the entry shims belong to `app`)."""
    return ENTRY_SHIMS.get(path, path.split("/")[0])


def package_graph(imports: Iterable[Import]) -> dict[tuple[str, str], list[Import]]:
    """Edges between product packages, each with the imports that make it."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        source = owner(imp.path)
        if imp.top in PRODUCT and imp.top != source:
            edges.setdefault((source, imp.top), []).append(imp)
    return edges


def find_cycle(edges: Iterable[tuple[str, str]]) -> list[str] | None:
    """A cycle as a path `[a, b, ..., a]`, or None when the graph has none."""
    successors: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        successors.setdefault(a, []).append(b)
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in successors.get(node, []):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(successors):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def offenders(importers: Iterable[str], banned: set[str], *, exempt: str = "") -> list[str]:
    """Imports of a banned top-level module by files of the importing packages."""
    return [
        str(imp)
        for imp in product_imports()
        if owner(imp.path) in set(importers) and imp.top in banned and imp.path != exempt
    ]


def imported_modules(package: str) -> dict[str, set[str]]:
    """Top-level module names imported by each file of a package."""
    found: dict[str, set[str]] = {}
    for imp in product_imports():
        if imp.path.split("/")[0] == package:
            found.setdefault(imp.path, set()).add(imp.top)
    return found


@dataclass(frozen=True)
class Bindings:
    """The names a module binds at its top level (in `if`, `try` and `with` blocks too)."""

    defined: frozenset[str]  # by def, class, assignment, `for` or `with ... as`
    imported: frozenset[str]  # by an import statement only


def bindings_of(tree: ast.Module) -> Bindings:
    defined: set[str] = set()
    imported: set[str] = set()

    def targets(node: ast.AST | None) -> None:
        if node is not None:
            defined.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            match stmt:
                case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                    defined.add(stmt.name)
                case ast.Assign():
                    for target in stmt.targets:
                        targets(target)
                case ast.AnnAssign() | ast.AugAssign():
                    targets(stmt.target)
                case ast.Import():
                    imported.update((a.asname or a.name).split(".")[0] for a in stmt.names)
                case ast.ImportFrom():
                    imported.update(a.asname or a.name for a in stmt.names)
                case ast.For() | ast.AsyncFor():
                    targets(stmt.target)
                    walk(stmt.body + stmt.orelse)
                case ast.With() | ast.AsyncWith():
                    for item in stmt.items:
                        targets(item.optional_vars)
                    walk(stmt.body)
                case ast.If() | ast.While():
                    walk(stmt.body + stmt.orelse)
                case ast.Try() | ast.TryStar():
                    walk(stmt.body + stmt.orelse + stmt.finalbody)
                    for handler in stmt.handlers:
                        walk(handler.body)

    walk(tree.body)
    return Bindings(frozenset(defined), frozenset(imported - defined))


def module_name(path: str) -> str:
    """`core/domain/ports.py` -> `core.domain.ports`; a package's `api/__init__.py` -> `api`."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def reexport_imports(sources: dict[str, str]) -> list[str]:
    """Imports of a name from a module of `sources` (by path) that only imports it itself.

    Submodules and names a module does not bind at all (a module `__getattr__`) are left
    alone, and so are modules outside `sources`: third-party packages hand on names from
    their own `__init__` as their public interface.
    """
    trees = {path: ast.parse(source, path) for path, source in sources.items()}
    modules = {module_name(path): bindings_of(tree) for path, tree in trees.items()}
    found = []
    for path, tree in trees.items():
        package = path.removesuffix(".py").split("/")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            if source not in modules:
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    continue  # a submodule, bound by importing it
                if alias.name == "*" or alias.name in modules[source].imported:
                    found.append(f"{path}:{node.lineno} imports {alias.name} from {source}")
    return found


@functools.cache
def project_sources() -> dict[str, str]:
    """Every Python file of the repository's code, by its path from the root."""
    return {
        file.relative_to(ROOT).as_posix(): file.read_text()
        for folder in PROJECT
        for file in sorted((ROOT / folder).rglob("*.py"))
    }


# -- the walker ----------------------------------------------------------------------------


def test_the_walker_sees_lazy_type_checking_and_relative_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from storage.sqlite import SqliteStore\n"
        "from . import ports\n"
        "from ..bot.render import render\n"
        "async def build():\n"
        "    import telegram.ext\n"
        "    return telegram.ext\n"
    )
    found = {(i.module, i.lazy) for i in imports_in(source, "core/sub/mod.py")}
    assert found == {
        ("typing", False),
        ("storage.sqlite", False),
        ("core.sub", False),
        ("core.bot.render", False),
        ("telegram.ext", True),
    }


def test_find_cycle_returns_the_cycle_path() -> None:
    assert find_cycle([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == ["a", "b", "c", "a"]
    assert find_cycle([("a", "b"), ("b", "c"), ("a", "c")]) is None


# -- the package graph ---------------------------------------------------------------------


def test_the_package_graph_has_no_cycle() -> None:
    edges = package_graph(product_imports())
    cycle = find_cycle(edges)
    if cycle is not None:
        steps = [f"{a} -> {b}: {edges[a, b][0]}" for a, b in itertools.pairwise(cycle)]
        pytest.fail("import cycle " + " -> ".join(cycle) + "\n" + "\n".join(steps))


def test_every_package_edge_is_an_allowed_one() -> None:
    edges = package_graph(product_imports())
    extra = [f"{a} -> {b}: {edges[a, b][0]}" for a, b in sorted(edges) if b not in ALLOWED[a]]
    assert extra == []
    assert not find_cycle((a, b) for a, targets in ALLOWED.items() for b in targets)


# -- the rules -----------------------------------------------------------------------------


def test_core_imports_no_edge_library_and_no_outer_package() -> None:
    banned = {"telegram", "aiohttp", "aiosqlite", "asyncpg", "psycopg", "psycopg2", "sqlite3"}
    banned |= {"app", "bot", "api", "storage", "telemetry", "evaluation"}
    assert offenders(["core"], banned) == []


def test_within_core_only_llm_imports_openai() -> None:
    assert offenders(["core"], {"openai"}, exempt="core/llm/llm.py") == []


def test_bot_and_api_do_not_import_each_other() -> None:
    assert offenders(["bot"], {"api"}) == []
    assert offenders(["api"], {"bot"}) == []


def test_only_app_and_storage_itself_import_storage() -> None:
    assert offenders(set(PRODUCT) - {"app", "storage"}, {"storage"}) == []


def test_only_the_entry_shims_and_evaluation_import_app() -> None:
    """The shims count as `app`; the evaluator is a program built on the composition root."""
    assert offenders(set(PRODUCT) - {"app", "evaluation"}, {"app"}) == []
    shims = [i.path for i in product_imports() if i.top == "app" and i.path in ENTRY_SHIMS]
    assert sorted(set(shims)) == sorted(ENTRY_SHIMS)


def test_telemetry_imports_only_core_prometheus_and_the_standard_library() -> None:
    allowed = {"telemetry", "core", "prometheus_client", *sys.stdlib_module_names}
    assert offenders(["telemetry"], {i.top for i in product_imports()} - allowed) == []


# -- names come from where they are defined ------------------------------------------------


def test_a_reexported_name_is_found_and_a_defined_one_is_not() -> None:
    """Lazy, relative and `TYPE_CHECKING` imports count; a name the module also defines (an
    ImportError fallback) and a submodule do not."""
    sources = {
        "pkg/__init__.py": "from pkg import other\nfrom pkg.base import Thing\n",
        "pkg/base.py": (
            "import json\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from pkg.other import Hint\n"
            "try:\n"
            "    from fast import speedy\n"
            "except ImportError:\n"
            "    def speedy() -> None: ...\n"
            "class Thing: ...\n"
            "LIMIT: int = 3\n"
            "Alias = Thing\n"
        ),
        "pkg/other.py": "class Hint: ...\n",
        "pkg/use.py": (
            "from pkg import Thing, base, other\n"
            "from pkg.base import LIMIT, Alias, Hint, speedy, json, missing\n"
            "from .base import Thing as T\n"
            "from outside import anything\n"
            "def later():\n"
            "    from pkg.base import TYPE_CHECKING\n"
        ),
    }
    assert reexport_imports(sources) == [
        "pkg/use.py:1 imports Thing from pkg",
        "pkg/use.py:2 imports Hint from pkg.base",
        "pkg/use.py:2 imports json from pkg.base",
        "pkg/use.py:6 imports TYPE_CHECKING from pkg.base",
    ]


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """No module hands on a name it imports: its importers import it where it is defined."""
    assert reexport_imports(project_sources()) == []


# -- the original checks, kept -------------------------------------------------------------


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("core", {"telegram", "aiohttp", "aiosqlite", "sqlite3", "bot", "storage", "api"}),
        ("storage", {"telegram", "aiohttp", "openai", "bot", "api"}),
    ],
)
def test_inner_packages_do_not_import_the_edges(package: str, forbidden: set[str]) -> None:
    """No file of an inner package imports an edge library or package."""
    offending = {
        path: sorted(names & forbidden)
        for path, names in imported_modules(package).items()
        if names & forbidden
    }
    assert offending == {}


def test_core_depends_on_the_model_vendor_in_one_module_only() -> None:
    """Only core/llm/llm.py knows the openai SDK; the rest of core sees the Completer port."""
    users = [path for path, names in imported_modules("core").items() if "openai" in names]
    assert users == ["core/llm/llm.py"]


# -- the storage layout --------------------------------------------------------------------

BACKENDS = {"sqlite": {"sqlite3", "aiosqlite"}, "postgres": {"asyncpg", "psycopg", "psycopg2"}}
"""Each backend's folder under storage/ and the drivers only it may import."""
SHARED_FOLDERS = {"statements"}
"""The folders under storage/ both backends share (the SQL both run)."""


def storage_imports(folder: str) -> list[Import]:
    return [i for i in product_imports() if i.path.startswith(f"storage/{folder}/")]


def test_the_top_of_storage_holds_no_backend_module() -> None:
    """A module at the top of storage/ or in a shared folder is shared by both backends: no
    backend in its name, no driver among its imports; each backend lives in its own folder."""
    top = sorted(p.name for p in (ROOT / "storage").glob("*.py"))
    named = [name for name in top if any(b in name for b in ("sqlite", "pg", "postgres"))]
    assert named == []
    drivers = set().union(*BACKENDS.values())
    shared = [
        i
        for i in product_imports()
        if i.path.startswith("storage/")
        and (i.path.count("/") == 1 or i.path.split("/")[1] in SHARED_FOLDERS)
    ]
    assert [str(i) for i in shared if i.top in drivers] == []
    folders = {p.name for p in (ROOT / "storage").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(BACKENDS) | SHARED_FOLDERS


@pytest.mark.parametrize(("backend", "other"), [("sqlite", "postgres"), ("postgres", "sqlite")])
def test_a_backend_never_imports_the_other_or_its_drivers(backend: str, other: str) -> None:
    offending = [
        str(i)
        for i in storage_imports(backend)
        if i.module.startswith(f"storage.{other}") or i.top in BACKENDS[other]
    ]
    assert offending == []


def test_the_postgres_store_does_not_depend_on_the_workers_cluster() -> None:
    """The cluster serves the bot's ports; the consultation store stands without it."""
    offending = [
        str(i)
        for i in storage_imports("postgres")
        if not i.path.startswith("storage/postgres/cluster/")
        and i.module.startswith("storage.postgres.cluster")
    ]
    assert offending == []


# -- SQL both backends run -------------------------------------------------------------------

STATEMENT_START = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH ")


def sql_literals(folder: Path) -> list[tuple[str, str]]:
    """Every whole SQL string under `folder` (f-strings with their fields as written), with
    where it is, except in `schema.py`: a released migration's steps stay as they ran."""
    found: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("*.py")):
        if path.name == "schema.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in parts:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = ast.unparse(node)[2:-1]
            else:
                continue
            if text.lstrip().startswith(STATEMENT_START):  # SQL here is upper case
                found.append((text, f"{path.relative_to(folder.parent.parent)}:{node.lineno}"))
    return found


def placeholders_normalized(statement: str) -> str:
    """A statement with each parameter (`?`, `?1`, `$1`) as `?` and its spacing collapsed."""
    return " ".join(re.sub(r"\$\d+|\?\d*", "?", statement).split())


def statements_in_both(storage: Path) -> list[str]:
    """The statements the SQLite and the PostgreSQL folder both write, apart from their
    parameters' spelling (a lone `SELECT 1` ping aside)."""
    postgres = {placeholders_normalized(text) for text, _ in sql_literals(storage / "postgres")}
    return [
        where
        for text, where in sql_literals(storage / "sqlite")
        if placeholders_normalized(text) in postgres and placeholders_normalized(text) != "SELECT 1"
    ]


def test_no_statement_is_written_in_both_backends() -> None:
    """SQL both stores run is written once, in `storage/statements/` (`$n` style, SQLite
    translating), so a change to it cannot reach one backend only."""
    assert statements_in_both(ROOT / "storage") == []
