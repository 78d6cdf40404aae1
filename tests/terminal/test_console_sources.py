"""The console shows a search-backed provider's sources under the reply, with full URLs."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from tests.terminal.test_console import console


async def test_the_console_lists_sources_with_their_urls(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Numbered as the answer cites them; a title is followed by its URL, a control
    character in a title never reaches the terminal."""
    extras = {
        "citations": ["https://www.who.int/sleep", "https://example.org/a"],
        "search_results": [{"title": "Sleep \x1b[31mfacts", "url": "https://www.who.int/sleep"}],
    }
    model_server.enqueue("Adults need 7-9 hours [1][2].", extras=extras)
    code, out = await console(tmp_path, model_server, ["/rounds 1", "How much sleep?"])
    assert code == 0
    assert (
        "Adults need 7-9 hours [1][2].\n"
        "Sources:\n"
        "[1] Sleep [31mfacts — https://www.who.int/sleep\n"
        "[2] https://example.org/a\n"
        "[final answer, consultation complete; ask about it with > TEXT or /followup TEXT]"
    ) in out
    assert "\x1b" not in out
