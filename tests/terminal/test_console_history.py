"""The console's /history and /export as a real process with piped stdin, against the
fake model server: the list a person reads and the files written."""

from __future__ import annotations

import io
from pathlib import Path

from docx import Document as open_document

from fakes.model_server import FakeModelServer
from tests.terminal.test_console import console

FINAL = "## Plan\n\n- Rome in **May**\n- Florence\n\n| Day | City |\n|---|---|\n| 1 | Rome |\n"


async def test_history_lists_the_consultations_newest_first(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """/history numbers the console's consultations newest first with status and rounds."""
    model_server.enqueue(FINAL)
    code, out = await console(
        tmp_path,
        model_server,
        ["/history", "/rounds 1", "Plan a trip to Rome", "Choose a laptop", "/history"],
    )
    assert code == 0
    assert "[no consultations yet]" in out
    shown = [line.removeprefix("> ") for line in out.splitlines()]  # after the prompt
    lines = [line for line in shown if line.startswith((" 1. ", " 2. "))]
    assert lines[0].startswith(" 1. ") and lines[0].endswith(
        "complete, 1 of 1 rounds  Choose a laptop"
    )
    assert lines[1].endswith("complete, 1 of 1 rounds  Plan a trip to Rome")
    assert " UTC  " in lines[0]


async def test_export_writes_docx_and_markdown_named_from_the_title_and_never_overwrites(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """/export writes both files in the current directory, named from the title; a second
    /export adds " (2)" instead of overwriting; /export N PATH writes number N into PATH;
    a number past the history, a missing directory or an empty history write nothing."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (tmp_path / "Второй вопрос.md").write_text("mine")  # taken: the pair moves to (2)
    model_server.enqueue(FINAL)
    code, out = await console(
        tmp_path,
        model_server,
        [
            "/export",
            "/rounds 1",
            "Plan a trip to Rome",
            "Второй вопрос",
            "/export",
            f"/export 2 {out_dir}",
            "/export 3",
            f"/export {tmp_path / 'missing'}",
        ],
    )
    assert code == 0
    assert "[nothing to export yet: ask a question first]" in out
    assert "[no consultation number 3: /history lists 1–2]" in out
    assert f"[{tmp_path / 'missing'} is not a directory: nothing was written]" in out
    assert (tmp_path / "Второй вопрос.md").read_text() == "mine"
    assert not (tmp_path / "Второй вопрос.docx").exists()
    second = tmp_path / "Второй вопрос (2).md"
    assert f"[wrote {tmp_path / 'Второй вопрос (2).docx'} and {second}]" in out
    assert "## Запрос" in second.read_text() and "Второй вопрос" in second.read_text()
    first = out_dir / "Plan a trip to Rome.docx"
    document = open_document(io.BytesIO(first.read_bytes()))
    texts = [p.text for p in document.paragraphs]
    assert "Plan a trip to Rome" in texts and "Final answer" in texts
    assert "Rome in May" in texts
    assert [[c.text for c in row.cells] for row in document.tables[0].rows] == [
        ["Day", "City"],
        ["1", "Rome"],
    ]
    assert (out_dir / "Plan a trip to Rome.md").exists()
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "Plan a trip to Rome.docx",
        "Plan a trip to Rome.md",
    ]
