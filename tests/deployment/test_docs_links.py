"""The README and docs/ link to files and headings that exist, so moving a section
cannot leave a link pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)|<img src=\"([^\"]+)\"")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens, a repeat
    numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def local_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    targets = [a or b for a, b in LINK.findall(text)]
    return [t for t in targets if not re.match(r"^[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_local_link_resolves(page: Path) -> None:
    """A relative link names an existing file; an anchor names a heading of its page."""
    broken = []
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        names_heading = file.suffix == ".md" and bool(anchor)
        if not file.exists() or (names_heading and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []
