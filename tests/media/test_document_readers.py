"""Documents read in reader processes (`media.reader_pool`): hostile files made on the spot
(`fakes.hostile_documents`) cost at most a reader's limits, never this process's memory,
and the pool keeps reading afterwards."""

from __future__ import annotations

import asyncio
import io
import os
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from core.domain.attachments import Attachment
from core.domain.errors import AttachmentProblem, AttachmentRefused
from fakes.hostile_documents import (
    costly_pages_pdf,
    external_entity_docx,
    inflating_pdf,
    million_cell_docx,
    one_paragraph_docx,
    paragraph_flood_docx,
    repeated_page_pdf,
)
from media.config import IntakeConfig, ReaderConfig
from media.documents import Extracted
from media.docx_text import MAX_CELLS
from media.intake import Intake
from media.parsers import MAX_PDF_PAGES
from media.reader_pool import DocumentReaders, ReadersClosed
from media.sniff import MAX_ZIP_ENTRIES
from media.text import decode_text
from tests.media.test_media_documents import docx_file, pdf_with_text

BUDGET = 30_000


def live_readers() -> list[int]:
    """The pids of this process's reader processes that still run (not zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if (
            fields.get("PPid", "").strip() == str(os.getpid())
            and b"media.reader_process" in command
            and not fields.get("State", "").startswith("Z")
        ):
            found.append(int(entry.name))
    return found


async def reader_started() -> None:
    """Wait (a bounded while) until a reader process runs."""
    for _ in range(400):
        if live_readers():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no reader started")


def proc_text(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text()


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def read(readers: DocumentReaders, data: bytes, name: str) -> Extracted:
    return await readers.read(data, name=name, mime=None, max_bytes=10_000_000, max_chars=BUDGET)


async def refusal(readers: DocumentReaders, data: bytes, name: str) -> AttachmentRefused:
    with pytest.raises(AttachmentRefused) as caught:
        await read(readers, data, name)
    return caught.value


async def test_a_pdf_not_read_by_the_deadline_is_refused_and_its_reader_killed() -> None:
    """Sixty pages of costly text operators: the reader is killed at the deadline, the
    file refused as too costly, and the next document gets a fresh reader."""
    async with DocumentReaders(ReaderConfig(processes=1, timeout_seconds=2)) as readers:
        refused = await refusal(readers, costly_pages_pdf(), "pages.pdf")

        assert (refused.problem, refused.name) == (AttachmentProblem.TOO_COSTLY, "pages.pdf")
        assert "not read in 2 s" in refused.detail
        assert live_readers() == []
        found = await read(readers, pdf_with_text("Invoice 42"), "invoice.pdf")
        assert found == Extracted("Invoice 42")


async def test_a_reader_past_its_memory_limit_refuses_the_file_and_this_process_stays_small() -> (
    None
):
    """A page inflating to 70 MB in a reader limited to 128 MB of address space."""
    async with DocumentReaders(ReaderConfig(processes=1, memory_mb=128)) as readers:
        before = rss_mb()
        refused = await refusal(readers, inflating_pdf(megabytes=70), "inflate.pdf")

        assert refused.problem is AttachmentProblem.TOO_COSTLY
        assert "128 MB" in refused.detail
        assert rss_mb() - before < 20
        assert await read(readers, docx_file(), "report.docx") != Extracted("")


async def test_readers_run_under_their_memory_and_cpu_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The limits are the reader's own (the kernel's view of the process says so), a
    reader killed at one writes no core file as large as its memory, and it does not
    inherit this process's secrets."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-KEY")
    async with DocumentReaders(ReaderConfig(processes=1, memory_mb=200)) as readers:
        await read(readers, pdf_with_text("hello"), "hello.pdf")
        [pid] = live_readers()
        limits = proc_text(pid, "limits").splitlines()
        address_space = next(line for line in limits if line.startswith("Max address space"))
        cpu = next(line for line in limits if line.startswith("Max cpu time"))
        core = next(line for line in limits if line.startswith("Max core file size"))

        assert address_space.split()[3] == str(200 * 2**20)
        assert cpu.split()[3] != "unlimited"
        assert core.split()[4:6] == ["0", "0"]  # killed for CPU, it leaves no core file
        assert "SECRET-KEY" not in proc_text(pid, "environ")


async def test_a_cancelled_read_kills_its_reader_and_the_pool_keeps_reading() -> None:
    async with DocumentReaders(ReaderConfig(processes=1, timeout_seconds=60)) as readers:
        reading = asyncio.create_task(read(readers, costly_pages_pdf(), "pages.pdf"))
        await reader_started()
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading

        assert live_readers() == []
        assert await read(readers, pdf_with_text("again"), "again.pdf") == Extracted("again")


async def test_closing_the_pool_kills_a_reader_mid_read() -> None:
    readers = DocumentReaders(ReaderConfig(processes=1, timeout_seconds=60))
    reading = asyncio.create_task(read(readers, costly_pages_pdf(), "pages.pdf"))
    await reader_started()

    await readers.close()

    with pytest.raises(ReadersClosed):
        await reading
    assert live_readers() == []


async def test_a_pdf_is_read_to_the_page_cap_and_says_it_was_cut() -> None:
    pdf = repeated_page_pdf(pages=MAX_PDF_PAGES + 100, operators=1, operator=b"(p) Tj\n")
    async with DocumentReaders(ReaderConfig()) as readers:
        found = await read(readers, pdf, "many.pdf")

    assert found.text.split() == ["p"] * MAX_PDF_PAGES
    assert not found.complete


async def test_a_pdf_of_costly_text_pages_stops_at_the_character_budget() -> None:
    """Each page gives 200,000 characters: the first one fills the budget."""
    async with DocumentReaders(ReaderConfig()) as readers:
        found = await read(readers, repeated_page_pdf(), "dense.pdf")

    assert (len(found.text), found.complete) == (BUDGET + 1, False)


async def test_a_million_cell_docx_stops_at_a_cap_with_the_rows_read() -> None:
    async with DocumentReaders(ReaderConfig()) as readers:
        found = await read(readers, million_cell_docx(), "cells.docx")

    assert not found.complete
    assert found.text.count("|") < MAX_CELLS


async def test_a_docx_unpacking_to_195_mb_is_read_to_the_budget_in_bounded_memory() -> None:
    async with DocumentReaders(ReaderConfig(memory_mb=128)) as readers:
        found = await read(readers, paragraph_flood_docx(megabytes=195), "flood.docx")

    assert not found.complete
    assert found.text.startswith("word x\nword x\n")


@pytest.mark.timeout(150)
async def test_a_docx_of_one_endless_paragraph_is_read_to_the_budget_in_bounded_memory() -> None:
    """Millions of runs in a single paragraph: the character budget cuts it (the words read
    so far are the text), and runs already read are not kept. The empty one is parsed to its
    end (several seconds of CPU): its deadline is generous, since what is tested here is the
    memory, and a busy machine must not turn it into a refusal for time."""
    async with DocumentReaders(ReaderConfig(memory_mb=128, timeout_seconds=60)) as readers:
        found = await read(readers, one_paragraph_docx(), "one.docx")
        empty = await refusal(readers, one_paragraph_docx(text=b""), "empty.docx")

    assert not found.complete
    assert found.text.startswith("abab") and BUDGET <= len(found.text) <= BUDGET + 1
    assert empty.problem is AttachmentProblem.NO_TEXT  # read to its end, not too costly


async def test_a_docx_keeps_the_text_around_an_external_entity_it_does_not_resolve() -> None:
    async with DocumentReaders(ReaderConfig()) as readers:
        found = await read(readers, external_entity_docx(), "entity.docx")

    assert found == Extracted("before  after\nnext")


async def test_a_cut_document_tells_the_model_the_rest_was_not_read() -> None:
    async with DocumentReaders(ReaderConfig()) as readers:
        intake = Intake(IntakeConfig(max_document_chars=1000), None, readers)
        message_input = await intake.read(
            "", [Attachment("flood.docx", None, paragraph_flood_docx())]
        )

    [document] = message_input.documents
    assert (document.complete, message_input.documents_cut) == (False, True)
    assert message_input.stored_text.endswith(
        "\n[… the rest of this document was cut: it is longer than could be read]\n</document>"
    )


async def test_control_characters_in_a_file_name_stay_out_of_the_document_block() -> None:
    name = "re\x00port\r\n\x1b[31mred\u202e.txt"
    async with DocumentReaders(ReaderConfig()) as readers:
        message_input = await Intake(IntakeConfig(), None, readers).read(
            "", [Attachment(name, None, b"hi")]
        )

    assert message_input.stored_text == '<document name="report[31mred.txt">\nhi\n</document>'


async def test_an_archive_of_very_many_entries_is_not_taken_for_a_docx() -> None:
    """Its directory is not indexed in this process: past `MAX_ZIP_ENTRIES` it is a ZIP."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("word/document.xml", "<w:document/>")
        for number in range(MAX_ZIP_ENTRIES + 1):
            archive.writestr(str(number), b"")
    async with DocumentReaders(ReaderConfig()) as readers:
        refused = await refusal(readers, out.getvalue(), "many.docx")

    assert refused.problem is AttachmentProblem.UNREADABLE
    assert refused.detail == "not a DOCX inside"


