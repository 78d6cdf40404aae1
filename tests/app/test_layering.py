"""Dependencies point inward: floors and packages import only downwards, and nothing
imports from a circle.

Every import statement of every file of the product, the fakes, the benchmark and the
scripts counts: top-level ones, lazy ones inside a function and those under
`if TYPE_CHECKING:` (a type-only import still couples the two: whoever changes the
imported module must check the importer). None of the rules needs to allow a type-only or
a lazy import, so each counts as a plain one; the walker still tells them apart, for the
failure message. `ALLOWED` is the whole picture (docs/ARCHITECTURE.md draws it) and holds
only edges some import uses; each rule also has its own test, so a failure names the rule
that broke and the file and line that broke it.

How imports are read: `tests/import_graph.py`; names imported from where they are
defined: `tests/app/test_reexports.py`.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.import_graph import Import, find_cycle, imports_in, module_name


def _repository_root() -> Path:
    """The folder holding pyproject.toml: found upwards, wherever this test file lives."""
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


ROOT = _repository_root()
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
    "terminal",
    "i18n",
    "tools",
    "providers",
)
TOOLING = ("fakes", "bench", "scripts", "container")
"""Code beside the product: the fake servers, the benchmark, the scripts and the image's
health check."""
GRAPHED = (*PRODUCT, *TOOLING)
"""The folders whose imports the graph checks (the tests may import anything)."""
PROJECT = (*GRAPHED, "tests")
"""Every folder of Python code in the repository: importers of product names, all of them."""

FLOORS: dict[str, tuple[str, ...]] = {
    "core": ("core.turns", "core.prompting", "core.llm", "core.domain", "core.primitives"),
    "bot": ("bot", "bot.commands", "bot.updates", "bot.transport"),
}
"""Each layered package's floors, top first: a floor imports only floors below it. `bot`
itself is the top floor (`bot/app.py`, `bot/handlers.py`); `core` keeps no module at its
top, so every engine module stands on a floor."""

# `python -m bot` and `python -m api` run these two files; nothing imports them. They call
# `app.cli.main`, so they are programs on top of the composition root, not part of the edge
# they are named after: counting them as `app` keeps `bot` and `api` free of `app`.
ENTRY_SHIMS = {"bot/__main__.py": "app", "api/__main__.py": "app"}

ALLOWED: dict[str, set[str]] = {
    "app": {
        *("admin", "api", "bot", "bot.commands", "bot.updates", "bot.transport", "terminal"),
        *("core.turns", "core.prompting", "core.llm", "core.domain", "core.primitives"),
        *("storage", "telemetry", "media", "i18n", "tools", "providers"),
    },
    "evaluation": {"app", "core.turns", "core.prompting", "core.llm", "core.domain"},
    "admin": {"core.turns", "core.domain"},
    "api": {"core.turns", "core.prompting", "core.domain", "core.primitives"}
    | {"media", "telemetry"},
    "terminal": {"core.turns", "core.prompting", "core.domain", "media", "i18n"},
    "bot": {"bot.commands", "bot.updates", "bot.transport"}
    | {"core.turns", "core.domain", "core.primitives", "media", "i18n"},
    "bot.commands": {"bot.updates", "bot.transport"}
    | {"core.turns", "core.prompting", "core.domain", "core.primitives", "media", "i18n"},
    "bot.updates": {"bot.transport", "core.domain", "core.primitives", "telemetry", "i18n"},
    "bot.transport": {"core.domain", "core.primitives", "i18n"},
    "media": {"core.turns", "core.domain"},
    "tools": {"core.domain"},
    "providers": {"core.llm"},
    "i18n": {"core.turns"},
    "storage": {"core.domain", "core.primitives"},
    "telemetry": {"core.domain"},
    "core.turns": {"core.prompting", "core.llm", "core.domain", "core.primitives"},
    "core.prompting": {"core.llm", "core.domain", "prompts"},
    "core.llm": {"core.domain"},
    "core.domain": set(),
    "core.primitives": set(),
    "prompts": set(),
    "fakes": {"core.prompting", "core.domain"},
    "bench": {"app", "core.prompting", "core.domain", "storage", "fakes"},
    "scripts": {"app", "core.domain", "fakes"},
    "container": {"app"},
}
"""Which package or floor each one may import (itself always): exactly the edges in use."""

FAKES_KNOW = ("core.domain", "core.prompting.prompts")
"""What of the product the fakes may import: the engine's types and ports (a scripted
model plays the `Completer` port) and its prompts (the fake model server tells the engine's
calls apart by the engine's own schemas and prompts, so a changed schema cannot leave the
fake answering an old one)."""


@functools.cache
def graphed_imports() -> tuple[Import, ...]:
    """The imports of every file of the product and the tooling (read once per session)."""
    found: list[Import] = []
    for package in GRAPHED:
        for file in sorted((ROOT / package).rglob("*.py")):
            found += imports_in(file.read_text(), file.relative_to(ROOT).as_posix())
    return tuple(found)


def product_imports() -> tuple[Import, ...]:
    """The imports of every product file."""
    return tuple(i for i in graphed_imports() if i.path.split("/")[0] in PRODUCT)


def unit(module: str) -> str:
    """The package, or the floor of a layered package, that a dotted module belongs to."""
    parts = module.split(".")
    floor = ".".join(parts[:2])
    return floor if floor in FLOORS.get(parts[0], ()) else parts[0]


def owner(path: str) -> str:
    """The package or floor a file belongs to in the graph (the entry shims: `app`)."""
    return ENTRY_SHIMS.get(path) or unit(module_name(path))


def package_graph(imports: Iterable[Import]) -> dict[tuple[str, str], list[Import]]:
    """Edges between packages and floors of the project, each with the imports making it."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        source, target = owner(imp.path), unit(imp.module)
        if imp.top in PROJECT and target != source:
            edges.setdefault((source, target), []).append(imp)
    return edges


