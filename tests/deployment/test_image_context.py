"""The container build's inputs agree: every package the project installs is copied by the
Dockerfile, and everything the Dockerfile copies from the context is let through by
.dockerignore (an allow-list), so a new package cannot be left out of the image unseen."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_COPY = re.compile(r"^COPY (?!--from)(.+)$", re.MULTILINE)


def copied_sources() -> list[str]:
    """The context paths of the Dockerfile's COPY lines (the last word is the target)."""
    sources: list[str] = []
    for line in _COPY.findall((ROOT / "Dockerfile").read_text()):
        sources.extend(line.split()[:-1])
    return sources


def _regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: `**` any directories, `*` and `?`
    within one path element."""
    parts = re.split(r"(\*\*/?|\*|\?)", pattern)
    table = {"**": ".*", "**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(table.get(part, re.escape(part)) for part in parts))


def dockerignored(path: str, lines: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: the last pattern matching
    the path or one of its parent directories decides; `!` lets it back in."""
    prefixes = ["/".join(path.split("/")[: n + 1]) for n in range(path.count("/") + 1)]
    ignored = False
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        regex = _regex(line.lstrip("!").strip("/"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = not negated
    return ignored


def test_the_dockerignore_reading_is_dockers() -> None:
    lines = ["*", "!api/", "!fakes/serving.py", "**/__pycache__"]
    assert dockerignored("docs/x.md", lines) and dockerignored("README.md", lines)
    assert not dockerignored("api/app.py", lines)
    assert dockerignored("api/__pycache__/app.cpython-311.pyc", lines)
    assert not dockerignored("fakes/serving.py", lines)
    assert dockerignored("fakes/bot_api.py", lines)


def test_every_installed_package_is_copied_into_the_image() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    includes = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in includes}
    copied = {source.rstrip("/") for source in copied_sources()}
    assert packages <= copied, f"not copied into the image: {sorted(packages - copied)}"


def test_everything_copied_passes_the_dockerignore() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    for source in copied_sources():
        probe = source + "__init__.py" if source.endswith("/") else source
        assert not dockerignored(probe, lines), f"{source} is copied but .dockerignore drops it"


def test_the_files_the_wheel_build_reads_are_copied() -> None:
    """The readme and the licence files are part of the wheel: a build without them fails."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {project["readme"], *project["license-files"]}
    copied = set(copied_sources())
    assert needed <= copied, f"not copied into the image: {sorted(needed - copied)}"
