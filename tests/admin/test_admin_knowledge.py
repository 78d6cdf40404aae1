"""The console's Knowledge page on a real server and store (SQLite and PostgreSQL), files
read by the runtime's own document readers: upload → listed → searchable → deleted, each
change audited; and hostile uploads, deletes and searches: forged or missing CSRF
tokens, no session, files over the limit (50 MB, in bounded memory), too many files,
hostile file names, a malformed or cut body, a 100,000-character query and markup in
titles and passages — each refused or shown inert, nothing half-stored."""

from __future__ import annotations

import contextlib
import io
import re
import time
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from admin.knowledge import MAX_FILES, MAX_QUERY_CHARS
from tests.admin_harness import HTML, Console, console_settings, running_console
from tests.store_contract import STORE_KINDS, StoreKind

SQLITE = STORE_KINDS[0]
BOUNDARY = "knowledge-test-boundary-7f3a"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}

GUIDE = b"""# Kettle warranty

The kettle is covered for two years from the day of purchase.

## Returns

A kettle bought online may be returned within thirty days, unused, in its box.
"""
PAGE_HTML = b"""<html><head><title>Descaling manual</title></head><body>
<h1>Descaling</h1><p>Descale the kettle monthly with citric acid.</p></body></html>"""


@pytest.fixture
async def console(kind: StoreKind, database: str) -> AsyncIterator[Console]:
    async with running_console(console_settings(kind, database)) as c:
        yield c


@pytest.fixture
async def sqlite_console(tmp_path: Path) -> AsyncIterator[Console]:
    address = await SQLITE.new_database(tmp_path)
    async with running_console(console_settings(SQLITE, address)) as c:
        yield c


@contextlib.asynccontextmanager
async def small_limit_console(tmp_path: Path, max_bytes: int) -> AsyncIterator[Console]:
    """A console on SQLite whose largest document is `max_bytes`."""
    address = await SQLITE.new_database(tmp_path)
    settings = console_settings(SQLITE, address, knowledge_max_document_bytes=max_bytes)
    async with running_console(settings) as c:
        yield c


def part(name: str, value: bytes, *, filename: str | None = None) -> bytes:
    """One part of a multipart form (a file when `filename` is given), as a browser
    writes it; the file name is written as given (quotes and all) to test the server."""
    disposition = f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
    if filename is not None:
        head += "Content-Type: application/octet-stream\r\n"
    return head.encode("utf-8", "surrogateescape") + b"\r\n" + value + b"\r\n"


def form(
    csrf: str | None,
    files: Sequence[tuple[str, bytes]],
    *,
    title: str = "",
    role: str = "",
    csrf_last: bool = False,
) -> bytes:
    """An upload form's body: the CSRF token, title and role, then the files (or the
    token after them, `csrf_last`)."""
    fields = [part("title", title.encode()), part("role", role.encode())]
    token = [] if csrf is None else [part("csrf", csrf.encode())]
    body = b"" if csrf_last else b"".join(token)
    body += b"".join(fields)
    body += b"".join(part("files", data, filename=name) for name, data in files)
    if csrf_last:
        body += b"".join(token)
    return body + f"--{BOUNDARY}--\r\n".encode()


async def upload(console: Console, body: Any, **headers: str) -> tuple[int, str]:
    """POST `body` (bytes, or chunks as they are sent) to the upload form."""
    response = await console.client.post(
        "/admin/knowledge/upload",
        data=io.BytesIO(body) if isinstance(body, bytes) else body,
        headers=MULTIPART | HTML | headers,
        allow_redirects=False,
    )
    return response.status, await response.text()


async def search(console: Console, csrf: str, query: str, role: str = "") -> tuple[int, str]:
    response = await console.client.post(
        "/admin/knowledge/search",
        data={"csrf": csrf, "q": query, "role": role},
        headers=HTML,
        allow_redirects=False,
    )
    return response.status, await response.text()


async def delete(console: Console, document: int | str, data: dict[str, str]) -> int:
    response = await console.client.post(
        f"/admin/knowledge/{document}/delete", data=data, headers=HTML, allow_redirects=False
    )
    return response.status


async def knowledge_audit(console: Console) -> list[tuple[str, str, str]]:
    entries = await console.store.audit_log(before_id=None, limit=100)
    return [(e.action, e.target, e.detail) for e in entries if e.action.startswith("knowledge")]


def outcomes(html: str) -> list[tuple[str, str]]:
    """Each uploaded file's (source, outcome) in the page's table of outcomes."""
    rows = re.findall(
        r'<td data-label="File"><bdi>([^<]*)</bdi></td>\s*'
        r'<td data-label="Outcome"><span class="status">(\w+)</span>',
        html,
    )
    return [(source, outcome) for source, outcome in rows]


async def signed_in(console: Console) -> str:
    assert await console.sign_in() == 303
    return await console.csrf("/admin/knowledge")


# -- the whole path, both stores -----------------------------------------------------------


async def test_upload_list_search_and_delete_are_audited(console: Console) -> None:
    """Two files (Markdown read here, HTML by the runtime's reader processes) are added,
    listed as the CLI lists them and found by a search as a consultation would; the same
    file again is unchanged, a changed one replaced; deleting one removes it from the
    list and from searches; each file and the delete is in the audit log with its id."""
    c = console
    csrf = await signed_in(c)
    status, html = await c.page("/admin/knowledge")
    assert status == 200 and "The knowledge base is empty." in html
    assert '<a href="/admin/knowledge">Knowledge</a>' in html

    status, html = await upload(
        c, form(csrf, [("guide.md", GUIDE), ("descaling.html", PAGE_HTML)], role="expert")
    )
    assert status == 200
    assert outcomes(html) == [("upload:guide.md", "added"), ("upload:descaling.html", "added")]
    documents = {d.source: d for d in await c.store.knowledge.documents()}
    guide, manual = documents["upload:guide.md"], documents["upload:descaling.html"]
    assert guide.title == "Kettle warranty" and manual.title == "Descaling manual"
    assert guide.role == "expert" and guide.chunks == 2

    status, html = await c.page("/admin/knowledge")
    assert f"#{guide.id}" in html and "Descaling manual" in html and "upload:guide.md" in html
    assert "the role <bdi>expert</bdi>" in html and '<td data-label="Passages">2</td>' in html

    status, html = await search(c, csrf, "How long is the warranty?", "expert")
    assert status == 200
    assert "<strong>[K1]</strong> <bdi>Kettle warranty</bdi>" in html
    assert f"(document #{guide.id}, score " in html
    assert "covered for two years" in html
    status, html = await search(c, csrf, "kettle", "lawyer")  # documents for expert only
    assert "No passage matches." in html

    status, html = await upload(c, form(csrf, [("guide.md", GUIDE)], role="expert"))
    assert outcomes(html) == [("upload:guide.md", "unchanged")]
    changed = GUIDE.replace(b"two years", b"three years")
    status, html = await upload(c, form(csrf, [("guide.md", changed)], role="expert"))
    assert outcomes(html) == [("upload:guide.md", "replaced")]
    replaced = await c.store.knowledge.document("upload:guide.md")
    assert replaced is not None and replaced.id == guide.id

    assert await delete(c, guide.id, {"csrf": csrf, "confirm": "yes"}) == 303
    assert await c.store.knowledge.document("upload:guide.md") is None
    status, html = await c.page("/admin/knowledge")
    assert "upload:guide.md" not in html and "Descaling manual" in html
    status, html = await search(c, csrf, "warranty three years", "expert")
    assert "No passage matches." in html
    assert await delete(c, manual.id, {"csrf": csrf, "confirm": "yes"}) == 303
    status, html = await search(c, csrf, "descale", "expert")
    assert "The knowledge base is empty" in html

    audit = await knowledge_audit(c)
    assert [(action, target) for action, target, _ in reversed(audit)] == [
        ("knowledge_upload", f"document {guide.id}"),
        ("knowledge_upload", f"document {manual.id}"),
        ("knowledge_upload", f"document {guide.id}"),
        ("knowledge_upload", f"document {guide.id}"),
        ("knowledge_delete", f"document {guide.id}"),
        ("knowledge_delete", f"document {manual.id}"),
    ]
    details = [detail for _, _, detail in reversed(audit)]
    assert details[0] == "added upload:guide.md as Kettle warranty (2 passages, role expert)"
    assert details[2].startswith("unchanged upload:guide.md")
    assert details[3].startswith("replaced upload:guide.md")
    assert details[4] == "Kettle warranty (upload:guide.md, 2 passages)"
    status, html = await c.page("/admin/audit")
    assert "knowledge_upload" in html and "knowledge_delete" in html


