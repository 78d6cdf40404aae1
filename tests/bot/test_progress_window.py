"""Progress updates of a long reply render a bounded window of it, shown like the whole."""

from __future__ import annotations

import threading

import pytest
from telegram import MessageEntity

from bot.transport import delivery
from bot.transport.delivery import render_parts
from bot.transport.progress import PROGRESS_LIMIT, PROGRESS_WINDOW, progress_window
from bot.transport.render import Part, render


def _lines(count: int, prefix: str = "line") -> str:
    return "\n".join(f"{prefix} {n} with **bold** words" for n in range(count))


def test_a_short_reply_is_rendered_whole() -> None:
    """Up to the window size nothing is cut, from either end."""
    text = _lines(20)
    assert progress_window(text, from_end=True) == (text, False)
    assert progress_window(text, from_end=False) == (text, False)


def test_the_end_window_starts_at_a_line_and_keeps_the_last_words() -> None:
    """A draft shows the end: the window is bounded, starts on a line and ends the reply."""
    text = _lines(5000)
    window, cut = progress_window(text, from_end=True)
    assert cut
    assert len(window) <= PROGRESS_WINDOW
    assert text.endswith(window)
    assert window.startswith("line ")
    assert text[len(text) - len(window) - 1] == "\n"


def test_the_start_window_ends_at_a_line_and_fills_a_message() -> None:
    """A progress message shows the start: the window ends on a line, past one message."""
    text = _lines(5000)
    window, cut = progress_window(text, from_end=False)
    assert cut
    assert text.startswith(window)
    assert PROGRESS_LIMIT <= len(window) <= PROGRESS_WINDOW
    assert text[len(window)] == "\n"


def test_a_window_starting_inside_a_code_block_reopens_it() -> None:
    """The last lines of an open code block still render as code in the draft."""
    text = "Intro\n\n```python\n" + "\n".join(f"x_{n} = {n} * 2" for n in range(2000))
    window, _ = progress_window(text, from_end=True)
    assert window.startswith("```\n")
    last = render(window)[-1]
    assert any(e.type in (MessageEntity.PRE, MessageEntity.CODE) for e in last.entities)
    assert "x_1999 = 1999 * 2" in last.text


def test_a_window_after_a_closed_code_block_is_plain() -> None:
    """A closed block before the window does not turn the rest into code."""
    text = "```\ncode\n```\n" + _lines(3000)
    window, _ = progress_window(text, from_end=True)
    assert not window.startswith("```")


@pytest.mark.parametrize("size", [100, 30_000])
async def test_delivery_renders_short_and_long_answers_alike(size: int) -> None:
    """Rendering off the event loop gives exactly the parts rendering inline gives."""
    text = ("word **bold** and `code`\n" * size)[:size]
    assert await render_parts(text) == render(text)


async def test_a_long_answer_is_rendered_on_threads_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not on the loop's default executor, where other blocking work could hold it up."""
    names: list[str] = []

    def recording(markdown: str, *, limit: int) -> list[Part]:
        names.append(threading.current_thread().name)
        return render(markdown, limit=limit)

    monkeypatch.setattr(delivery, "render", recording)
    await render_parts("word " * 10_000)
    assert len(names) == 1 and names[0].startswith("render")
