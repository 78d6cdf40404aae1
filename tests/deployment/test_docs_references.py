"""Every dotted name in backticks that names this project's code resolves, so a module
that moves or a class renamed cannot leave a docstring, a comment or a page pointing
nowhere.

The rules:
- Where: `README.md` and `docs/*.md` outside fenced code; in every Python file of the
  project's packages (the top-level folders holding `__init__.py`), its triple-quoted
  strings (every docstring is one) and its comments, found by pattern.
- What: a span in single backticks that is wholly a dotted name, `package.name[.name…]`,
  whose first part is one of those packages, and that is not the name of a logger the
  code creates (`logging.getLogger("api.access")`). Spans with anything else in them
  (spaces, slashes, parentheses) are not references.
- Resolving, read from the source (`ast`; nothing is imported): the longest prefix that
  is a module of the project (`a/b.py` or `a/b/__init__.py`), then each further part
  bound by what comes before: a module's top-level definitions, assignments and imports
  (an imported name followed to its module); a class's body, the attributes its methods
  set on `self`, and its base classes of the project. Nothing is looked up inside a
  function or a value.

Paths too: in the same pages, a span in backticks that starts with a path of the project
(`core/turns/service.py`, `bot/commands/`, its first word when more follow) names a file
or folder that exists, and so does every entry of a tree drawn in a fenced block (a
name ending in `/` or `.py` at the start of a line, under the folder above it by
indentation).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PACKAGES = frozenset(p.parent.name for p in ROOT.glob("*/__init__.py"))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"(?<!`)`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`(?!`)")


def references(text: str) -> Iterator[str]:
    """The dotted names in single backticks that start with a project package."""
    for name in SPAN.findall(text):
        if name.split(".", 1)[0] in PACKAGES and name not in loggers():
            yield name


TRIPLE_QUOTED = re.compile("\"\"\"(.*?)\"\"\"|'''(.*?)'''", flags=re.DOTALL)
COMMENT = re.compile(r"#[^\n]*")
GET_LOGGER = re.compile(r"getLogger\(\s*[\"']([^\"']+)[\"']\s*\)")


def prose(source: str) -> Iterator[str]:
    """The triple-quoted strings of a Python source (every docstring is one) and its
    comments; found by pattern, not parsed, so reading every file stays fast."""
    for match in TRIPLE_QUOTED.finditer(source):
        yield match.group(1) or match.group(2) or ""
    yield from COMMENT.findall(TRIPLE_QUOTED.sub("", source))


@cache
def python_sources() -> tuple[tuple[str, str], ...]:
    """(path from the root, text) of every Python file of the project's packages."""
    paths = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return tuple((path.relative_to(ROOT).as_posix(), path.read_text()) for path in paths)


@cache
def loggers() -> frozenset[str]:
    """The names of the loggers the project's code creates (`logging.getLogger("…")`):
    a logger's name is not a reference, even when it looks like one."""
    return frozenset(name for _, text in python_sources() for name in GET_LOGGER.findall(text))


def sources() -> Iterator[tuple[str, str]]:
    """(where, text) for each page, and each docstring and comment of the project's
    packages."""
    for page in PAGES:
        yield page.relative_to(ROOT).as_posix(), FENCE.sub("", page.read_text())
    for where, source in python_sources():
        for text in prose(source):
            yield where, text


@cache
def module_tree(name: str) -> ast.Module | None:
    """The parsed source of the project's module `name` (`a/b.py` or `a/b/__init__.py`),
    or None when there is none."""
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text(), filename=str(path))
    return None