async def test_a_file_that_fails_is_named_with_its_reason_and_audited(console: Console) -> None:
    """A file of a kind not loaded and one with no text fail, each naming the file and
    why; the good file beside them is added; the failures are audited too."""
    csrf = await signed_in(console)
    files = [("notes.exe", b"MZ\x90\x00"), ("empty.txt", b"   \n"), ("guide.md", GUIDE)]
    status, html = await upload(console, form(csrf, files))
    assert status == 200
    assert outcomes(html) == [
        ("upload:notes.exe", "failed"),
        ("upload:empty.txt", "failed"),
        ("upload:guide.md", "added"),
    ]
    assert "not a kind loaded" in html
    assert [d.source for d in await console.store.knowledge.documents()] == ["upload:guide.md"]
    audit = [(action, target, detail) for action, target, detail in await knowledge_audit(console)]
    assert audit[2][:2] == ("knowledge_upload", "")
    assert audit[2][2].startswith("failed upload:notes.exe: not a kind loaded")
    assert audit[1][2].startswith("failed upload:empty.txt: ")


# -- the gate ----------------------------------------------------------------------------------


async def test_without_a_session_nothing_is_read_or_stored(sqlite_console: Console) -> None:
    c = sqlite_console
    assert (await c.page("/admin/knowledge"))[0] == 303
    status, _ = await upload(c, form("x", [("guide.md", GUIDE)]), Accept="*/*")
    assert status == 401
    response = await c.client.post("/admin/knowledge/search", data={"q": "kettle"})
    assert response.status == 401
    assert await c.store.knowledge.documents() == []


async def test_a_forged_or_missing_csrf_token_stores_and_deletes_nothing(
    sqlite_console: Console,
) -> None:
    """Missing, forged, oversized, or sent after the files (the files are never read
    before the token): 403, nothing stored, nothing deleted, nothing audited."""
    c = sqlite_console
    csrf = await signed_in(c)
    files = [("guide.md", GUIDE)]
    for forged in (None, "", "0" * len(csrf), csrf[:-1], csrf + "x" * 600):
        status, _ = await upload(c, form(forged, files))
        assert status == 403, forged
    status, _ = await upload(c, form(csrf, files, csrf_last=True))
    assert status == 403
    assert await c.store.knowledge.documents() == []
    status, _ = await upload(c, form(csrf, files))
    assert status == 200
    (document,) = await c.store.knowledge.documents()
    for forged in (None, "0" * len(csrf)):
        data = {"confirm": "yes"} | ({} if forged is None else {"csrf": forged})
        assert await delete(c, document.id, data) == 403
    response = await c.client.post(
        "/admin/knowledge/search", data={"q": "kettle", "csrf": "forged"}, headers=HTML
    )
    assert response.status == 403
    assert [d.id for d in await c.store.knowledge.documents()] == [document.id]
    assert [a for a, _, _ in await knowledge_audit(c)] == ["knowledge_upload"]


# -- hostile uploads -----------------------------------------------------------------------------


