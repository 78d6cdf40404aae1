"""The terminal lists the knowledge-base passages an answer cites under it: a reply of the
real engine (real SQLite, the real openai SDK, the fake model server, a listed knowledge
search) as the terminal prints it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from core.domain.asking import UserMessage
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from terminal.replies import StreamPrinter
from tests.knowledge_search import ListedKnowledge, passage
from tests.service_harness import Clock, make_service

if TYPE_CHECKING:
    from storage.sqlite.store import SqliteStore


async def test_the_terminal_lists_the_cited_passages_under_the_answer(
    store: SqliteStore,
    completer: OpenAICompleter,
    model_server: FakeModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Cited K1 and K2 listed with title, heading path and page; the invented K5 is not;
    the state line stays last."""
    knowledge = ListedKnowledge(
        [
            passage(
                1, "Kettles carry a two-year warranty.", title="Warranty", section="Kettles", page=3
            ),
            passage(2, "Descale the kettle monthly.", title="Care guide"),
        ]
    )
    engine = make_service(store, completer, Clock(), knowledge=knowledge, default_max_rounds=1)
    model_server.enqueue("Two years [K1]; descale it [K2, K5].")
    printer = StreamPrinter()
    printer.done(
        await engine.turns.ask(
            UserMessage("console:local", "Kettle warranty?", on_text=printer.feed)
        )
    )
    assert capsys.readouterr().out == (
        "Two years [K1]; descale it [K2, K5].\n"
        "Sources from the knowledge base:\n"
        "[K1] Warranty › Kettles, page 3\n"
        "[K2] Care guide\n"
        "[final answer, consultation complete; ask about it with > TEXT or /followup TEXT]\n"
    )
