"""The early-finish marker counts only at the very start of a reply; streamed, it is hidden."""

from __future__ import annotations

import pytest

from core.prompting.early_finish import (
    EARLY_FINISH_MARKER,
    MarkerFilter,
    strip_marker,
    visible_text,
)


@pytest.mark.parametrize(
    ("text", "expected", "found"),
    [
        ("plain answer", "plain answer", False),
        (f"{EARLY_FINISH_MARKER}\n\n# Plan\nDo it.", "# Plan\nDo it.", True),
        (f"  {EARLY_FINISH_MARKER} Answer", "Answer", True),
        (f"**{EARLY_FINISH_MARKER}**\nAnswer", "Answer", True),
        (f"`{EARLY_FINISH_MARKER}` Answer", "Answer", True),
        (f"\n\n{EARLY_FINISH_MARKER}\n\nAnswer", "Answer", True),
        ("[[final]] Answer", "[[final]] Answer", False),
        ("**[[Final]]** Answer", "**[[Final]]** Answer", False),
        (f"Answer {EARLY_FINISH_MARKER} end", f"Answer {EARLY_FINISH_MARKER} end", False),
        ("What does [[final]] mean in my config?", "What does [[final]] mean in my config?", False),
        (f"{EARLY_FINISH_MARKER}", "", True),
    ],
)
def test_strip_marker(text: str, expected: str, found: bool) -> None:
    """Only the exact marker at the very start counts (optionally bold or in backticks); it
    goes with the whitespace after it. Anywhere else, or in another case, it is plain text."""
    assert strip_marker(text) == (expected, found)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("", ""),
        ("[", ""),
        ("[[FI", ""),
        ("  \n**[[FINAL", ""),
        ("`[[FINAL]]", ""),
        (EARLY_FINISH_MARKER, ""),
        (f"{EARLY_FINISH_MARKER}\n\n", ""),
        (f"{EARLY_FINISH_MARKER}\n\nHere", "Here"),
        (f"**{EARLY_FINISH_MARKER}** Here", "Here"),
        ("[[X", "[[X"),
        ("[[final]] is a marker", "[[final]] is a marker"),
        ("Hello [[FI", "Hello [[FI"),
        (f"Hello {EARLY_FINISH_MARKER} there", f"Hello {EARLY_FINISH_MARKER} there"),
        ("What does [[final]] mean?", "What does [[final]] mean?"),
    ],
)
def test_visible_text_holds_back_only_a_possible_leading_marker(text: str, shown: str) -> None:
    """A prefix that may still become the marker waits; any other text shows at once, whole."""
    assert visible_text(text) == shown


async def test_marker_filter_forwards_the_reply_without_the_marker() -> None:
    """Fed the growing text piece by piece, the filter shows nothing of the marker and
    forwards each growth once."""
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    reply = f"{EARLY_FINISH_MARKER}\n\nThe plan: squats [[FINAL]] stays."
    shown = MarkerFilter(on_text)
    for end in range(1, len(reply) + 1):
        await shown.feed(reply[:end])
    assert seen[-1] == "The plan: squats [[FINAL]] stays."
    assert all(not text.startswith(("[", "\n")) for text in seen)
    assert len(seen) == len(set(seen))


async def test_marker_filter_passes_a_reply_without_marker_unchanged() -> None:
    """A reply that does not start with the marker is forwarded as it grows, untouched."""
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    shown = MarkerFilter(on_text)
    for text in ("Hel", "Hello [[", "Hello [[final]]"):
        await shown.feed(text)
    assert seen == ["Hel", "Hello [[", "Hello [[final]]"]