async def fifty_megabytes(csrf: str) -> AsyncIterator[bytes]:
    """An upload of one 50 MB Markdown file, sent in 1 MB pieces (never held whole)."""
    yield part("csrf", csrf.encode()) + f"--{BOUNDARY}\r\n".encode()
    yield b'Content-Disposition: form-data; name="files"; filename="huge.md"\r\n\r\n'
    piece = b"kettle " * (1_000_000 // 7) + b"\n" * (1_000_000 % 7)
    for _ in range(50):
        yield piece
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


async def test_a_50_mb_file_over_the_limit_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """With a 3 MB limit, a 50 MB file (sent chunked, its size declared nowhere) is read
    to its end but never held: the page names it with its size and the limit, nothing
    is stored, and the server's memory grew by far less than the file."""
    async with small_limit_console(tmp_path, 3_000_000) as c:
        csrf = await signed_in(c)
        tracemalloc.start()
        try:
            started = time.monotonic()
            status, html = await upload(c, fifty_megabytes(csrf))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert status == 200
        assert outcomes(html) == [("upload:huge.md", "failed")]
        assert "50.0 MB, over KNOWLEDGE_MAX_DOCUMENT_BYTES (3 MB)" in html
        assert peak < 12_000_000, peak
        assert time.monotonic() - started < 30
        assert await c.store.knowledge.documents() == []
        ((action, target, detail),) = await knowledge_audit(c)
        assert (action, target) == ("knowledge_upload", "")
        assert detail.startswith("failed upload:huge.md: 50.0 MB, over")


async def test_an_upload_declared_or_read_past_its_limit_stops(tmp_path: Path) -> None:
    """With a 1,000-byte limit one upload holds at most 20 files of it plus 1 MB of form:
    a larger declared body is 413 before any file is read; a chunked one is read only
    up to that limit, then refused whole: nothing stored."""
    async with small_limit_console(tmp_path, 1000) as c:
        csrf = await signed_in(c)
        body = form(csrf, [("big.md", b"x" * 2_000_000)])
        status, html = await upload(c, body)
        assert status == 413 and "Nothing was added" in html

        async def chunked() -> AsyncIterator[bytes]:
            yield body[:1000]
            for start in range(1000, len(body), 100_000):
                yield body[start : start + 100_000]

        status, html = await upload(c, chunked())
        assert status == 413
        assert "The upload passed 1.02 MB" in html and "Nothing was added" in html
        assert await c.store.knowledge.documents() == []
        assert await knowledge_audit(c) == []


async def test_an_upload_of_more_than_twenty_files_stores_none(sqlite_console: Console) -> None:
    """Twenty files are loaded; twenty-three are refused whole (the ones past twenty only
    counted), nothing stored, nothing audited."""
    c = sqlite_console
    csrf = await signed_in(c)
    files = [(f"note-{n:02d}.txt", f"Note {n} about kettles.".encode()) for n in range(23)]
    status, html = await upload(c, form(csrf, files))
    assert status == 413
    assert "The upload holds 23 files; at most 20. Nothing was added." in html
    assert await c.store.knowledge.documents() == []
    assert await knowledge_audit(c) == []
    status, html = await upload(c, form(csrf, files[:MAX_FILES]))
    assert status == 200 and len(outcomes(html)) == MAX_FILES
    assert len(await c.store.knowledge.documents()) == MAX_FILES
    assert len(await knowledge_audit(c)) == MAX_FILES


async def test_hostile_file_names_are_cut_to_their_base_name(sqlite_console: Console) -> None:
    """Path parts are dropped (a name is only a source: nothing is written to a path), tabs and
    direction characters removed, and a 5,000-character name is cut (then not a kind
    loaded): each outcome names the file as stored, bounded. A raw control character in
    a part's headers makes the body unreadable: said so, nothing of it stored, not even
    the files before it."""
    c = sqlite_console
    csrf = await signed_in(c)
    long_name = "n" * 5000 + ".md"
    files = [
        ("../../etc/passwd.md", b"Kettle facts one."),
        ("C:\\\\Users\\\\ann\\\\prices.txt", b"Kettle prices two."),  # quoted: \\ is \
        ("tab\there\u202eevil\u200f.md", b"Kettle facts three."),
        (long_name, b"Kettle facts four."),
    ]
    status, html = await upload(c, form(csrf, files))
    assert status == 200
    sources = outcomes(html)
    assert sources == [
        ("upload:passwd.md", "added"),
        ("upload:prices.txt", "added"),
        ("upload:tabhereevil.md", "added"),
        ("upload:" + "n" * 200, "failed"),
    ]
    assert "\u202e" not in html and "\u200f" not in html
    stored = sorted(d.source for d in await c.store.knowledge.documents())
    assert stored == ["upload:passwd.md", "upload:prices.txt", "upload:tabhereevil.md"]
    assert all(len(detail) <= 500 for _, _, detail in await knowledge_audit(c))

    files = [("fine.md", b"Kettle facts five."), ("bell\x07\x1b[31m.md", b"Kettle six.")]
    for sent in (files, files[1:]):
        status, html = await upload(c, form(csrf, sent))
        assert status == 400 and "a part of it is malformed" in html
        assert "Nothing was added" in html
    assert len(await c.store.knowledge.documents()) == 3


async def test_a_malformed_or_cut_body_stores_nothing(sqlite_console: Console) -> None:
    """A body that is not multipart as declared has no token (403); one cut inside a
    file, its token read, is refused whole (400), not even its first file stored; no
    file at all, or only an empty file input, is 400."""
    c = sqlite_console
    csrf = await signed_in(c)
    garbage = b"--not-the-boundary\r\n" + GUIDE
    assert (await upload(c, garbage))[0] == 403
    response = await c.client.post(
        "/admin/knowledge/upload",
        data=form(csrf, [("guide.md", GUIDE)]),
        headers={"Content-Type": "multipart/form-data"} | HTML,  # no boundary
    )
    assert response.status == 403
    whole = form(csrf, [("first.md", b"Kettle facts."), ("guide.md", GUIDE)])
    status, html = await upload(c, whole[:-60])  # inside the second file
    assert status == 400 and "The upload broke off" in html and "Nothing was added" in html
    assert (await upload(c, form(csrf, [])))[0] == 400
    assert (await upload(c, form(csrf, [("", b"")])))[0] == 400
    assert await c.store.knowledge.documents() == []


async def test_title_and_role_are_checked_before_any_file(sqlite_console: Console) -> None:
    c = sqlite_console
    csrf = await signed_in(c)
    files = [("a.md", b"Kettle one."), ("b.md", b"Kettle two.")]
    status, html = await upload(c, form(csrf, files, title="Prices"))
    assert status == 400 and "2 files were given: nothing added" in html
    for title in ("t" * 201, "tab\there", "nul\x00"):
        assert (await upload(c, form(csrf, files[:1], title=title)))[0] == 400, title
    for role in ("nobody", "<b>x</b>", "r" * 3000):
        assert (await upload(c, form(csrf, files[:1], role=role)))[0] == 400, role
    huge_field = part("csrf", csrf.encode()) + part("title", b"t" * 5000)
    assert (await upload(c, huge_field + f"--{BOUNDARY}--\r\n".encode()))[0] == 413
    assert await c.store.knowledge.documents() == []
    assert await knowledge_audit(c) == []
    status, html = await upload(c, form(csrf, files[:1], title="Prices 2027", role="lawyer"))
    assert outcomes(html) == [("upload:a.md", "added")]
    (document,) = await c.store.knowledge.documents()
    assert (document.title, document.role) == ("Prices 2027", "lawyer")


# -- hostile deletes and searches ------------------------------------------------------------


async def test_deleting_needs_confirmation_and_an_existing_id(sqlite_console: Console) -> None:
    c = sqlite_console
    csrf = await signed_in(c)
    await upload(c, form(csrf, [("guide.md", GUIDE)]))
    (document,) = await c.store.knowledge.documents()
    assert await delete(c, document.id, {"csrf": csrf}) == 400
    for ident in ("999999", "0", "-1", "1e3", "9" * 19, "%00", "' OR 1=1"):
        assert await delete(c, ident, {"csrf": csrf, "confirm": "yes"}) == 404, ident
    assert [d.id for d in await c.store.knowledge.documents()] == [document.id]
    assert [a for a, _, _ in await knowledge_audit(c)] == ["knowledge_upload"]


async def test_a_100000_character_query_is_cut_and_answered_quickly(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    csrf = await signed_in(c)
    await upload(c, form(csrf, [("guide.md", GUIDE)]))
    query = "warranty " + "kettle-" * 14_285
    assert len(query) > 100_000
    started = time.monotonic()
    status, html = await search(c, csrf, query)
    assert status == 200
    assert time.monotonic() - started < 2
    assert f"cut to its first {MAX_QUERY_CHARS:,} characters" in html
    assert "[K1]" in html
    assert "kettle-" * 300 not in html  # the query shown is the one searched
    status, _ = await search(c, csrf, "kettle", "nobody")
    assert status == 400


async def test_markup_in_titles_and_passages_is_shown_as_text(console: Console) -> None:
    c = console
    csrf = await signed_in(c)
    text = b"Kettle notes <img src=x onerror=alert(1)> and <script>alert(2)</script>\n"
    title = "<script>alert('title')</script>"
    status, html = await upload(c, form(csrf, [("x.txt", text)], title=title))
    assert status == 200
    pages = [html, (await c.page("/admin/knowledge"))[1], (await search(c, csrf, "kettle"))[1]]
    for shown in pages:
        lowered = shown.lower()
        assert "<script" not in lowered and "<img" not in lowered
        assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in shown
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[2]