def checked_graph() -> dict[tuple[str, str], list[Import]]:
    """The graph of the product and the tooling."""
    return package_graph(graphed_imports())


def cycle_report(edges: dict[tuple[str, str], list[Import]]) -> str | None:
    """The first cycle of `edges`, one step a line with an import that makes it."""
    cycle = find_cycle(edges)
    if cycle is None:
        return None
    steps = [f"{a} -> {b}: {edges[a, b][0]}" for a, b in itertools.pairwise(cycle)]
    return "import cycle " + " -> ".join(cycle) + "\n" + "\n".join(steps)


@functools.cache
def project_modules() -> frozenset[str]:
    """The dotted name of every module of the project."""
    return frozenset(
        module_name(file.relative_to(ROOT).as_posix())
        for folder in PROJECT
        for file in (ROOT / folder).rglob("*.py")
    )


def imported_module(imp: Import, name: str | None, modules: frozenset[str]) -> str | None:
    """The project module an import binds: `from a import b` binds the module `a.b` when
    there is one, else `a`; a name outside the project binds None."""
    candidate = f"{imp.module}.{name}" if name else imp.module
    if candidate in modules:
        return candidate
    module = imp.module
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module or None


def module_graph(imports: Iterable[Import]) -> dict[tuple[str, str], list[Import]]:
    """Edges between the project's modules, each with the imports making it."""
    modules = project_modules()
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        source = module_name(imp.path)
        for name in imp.names or (None,):
            target = imported_module(imp, name, modules)
            if target is not None and target != source:
                edges.setdefault((source, target), []).append(imp)
    return edges


def offenders(importers: Iterable[str], banned: set[str], *, exempt: str = "") -> list[str]:
    """Imports of a banned top-level module by files of the importing packages."""
    importing = set(importers)
    return [
        str(imp)
        for imp in graphed_imports()
        if imp.path.split("/")[0] in importing and imp.top in banned and imp.path != exempt
    ]


def imported_modules(package: str) -> dict[str, set[str]]:
    """Top-level module names imported by each file of a package."""
    found: dict[str, set[str]] = {}
    for imp in graphed_imports():
        if imp.path.split("/")[0] == package:
            found.setdefault(imp.path, set()).add(imp.top)
    return found


def floor_breaches(package: str, imports: Iterable[Import]) -> list[str]:
    """Imports by a floor of `package` of a floor above it (or at the package's top)."""
    floors = FLOORS[package]
    found = []
    for imp in imports:
        source, target = owner(imp.path), unit(imp.module)
        if source not in floors or imp.top != package or source == target:
            continue
        if target not in floors or floors.index(target) < floors.index(source):
            found.append(f"{source} -> {target}: {imp}")
    return found


# -- the walker ----------------------------------------------------------------------------


