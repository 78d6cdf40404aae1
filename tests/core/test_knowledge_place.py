"""Where a passage is, as shown: its title, then its heading path without a first heading
that repeats the title (the path keeps it for search)."""

from __future__ import annotations

from core.domain.knowledge import Passage, shown_section


def passage(title: str, section: str) -> Passage:
    return Passage(1, 1, title, section, None, "text", 1.0)


def test_a_first_heading_that_is_the_title_is_shown_once() -> None:
    assert passage("Warranty terms", "Warranty terms › Kettles").place == "Warranty terms › Kettles"
    assert passage("Warranty terms", "Warranty terms").heading_path == ""
    assert passage("Warranty terms", "Warranty terms").place == "Warranty terms"


def test_other_paths_are_shown_whole() -> None:
    assert passage("Price list", "Prices › Kettles").place == "Price list › Prices › Kettles"
    assert passage("notes", "").place == "notes"
    assert passage("", "Kettles").place == "Kettles"
    assert shown_section("Kettle", "Kettles › Lids") == "Kettles › Lids"  # a prefix only
    assert shown_section("", "Kettles") == "Kettles"