def test_telling_a_large_8_bit_text_s_encoding_takes_memory_in_proportion_to_it() -> None:
    """Plain text is decoded in this process: guessing cp1251 looks at a sample of words,
    not at a list of every word of a 5 MB file."""
    data = ("Сервер падает каждую ночь " * 200_000).encode("cp1251")[:5_000_000]
    tracemalloc.start()
    try:
        text = decode_text(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text.startswith("Сервер падает")
    assert peak < 4 * len(data)  # the text (2 bytes a character) and a copy of it


async def test_a_lone_owner_takes_every_reader_and_the_next_owner_gets_the_first_free() -> None:
    """With two readers, owner A's three costly PDFs take both while no one else waits
    (no reader stays idle); owner B's harmless document gets the first reader to come
    free, ahead of A's third, and is read while that one is still pending."""
    async with DocumentReaders(ReaderConfig(processes=2, timeout_seconds=3)) as readers:

        async def owned(owner: str, data: bytes, name: str) -> Extracted:
            return await readers.read(
                data, name=name, mime=None, max_bytes=10_000_000, max_chars=BUDGET, owner=owner
            )

        costly = [
            asyncio.create_task(owned("user:1", costly_pages_pdf(), f"{n}.pdf")) for n in range(3)
        ]
        for _ in range(400):
            if len(live_readers()) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(live_readers()) == 2  # both readers are A's
        harmless = await owned("user:2", docx_file(), "report.docx")

        assert harmless != Extracted("")
        assert not costly[-1].done()
        for task in costly:
            with pytest.raises(AttachmentRefused) as caught:
                await task
            assert caught.value.problem is AttachmentProblem.TOO_COSTLY