def test_the_walker_sees_lazy_type_checking_and_relative_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from storage.sqlite import SqliteStore\n"
        "else:\n"
        "    import json\n"
        "from . import ports\n"
        "from ..bot.render import render\n"
        "async def build():\n"
        "    import telegram.ext\n"
        "    return telegram.ext\n"
    )
    found = {(i.module, i.lazy, i.type_only) for i in imports_in(source, "core/sub/mod.py")}
    assert found == {
        ("typing", False, False),
        ("storage.sqlite", False, True),
        ("json", False, False),
        ("core.sub", False, False),
        ("core.bot.render", False, False),
        ("telegram.ext", True, False),
    }


def test_find_cycle_returns_the_cycle_path() -> None:
    assert find_cycle([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == ["a", "b", "c", "a"]
    assert find_cycle([("a", "b"), ("b", "c"), ("a", "c")]) is None


def test_files_and_modules_land_on_their_floor() -> None:
    assert owner("core/turns/service.py") == "core.turns"
    assert owner("bot/handlers.py") == owner("bot/__init__.py") == "bot"
    assert owner("bot/transport/render.py") == "bot.transport"
    assert owner("bot/__main__.py") == "app"
    assert owner("fakes/bot_api.py") == "fakes"
    assert unit("core.domain.ports") == unit("core.domain") == "core.domain"
    assert unit("core") == "core"
    assert unit("storage.postgres.store") == "storage"


def test_the_module_graph_follows_a_submodule_imported_from_its_package() -> None:
    imports = imports_in(
        "from core.domain import ports\nfrom core.domain.ports import X\n", "a/b.py"
    )
    modules = frozenset({"core.domain", "core.domain.ports", "a.b"})
    assert [imported_module(i, n, modules) for i in imports for n in i.names] == [
        "core.domain.ports",
        "core.domain.ports",
    ]


def test_an_import_up_a_floor_and_a_circle_of_modules_are_found() -> None:
    imports = [
        *imports_in("from core.turns.service import Service\n", "core/domain/ports.py"),
        *imports_in("from core.domain import ports\n", "core/turns/service.py"),
        *imports_in("import bot.commands.quota\n", "bot/transport/chat.py"),
        *imports_in("from bot import handlers\n", "bot/updates/inbox.py"),
    ]
    assert floor_breaches("core", imports) == [
        "core.domain -> core.turns: core/domain/ports.py:1 imports core.turns.service"
    ]
    assert floor_breaches("bot", imports) == [
        "bot.transport -> bot.commands: bot/transport/chat.py:1 imports bot.commands.quota",
        "bot.updates -> bot: bot/updates/inbox.py:1 imports bot",
    ]
    report = cycle_report(module_graph(imports))
    assert report is not None
    assert report.splitlines()[1:] == [
        "core.domain.ports -> core.turns.service: "
        "core/domain/ports.py:1 imports core.turns.service",
        "core.turns.service -> core.domain.ports: core/turns/service.py:1 imports core.domain",
    ]


# -- the package graph ---------------------------------------------------------------------


def test_no_package_or_floor_imports_from_a_circle() -> None:
    """The graph of packages and floors has no cycle (every import counts, lazy and
    type-only ones too)."""
    report = cycle_report(checked_graph())
    if report is not None:
        pytest.fail(report)


def test_no_module_imports_from_a_circle() -> None:
    """No module of the product or the tooling reaches itself through its imports; lazy
    and type-only imports count like the others."""
    report = cycle_report(module_graph(graphed_imports()))
    if report is not None:
        pytest.fail(report)


def test_every_edge_is_an_allowed_one() -> None:
    edges = checked_graph()
    extra = [f"{a} -> {b}: {edges[a, b][0]}" for a, b in sorted(edges) if b not in ALLOWED[a]]
    assert extra == []
    assert not find_cycle((a, b) for a, targets in ALLOWED.items() for b in targets)


def test_every_allowed_edge_is_in_use() -> None:
    """A listed edge no import uses is taken off the list, so the list stays the picture."""
    used = set(checked_graph())
    unused = sorted(f"{a} -> {b}" for a, targets in ALLOWED.items() for b in targets)
    assert [edge for edge in unused if tuple(edge.split(" -> ")) not in used] == []


def test_every_package_and_floor_is_in_the_table() -> None:
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    units = set(GRAPHED) - set(FLOORS) | {f for floors in FLOORS.values() for f in floors}
    assert folders | {"scripts", "container"} == set(GRAPHED)
    assert set(ALLOWED) == units


def drawn_table(page: str) -> dict[str, set[str]]:
    """The rows of the page's `| Package or floor | May import |` table: each package or
    floor, what it may import (`nothing of the project` is an empty row)."""
    lines = (ROOT / page).read_text().splitlines()
    start = lines.index("| Package or floor | May import |") + 2  # past the rule line
    table: dict[str, set[str]] = {}
    for line in itertools.takewhile(lambda line: line.startswith("|"), lines[start:]):
        row, targets = (cell.strip() for cell in line.strip("|").split("|"))
        table[row.strip("`")] = {t.strip().strip("`") for t in targets.split(",")}
        table[row.strip("`")] -= {"nothing of the project"}
    return table


def test_the_architecture_page_draws_the_table() -> None:
    assert drawn_table("docs/ARCHITECTURE.md") == ALLOWED


# -- the floors ----------------------------------------------------------------------------


def test_each_core_floor_imports_only_the_floors_below_it() -> None:
    """turns -> prompting -> llm -> domain -> primitives."""
    assert floor_breaches("core", graphed_imports()) == []


def test_core_keeps_no_module_at_its_top() -> None:
    """Every engine module stands on a floor; `core/__init__.py` only describes them."""
    top = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    assert top == ["__init__.py"]
    assert [str(i) for i in graphed_imports() if i.path == "core/__init__.py"] == []
    floors = sorted(p.parent.name for p in (ROOT / "core").glob("*/__init__.py"))
    assert [f"core.{name}" for name in floors] == sorted(FLOORS["core"])


def test_each_bot_floor_imports_only_the_floors_below_it() -> None:
    """bot/app.py and bot/handlers.py -> commands -> updates -> transport."""
    assert floor_breaches("bot", graphed_imports()) == []


def test_the_top_of_bot_is_the_application_and_its_handlers() -> None:
    top = sorted(p.name for p in (ROOT / "bot").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "app.py", "handlers.py"]
    floors = sorted(p.parent.name for p in (ROOT / "bot").glob("*/__init__.py"))
    assert [f"bot.{name}" for name in floors] == sorted(FLOORS["bot"][1:])


# -- the rules -----------------------------------------------------------------------------


def test_core_imports_no_edge_library_and_no_outer_package() -> None:
    banned = {"telegram", "aiohttp", "aiosqlite", "asyncpg", "psycopg", "psycopg2", "sqlite3"}
    banned |= set(PROJECT) - {"core", "prompts"}
    assert offenders(["core"], banned) == []


def test_within_core_only_llm_imports_openai() -> None:
    assert offenders(["core"], {"openai"}, exempt="core/llm/llm.py") == []


@pytest.mark.parametrize("edge", ["terminal", "bot", "api", "admin"])
def test_the_edges_do_not_import_each_other(edge: str) -> None:
    others = {"terminal", "bot", "api", "admin"} - {edge}
    assert offenders([edge], others, exempt=f"{edge}/__main__.py") == []


def test_only_app_and_storage_itself_import_storage() -> None:
    """The benchmark times the stores' own queries, so it opens a store too."""
    assert offenders(set(GRAPHED) - {"app", "storage", "bench"}, {"storage"}) == []


def test_only_the_entry_shims_and_the_programs_import_app() -> None:
    """The shims count as `app`; the evaluator, the benchmark, the scripts and the image's
    health check are programs built on the composition root."""
    importers = set(GRAPHED) - {"app", "evaluation", "bench", "scripts", "container"}
    found = offenders(importers, {"app"})
    assert [i for i in found if i.split(":")[0] not in ENTRY_SHIMS] == []
    shims = [i.path for i in graphed_imports() if i.top == "app" and i.path in ENTRY_SHIMS]
    assert sorted(set(shims)) == sorted(ENTRY_SHIMS)


def test_nothing_but_the_tests_imports_the_tests() -> None:
    assert offenders(GRAPHED, {"tests"}) == []


def test_the_fakes_import_no_product_package_but_the_engines_protocol() -> None:
    def known(module: str) -> bool:
        return any(module == k or module.startswith(f"{k}.") for k in FAKES_KNOW)

    found = [
        str(imp)
        for imp in graphed_imports()
        if imp.path.startswith("fakes/") and imp.top in PRODUCT and not known(imp.module)
    ]
    assert found == []


def test_telemetry_imports_only_core_prometheus_and_the_standard_library() -> None:
    allowed = {"telemetry", "core", "prometheus_client", *sys.stdlib_module_names}
    assert offenders(["telemetry"], {i.top for i in graphed_imports()} - allowed) == []


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
