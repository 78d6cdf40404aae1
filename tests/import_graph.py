"""The imports of Python sources, read with `ast` (nothing is imported): every import
statement wherever it stands, the names a module binds, and cycles in a graph of them.
Knows no rule of the project: the layering and re-export tests hold those."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Import:
    """One imported module as written in one file (relative imports resolved)."""

    path: str
    line: int
    module: str
    lazy: bool  # inside a function body: runs on the first call, not at import time
    type_only: bool = False  # under `if TYPE_CHECKING:`: never runs
    names: tuple[str, ...] = ()  # `from module import names`; empty for `import module`

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def __str__(self) -> str:
        how = " (lazily)" if self.lazy else ""
        how += " (for type checking)" if self.type_only else ""
        return f"{self.path}:{self.line} imports {self.module}{how}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Walker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.package = path.removesuffix(".py").split("/")[:-1]  # the file's package
        self.depth = 0  # enclosing function bodies
        self.type_checking = 0  # enclosing `if TYPE_CHECKING:` bodies
        self.found: list[Import] = []

    def _add(self, node: ast.stmt, module: str, names: tuple[str, ...] = ()) -> None:
        lazy, type_only = self.depth > 0, self.type_checking > 0
        self.found.append(Import(self.path, node.lineno, module, lazy, type_only, names))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.type_checking += 1
        for stmt in node.body:
            self.visit(stmt)
        self.type_checking -= 1
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self.package[: len(self.package) - node.level + 1] if node.level else []
        module = ".".join([*base, *([node.module] if node.module else [])])
        self._add(node, module, tuple(alias.name for alias in node.names))


def imports_in(source: str, path: str) -> list[Import]:
    """Every import statement of a source file, wherever it stands in the file."""
    walker = _Walker(path)
    walker.visit(ast.parse(source, path))
    return walker.found


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
