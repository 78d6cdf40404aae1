"""Names come from where they are defined: a module that merely imports a name does not
hand it on (no re-exports), so whoever moves a name moves its importers along and a
reader finds every name where its import says. Every Python file of the repository's code
counts: the product, the fakes, the benchmark, the scripts and the tests."""

from __future__ import annotations

import functools
from pathlib import Path

from tests.import_graph import reexport_imports

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
FOLDERS = sorted({p.parent.name for p in ROOT.glob("*/__init__.py")} | {"scripts", "container"})


@functools.cache
def project_sources() -> dict[str, str]:
    """Every Python file of the repository's code, by its path from the root."""
    return {
        file.relative_to(ROOT).as_posix(): file.read_text()
        for folder in FOLDERS
        for file in sorted((ROOT / folder).rglob("*.py"))
    }


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
