"""`/file` in the console, as a real process with piped stdin against the fake model server:
files queued for the next message, read by the media intake, and clear lines when they fail."""

from __future__ import annotations

import os
from pathlib import Path

from fakes.hostile_documents import million_cell_docx
from fakes.model_server import FakeModelServer, text_of
from tests.terminal.test_console import console


def user_texts(model: FakeModelServer) -> list[str]:
    """The last user message of each model request, as text."""
    return [
        text_of(next(m for m in reversed(r["messages"]) if m["role"] == "user")["content"])
        for r in model.requests
    ]


async def test_a_text_file_goes_with_the_next_message(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    (tmp_path / "notes.txt").write_text("Budget: 1200 EUR\n", encoding="utf-8")
    code, out = await console(
        tmp_path,
        model_server,
        ["/rounds 5", "/file", "/file notes.txt", "/file", "Which laptop?", "/file", "/quit"],
    )
    assert code == 0
    assert "[attached: none]" in out
    assert "[attached notes.txt (17 bytes);" in out
    assert "[attached: notes.txt]" in out
    assert user_texts(model_server) == [
        'Which laptop?\n\n<document name="notes.txt">\nBudget: 1200 EUR\n</document>'
    ]
    assert out.count("[attached: none]") == 2  # sent once, then the queue is empty


async def test_an_empty_line_sends_the_files_alone_and_drop_forgets_them(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    (tmp_path / "a.md").write_text("# Plan\nhire two", encoding="utf-8")
    code, out = await console(
        tmp_path,
        model_server,
        ["/rounds 5", "", "/file a.md", "/drop", "", "/file 'a.md'", "", "/quit"],
    )
    assert code == 0
    assert "[1 attached file(s) dropped]" in out
    assert user_texts(model_server) == ['<document name="a.md">\n# Plan\nhire two\n</document>']


async def test_a_missing_path_and_a_refused_file_get_one_clear_line_each(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    (tmp_path / "backup.zip").write_bytes(b"PK\x03\x04" + bytes(100))
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    code, out = await console(
        tmp_path,
        model_server,
        ["/file missing.txt", "/file backup.zip", "/file photo.png", "/file", "/file .", "/quit"],
    )
    assert code == 0
    assert "[cannot read missing.txt: No such file or directory]" in out
    # Only the kinds this set-up reads: voice and photos are off here.
    assert (
        "[backup.zip: not a kind of file I read (text, Markdown, CSV, JSON, source code, PDF,"
        " DOCX); not attached]"
    ) in out
    assert "[photo.png: photos are off: set LLM_VISION=true" in out
    assert "[attached: none]" in out
    assert "[cannot read .:" in out
    assert model_server.requests == []


async def test_a_file_over_its_limit_is_refused_before_it_is_read(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """MAX_DOCUMENT_BYTES is the default 10 MB; the file claims 11 MB (a sparse file)."""
    with (tmp_path / "huge.txt").open("wb") as huge:
        huge.truncate(11_000_000)
    code, out = await console(tmp_path, model_server, ["/file huge.txt", "/quit"])
    assert code == 0
    assert "[huge.txt: over the limit of 10.0 MB; not attached]" in out


async def test_a_fifo_is_refused_at_once_and_the_console_goes_on(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """`/file` on a named pipe (opening it would wait for a writer forever) gets one line,
    and the next command is still answered."""
    os.mkfifo(tmp_path / "pipe")
    code, out = await console(tmp_path, model_server, ["/file pipe", "/file", "/quit"])
    assert code == 0
    assert "[cannot read pipe: not a regular file (a named pipe)]" in out
    assert "[attached: none]" in out


async def test_a_document_not_read_to_its_end_is_sent_cut_with_a_line_saying_so(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    (tmp_path / "cells.docx").write_bytes(million_cell_docx())
    code, out = await console(tmp_path, model_server, ["/file cells.docx", "Sum up", "/quit"])
    assert code == 0
    assert "[the documents were cut: only their beginning was read]" in out
    [sent] = user_texts(model_server)
    assert sent.endswith(
        "[… the rest of this document was cut: it is longer than could be read]\n</document>"
    )