@cache
def resolves(reference: str) -> bool:
    """True when the longest prefix of `reference` that is a project module binds each
    further part in turn."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        tree = module_tree(".".join(parts[:cut]))
        if tree is not None:
            return binds(tree.body, parts[cut:])
    return False


def binds(body: list[ast.stmt], names: list[str]) -> bool:
    """`body` (a module's) binds `names[0]`, and what it binds binds the rest."""
    if not names:
        return True
    found = binding(body, names[0])
    if isinstance(found, ast.ClassDef):
        return member(found, body, names[1:])
    if isinstance(found, ast.ImportFrom) and found.module:
        return resolves(".".join([imported(found, names[0]), *names[1:]]))
    return found is not None and len(names) == 1  # nothing is looked up inside a value


def member(cls: ast.ClassDef, module: list[ast.stmt], names: list[str]) -> bool:
    """`cls` (defined in `module`) binds `names`: in its body, as `self.<name>` in its
    methods, or through a base class of the project."""
    if not names:
        return True
    found = binding(cls.body, names[0])
    if isinstance(found, ast.ClassDef):
        return member(found, module, names[1:])
    if found is not None or names[0] in assigned_on_self(cls):
        return len(names) == 1
    return any(
        inherited(binding(module, base.id), base.id, module, names)
        for base in cls.bases
        if isinstance(base, ast.Name)
    )


def inherited(parent: ast.stmt | None, name: str, module: list[ast.stmt], names: list[str]) -> bool:
    """The base class `parent` (bound to `name` in `module`) binds `names`."""
    if isinstance(parent, ast.ClassDef):
        return member(parent, module, names)
    if isinstance(parent, ast.ImportFrom) and parent.module:
        return resolves(".".join([imported(parent, name), *names]))
    return False


def binding(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of `body` that binds `name` (a definition, an assignment or an import
    from a module), looking inside its `if` and `try` blocks; None when none does."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound = [node.name]
        elif isinstance(node, ast.Assign):
            bound = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            bound = [node.target.id]
        elif isinstance(node, ast.ImportFrom | ast.Import):
            bound = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.If | ast.Try):
            handlers = [h.body for h in getattr(node, "handlers", [])]
            for block in (node.body, node.orelse, *handlers, getattr(node, "finalbody", [])):
                if (inner := binding(block, name)) is not None:
                    return inner
            continue
        else:
            continue
        if name in bound:
            return node
    return None


def imported(node: ast.ImportFrom, name: str) -> str:
    """The dotted name `node` binds to `name` (`from a.b import c as name` gives `a.b.c`)."""
    alias = next(a for a in node.names if (a.asname or a.name) == name)
    return f"{node.module}.{alias.name}"


@cache
def assigned_on_self(cls: ast.ClassDef) -> frozenset[str]:
    """The attributes `cls`'s methods assign on `self`."""
    return frozenset(
        target.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )


def test_the_rules_tell_a_reference_from_other_code_spans() -> None:
    text = (
        "`storage.sqlite.store.SqliteStore.open`, ``core.domain.consultation``, `python -m bench`, "
        "`settings.db_path`, `core/turns/transcript.py`, `core.x()`, `bot`, `api.access`"
    )
    assert list(references(text)) == ["storage.sqlite.store.SqliteStore.open"]
    source = 'x = 1  # see `core.domain.consultation`\n"""`core.domain.errors`"""\n'
    assert list(prose(source)) == ["`core.domain.errors`", "# see `core.domain.consultation`"]
    assert resolves("storage.sqlite.store.SqliteStore.open")
    assert resolves("storage.sqlite")  # a package
    assert resolves("core.domain.consultation.Consultation.messages")  # a dataclass field
    assert resolves("storage.sqlite.store.Erasing.op")  # imported, followed to its module
    assert resolves("core.turns.lifecycle.Lifecycle.forget")
    assert not resolves("storage.writer.GroupWriter")
    assert not resolves("core.turns.transcript.TranscriptLabels.nothing")
    assert not resolves("core.turns.transcript.render_markdown.parts")  # inside a function


def test_every_reference_to_the_projects_code_resolves() -> None:
    broken = sorted(
        {
            f"{where}: `{name}`"
            for where, text in sources()
            for name in references(text)
            if not resolves(name)
        }
    )
    assert broken == []


FOLDERS = PACKAGES | {"tests", "bench", "scripts", "docs"}
PATH_SPAN = re.compile(r"(?<!`)`([A-Za-z_][\w-]*/[\w./-]*)(?=[` ])")
ANY_FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", flags=re.MULTILINE | re.DOTALL)
TREE_ENTRY = re.compile(r"^( *)([\w.-]+(?:/|\.py))(?:\s{2,}|$)")


def path_spans(text: str) -> Iterator[str]:
    """The paths in single backticks that start with a folder of the project."""
    for path in PATH_SPAN.findall(text):
        if path.split("/", 1)[0] in FOLDERS:
            yield path


def tree_paths(block: str) -> Iterator[str]:
    """The paths a tree in a fenced block draws: each entry under the folder above it
    with less indentation. A block whose first entry is no project folder is no tree."""
    folders: list[tuple[int, str]] = []
    for line in block.splitlines():
        entry = TREE_ENTRY.match(line)
        if entry is None:
            continue
        indent, name = len(entry.group(1)), entry.group(2)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        if not folders and name.split("/", 1)[0] not in FOLDERS:
            return
        path = (folders[-1][1] if folders else "") + name
        yield path
        if name.endswith("/"):
            folders.append((indent, path))


def page_paths() -> Iterator[tuple[str, str]]:
    """(page, path) for every path a page names, in its prose and in its trees."""
    for page in PAGES:
        text = page.read_text()
        where = page.relative_to(ROOT).as_posix()
        for path in path_spans(FENCE.sub("", text)):
            yield where, path
        for block in ANY_FENCE.findall(text):
            for path in tree_paths(block):
                yield where, path


def test_the_rules_tell_a_path_and_read_a_tree() -> None:
    text = "`core/turns/service.py`, `admin/ports.py AdminStore`, `docs/images/x-*.png`, `a/b.py`"
    assert list(path_spans(text)) == ["core/turns/service.py", "admin/ports.py"]
    tree = (
        "core/          the engine\n"
        "  turns/       a chat's turns\n"
        "    service.py   the service\n"
        "               (continued) words\n"
        "  llm/\n"
        "bot/\n"
    )
    assert list(tree_paths(tree)) == [
        "core/",
        "core/turns/",
        "core/turns/service.py",
        "core/llm/",
        "bot/",
    ]
    assert list(tree_paths("make test     # ruff\n")) == []


def test_every_path_a_page_names_exists() -> None:
    missing = sorted(
        {f"{page}: {path}" for page, path in page_paths() if not (ROOT / path).exists()}
    )
    assert missing == []
