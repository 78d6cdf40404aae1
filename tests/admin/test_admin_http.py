"""The operator's console over HTTP, on a real server and a real store: signing in and
out, expiry, CSRF, brute force, every page on SQLite and PostgreSQL with its security
headers, deleting a consultation, hostile parameters, and an XSS corpus shown inert."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from admin.config import SESSION_COOKIE
from admin.evaluations import report_path
from admin.security import CSP
from app.settings import load_settings
from core.domain.audit import AuditEntry
from core.domain.consultation import Status
from core.domain.errors import ConfigError
from evaluation.report_json import write_json
from evaluation.results import Judgement, Report, RunResult
from tests.admin_harness import (
    HTML,
    TOKEN,
    Console,
    console_settings,
    consultation,
    field,
    running_console,
)
from tests.store_contract import STORE_KINDS, StoreKind

SQLITE = STORE_KINDS[0]
PAGES = [
    "/admin/",
    "/admin/consultations",
    "/admin/people",
    "/admin/people/tg:1",
    "/admin/knowledge",
    "/admin/audit",
    "/admin/evaluations",
]


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    run = folder / "20261126-080000"
    run.mkdir(parents=True)
    result = RunResult(
        "sqlite-vs-pg",
        "baseline",
        0,
        final_answer="Pick <script>alert('report')</script> [x](javascript:alert(1))",
        judgement=Judgement(0.8, justification="<img src=x onerror=alert(2)>"),
    )
    report = Report("2026-11-26T08:00:00Z", 7, {"bot": "m"}, ["baseline"], ["s"], 1, [result])
    write_json(report, run / "report.json")
    return folder


@pytest.fixture
async def console(kind: StoreKind, database: str, reports: Path) -> AsyncIterator[Console]:
    async with running_console(console_settings(kind, database, eval_reports_dir=reports)) as c:
        yield c


@pytest.fixture
async def sqlite_console(tmp_path: Path, reports: Path) -> AsyncIterator[Console]:
    address = await SQLITE.new_database(tmp_path)
    async with running_console(console_settings(SQLITE, address, eval_reports_dir=reports)) as c:
        yield c


def assert_protected(headers: object) -> None:
    from multidict import CIMultiDictProxy

    assert isinstance(headers, CIMultiDictProxy)
    assert headers["Content-Security-Policy"] == CSP
    assert "'unsafe-inline'" not in CSP and "default-src 'self'" in CSP
    assert "frame-ancestors 'none'" in CSP
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"


# -- on and off ---------------------------------------------------------------------------


async def test_without_admin_token_every_admin_path_is_404(tmp_path: Path) -> None:
    """The console is not mounted at all: its pages, sign-in and static files are 404."""
    address = await SQLITE.new_database(tmp_path)
    async with running_console(console_settings(SQLITE, address, admin_token=None)) as c:
        for path in [*PAGES, "/admin/login", "/admin/static/admin.css", "/admin"]:
            response = await c.client.get(path, headers=HTML, allow_redirects=False)
            assert response.status == 404, path
        response = await c.client.post("/admin/login", data={"token": TOKEN})
        assert response.status == 404


def test_a_short_admin_token_stops_the_start() -> None:
    settings = load_settings(admin_token="short", _env_file=None)
    with pytest.raises(ConfigError, match="ADMIN_TOKEN"):
        settings.admin_config()


def test_cookies_are_secure_unless_the_server_listens_on_loopback() -> None:
    for host, secure in (("127.0.0.1", False), ("::1", False), ("0.0.0.0", True)):
        config = load_settings(
            admin_token=TOKEN, api_host=host, api_allow_anonymous=True, _env_file=None
        ).admin_config()
        assert config is not None and config.secure_cookies is secure, host


# -- the gate -----------------------------------------------------------------------------


async def test_without_a_session_pages_redirect_browsers_and_refuse_others(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    for path in [*PAGES, "/admin/consultations/x", "/admin/nothing-here"]:
        response = await c.client.get(path, headers=HTML, allow_redirects=False)
        assert response.status == 303, path
        assert response.headers["Location"] == "/admin/login"
        assert_protected(response.headers)
        response = await c.client.get(path, allow_redirects=False)
        assert response.status == 401, path
    found = consultation()
    await c.store.create(found)
    response = await c.client.post(
        f"/admin/consultations/{found.id}/delete", data={"confirm": "yes", "csrf": "x"}
    )
    assert response.status == 401
    assert await c.store.get(found.id) is not None


async def test_signing_in_sets_a_strict_http_only_cookie_and_is_audited(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    form = await c.client.get("/admin/login", headers=HTML)
    assert_protected(form.headers)
    login = field(await form.text(), "login")
    response = await c.client.post(
        "/admin/login", data={"login": login, "token": TOKEN}, allow_redirects=False
    )
    assert response.status == 303 and response.headers["Location"] == "/admin/"
    cookie = next(
        v for v in response.headers.getall("Set-Cookie") if v.startswith(SESSION_COOKIE + "=")
    )
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/admin" in cookie
    assert "Max-Age=28800" in cookie
    assert "Secure" not in cookie  # loopback: the test's plain HTTP
    status, html = await c.page("/admin/audit")
    assert status == 200 and "sign_in" in html
    token = cookie.split(";")[0].split("=", 1)[1]
    assert token not in html  # the log names the session by a hash, never its token


async def test_a_wrong_token_is_refused_and_a_forged_sign_in_form_too(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    assert await c.sign_in("not-the-token") == 401
    assert (await c.page("/admin/consultations"))[0] == 303
    # No sign-in form token, or another one than the cookie's: refused before the token.
    response = await c.client.post("/admin/login", data={"token": TOKEN}, allow_redirects=False)
    assert response.status == 403
    await c.client.get("/admin/login")
    response = await c.client.post(
        "/admin/login", data={"token": TOKEN, "login": "forged"}, allow_redirects=False
    )
    assert response.status == 403
    assert (await c.page("/admin/consultations"))[0] == 303
    for hostile in ("x" * 100_000, "\u202e" + TOKEN, TOKEN + "\x00", ""):
        assert await c.sign_in(hostile) in (401, 429)


async def test_signing_out_ends_the_session_everywhere(sqlite_console: Console) -> None:
    """After sign-out the old cookie, replayed, opens nothing."""
    c = sqlite_console
    assert await c.sign_in() == 303
    cookie = c.client.session.cookie_jar.filter_cookies(c.client.make_url("/admin/"))
    token = cookie[SESSION_COOKIE].value
    csrf = await c.csrf()
    response = await c.client.post("/admin/logout", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/admin/login"
    # The browser drops the cookie only when the deletion names the cookie's own path.
    deleted = response.cookies[SESSION_COOKIE]
    assert deleted.value == "" and deleted["max-age"] == "0" and deleted["path"] == "/admin"
    assert (await c.page("/admin/consultations"))[0] == 303  # the jar kept no dead cookie
    replayed = await c.client.get(
        "/admin/consultations",
        headers={"Cookie": f"{SESSION_COOKIE}={token}"},
        allow_redirects=False,
    )
    assert replayed.status == 401
    assert await c.store.admin_session_expiry(token) is None
    actions = [e.action for e in await c.store.audit_log(before_id=None, limit=10)]
    assert actions[:2] == ["sign_out", "sign_in"]


async def test_the_sign_in_page_sends_a_signed_in_browser_to_the_dashboard(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    assert await c.sign_in() == 303
    response = await c.client.get("/admin/login", headers=HTML, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/admin/"
    status, html = await c.page("/admin/")
    assert status == 200 and "<h1>Dashboard</h1>" in html


async def test_a_session_expires(sqlite_console: Console) -> None:
    c = sqlite_console
    assert await c.sign_in() == 303
    c.clock.now += 8 * 3600 - 1
    assert (await c.page("/admin/consultations"))[0] == 200
    c.clock.now += 1
    assert (await c.page("/admin/consultations"))[0] == 303


async def test_a_post_without_its_csrf_token_is_refused(sqlite_console: Console) -> None:
    """Deleting and signing out need the session's token: missing, forged, another
    session's or oversized is 403 and changes nothing."""
    c = sqlite_console
    found = consultation()
    await c.store.create(found)
    assert await c.sign_in() == 303
    csrf = await c.csrf()
    path = f"/admin/consultations/{found.id}/delete"
    for forged in (None, "", "0" * len(csrf), csrf[:-1], csrf + "x" * 5000, csrf.upper()):
        data = {"confirm": "yes"} | ({} if forged is None else {"csrf": forged})
        response = await c.client.post(path, data=data, allow_redirects=False)
        assert response.status == 403, forged
        assert_protected(response.headers)
    response = await c.client.post(path, json={"csrf": csrf, "confirm": "yes"})
    assert response.status == 403  # not a form
    response = await c.client.post("/admin/logout", data={}, allow_redirects=False)
    assert response.status == 403
    assert await c.store.get(found.id) is not None
    assert (await c.page("/admin/consultations"))[0] == 200  # still signed in


async def test_failed_sign_ins_are_limited_per_address(sqlite_console: Console) -> None:
    """Five wrong tokens, then even the right one waits (429 with Retry-After) until the
    window has passed."""
    c = sqlite_console
    for _ in range(5):
        assert await c.sign_in("wrong-token-guess") == 401
    form = await c.client.get("/admin/login", headers=HTML)
    login = field(await form.text(), "login")
    response = await c.client.post(
        "/admin/login", data={"login": login, "token": TOKEN}, allow_redirects=False
    )
    assert response.status == 429 and int(response.headers["Retry-After"]) > 0
    c.clock.now += 901
    assert await c.sign_in() == 303


# -- pages on both stores -------------------------------------------------------------------


async def test_every_page_answers_with_its_security_headers(console: Console) -> None:
    c = console
    found = consultation()
    await c.store.create(found)
    assert await c.sign_in() == 303
    paths = [
        *PAGES,
        f"/admin/consultations/{found.id}",
        "/admin/consultations?status=complete&chat=tg%3A42&q=database&since=2025-01-01",
        "/admin/evaluations/20261126-080000",
    ]
    for path in paths:
        status, html = await c.page(path)
        assert status == 200, path
        assert "<script" not in html.lower(), path
        response = await c.client.get(path, headers=HTML)
        assert_protected(response.headers)
        assert response.headers["Cache-Control"] == "no-store"
    css = await c.client.get("/admin/static/admin.css")
    assert css.status == 200 and css.content_type == "text/css"
    assert_protected(css.headers)
    missing = await c.client.get("/admin/static/../../app/settings.py", headers=HTML)
    assert missing.status == 404
    unknown = await c.client.get("/admin/static/secrets.env", headers=HTML)
    assert unknown.status == 404
    assert_protected(unknown.headers)


async def test_the_audit_log_pages_to_its_oldest_entry(console: Console) -> None:
    """More than two pages of entries: each page links to the older ones, newest first,
    and together they show every entry once; the last has no link."""
    for n in range(230):
        await console.store.add_audit(AuditEntry(1_764_000_000.0 + n, "test", "note", f"e{n:03d}"))
    assert await console.sign_in() == 303
    seen: list[int] = []
    path: str | None = "/admin/audit"
    pages = 0
    while path is not None:
        status, html = await console.page(path)
        assert status == 200
        pages += 1
        seen += [int(n) for n in re.findall(r"<bdi>e(\d{3})</bdi>", html)]
        older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', html)
        path = older.group(1) if older else None
    assert pages == 3  # 231 entries with the sign-in's, 100 a page
    assert seen == list(range(229, -1, -1))


async def test_the_list_filters_and_pages(console: Console) -> None:
    c = console
    await c.store.create(consultation("About gardening", chat_key="tg:7", at=1_700_000_000.0))
    for n in range(55):
        c_ = consultation(
            f"Database question {n}", chat_key=f"tg:{100 + n}", at=1_750_000_000.0 + n
        )
        await c.store.create(c_)
    assert await c.sign_in() == 303
    status, html = await c.page("/admin/consultations")
    assert status == 200
    assert html.count("Database question") == 50 and "Older" in html
    older = re.search(r'href="([^"]+)" rel="next"', html)
    assert older is not None
    status, html = await c.page(older.group(1).replace("&amp;", "&"))
    assert html.count("Database question") == 5 and "About gardening" in html
    status, html = await c.page("/admin/consultations?q=GARDEN")
    assert "About gardening" in html and "Database question" not in html
    status, html = await c.page("/admin/consultations?chat=tg%3A103")
    assert "Database question 3<" in html and html.count("Database question") == 1
    status, html = await c.page("/admin/consultations?until=2023-11-14")
    assert "About gardening" in html and "Database question" not in html
    status, html = await c.page("/admin/consultations?since=2025-06-15&status=active")
    assert "No consultation matches" in html


async def test_a_transcript_shows_rounds_options_answers_final_answer_and_usage(
    console: Console,
) -> None:
    c = console
    found = consultation()
    await c.store.create(found)
    assert await c.sign_in() == 303
    status, html = await c.page(f"/admin/consultations/{found.id}")
    assert status == 200
    assert "How do I choose a database?" in html
    assert "Clarifying round 1" in html and "How many writers?" in html
    assert re.search(r'<li class="chosen"><span class="label">1b\)</span> Several', html)
    assert '<li><span class="label">1a)</span> One' in html
    assert "<strong>PostgreSQL</strong>" in html  # the answer's Markdown, rendered
    assert "400 in, 220 out" in html and "2 of 2 replies counted" in html
    assert "include anything else this chat asked" in html


async def test_deleting_from_the_transcript_page_is_audited(console: Console) -> None:
    c = console
    found, other = consultation(), consultation(chat_key="tg:43")
    await c.store.create(found)
    await c.store.create(other)
    assert await c.sign_in() == 303
    _, html = await c.page(f"/admin/consultations/{found.id}")
    csrf = field(html, "csrf")
    path = f"/admin/consultations/{found.id}/delete"
    response = await c.client.post(path, data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 400  # not confirmed
    assert await c.store.get(found.id) is not None
    response = await c.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert response.status == 303
    assert await c.store.get(found.id) is None
    assert await c.store.get(other.id) is not None
    assert (await c.page(f"/admin/consultations/{found.id}"))[0] == 404
    response = await c.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert response.status == 404
    _, html = await c.page("/admin/audit")
    assert "delete_consultation" in html and found.id in html and "tg:42" in html


async def test_an_active_consultation_can_be_deleted_and_its_chat_starts_anew(
    sqlite_console: Console,
) -> None:
    c = sqlite_console
    found = consultation(final=None)
    await c.store.create(found)
    assert found.status is Status.ACTIVE
    assert await c.sign_in() == 303
    csrf = await c.csrf()
    response = await c.client.post(
        f"/admin/consultations/{found.id}/delete",
        data={"csrf": csrf, "confirm": "yes"},
        allow_redirects=False,
    )
    assert response.status == 303
    assert await c.store.load_active("tg:42") is None


# -- hostile input ----------------------------------------------------------------------


async def test_hostile_list_parameters_are_400_not_errors(sqlite_console: Console) -> None:
    c = sqlite_console
    assert await c.sign_in() == 303
    for query in (
        "since=yesterday",
        "until=2026-13-45",
        "status=deleted",
        "q=" + "x" * 201,
        "chat=" + "c" * 201,
        "after=nan_abc",
        "after=1.0",
        "after=inf_x",
        "after=1.0_" + "i" * 65,
        "since=%00",
    ):
        status, _ = await c.page(f"/admin/consultations?{query}")
        assert status == 400, query
    status, _ = await c.page("/admin/consultations?q=%27%20OR%201%3D1%20--&chat=%22%3B")
    assert status == 200


async def test_hostile_ids_are_404(sqlite_console: Console) -> None:
    c = sqlite_console
    assert await c.sign_in() == 303
    for ident in ("x" * 65, "' OR '1'='1", "..%2F..%2Fetc", "%00", "%E2%80%AE"):
        status, _ = await c.page(f"/admin/consultations/{ident}")
        assert status == 404, ident


async def test_report_names_cannot_leave_the_reports_folder(
    sqlite_console: Console, reports: Path, tmp_path: Path
) -> None:
    c = sqlite_console
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_text('{"started_at": "SECRET-OUTSIDE"}')
    (reports / "escape").symlink_to(outside)
    assert await c.sign_in() == 303
    for name in ("..%2Foutside", "escape", "%2Fetc%2Fpasswd", "%5C..%5Coutside", "a" * 200):
        status, html = await c.page(f"/admin/evaluations/{name}")
        assert status == 404, name
        assert "SECRET-OUTSIDE" not in html
    for name in ("..", ".", "../outside", "escape", "/etc", "escape/..", "~"):
        assert report_path(reports, name) is None, name  # what a client cannot even send
    status, html = await c.page("/admin/evaluations")
    assert "20261126-080000" in html and "escape" not in html
    (reports / "broken").mkdir()
    (reports / "broken" / "report.json").write_text("[1, 2")
    assert (await c.page("/admin/evaluations/broken"))[0] == 422


# -- XSS corpus -----------------------------------------------------------------------------

CORPUS = (
    "<script>alert('request')</script>",
    "[click](javascript:alert(1)) [also](JAVASCRIPT:alert(2)) [data](data:text/html,x)",
    "<img src=x onerror=alert(3)>",
    '<a href="javascript:alert(4)">html link</a> <b onmouseover="alert(5)">bold</b>',
    "\u202eevil.exe\u202c and \u2066isolated\u2069",
    "![tracker](https://third.party.example/pixel.png)",
    '"><svg onload=alert(6)>',
)


async def test_request_and_answer_carrying_markup_are_shown_inert(console: Console) -> None:
    c = console
    payload = "\n\n".join(CORPUS)
    found = consultation(
        payload, chat_key="tg:<script>x</script>", final=payload, options=("<b>x</b>", "Several")
    )
    await c.store.create(found)
    assert await c.sign_in() == 303
    for path in (
        f"/admin/consultations/{found.id}",
        "/admin/consultations",
        "/admin/consultations?q=%3Cscript%3E",
        "/admin/evaluations/20261126-080000",
    ):
        status, html = await c.page(path)
        assert status == 200, path
        lowered = html.lower()
        assert "<script" not in lowered, path
        assert "<img" not in lowered and "<svg" not in lowered, path
        assert not re.search(r"<[^>]+\son\w+\s*=", lowered), path  # no event handler attribute
        assert not re.search(r"""href\s*=\s*["']?\s*(javascript|data):""", lowered), path
        assert "third.party.example/pixel.png" not in re.findall(r'src="([^"]*)"', html), path
        assert "\u202e" not in html and "\u2066" not in html, path
    status, html = await c.page(f"/admin/consultations/{found.id}")
    assert "&lt;script&gt;alert(&#39;request&#39;)&lt;/script&gt;" in html
    assert "[U+202E]evil.exe" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html  # an option is text too


async def test_hostile_cookies_and_bodies_open_nothing(sqlite_console: Console) -> None:
    """Forged, oversized or malformed session cookies are no session; a body past the
    server's limit, or a form with thousands of fields, is refused (413); a form whose
    sign-in token is not among the fields read signs nobody in."""
    c = sqlite_console
    for value in ("x" * 5_000, "", "%00", "a;b", "\u202e", "0" * 43):
        response = await c.client.get(
            "/admin/consultations",
            headers={"Cookie": f"{SESSION_COOKIE}={value}"},
            allow_redirects=False,
        )
        assert response.status == 401, value[:20]
    body = io.BytesIO(b"token=" + b"x" * 2_000_000)
    response = await c.client.post(
        "/admin/login",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status == 413
    stuffed = {f"field{n}": "v" for n in range(5000)} | {"token": TOKEN}
    response = await c.client.post("/admin/login", data=stuffed, allow_redirects=False)
    assert response.status == 413
    await c.client.get("/admin/login")
    crowded = {f"field{n}": "v" for n in range(30)} | {"token": TOKEN, "login": "late"}
    response = await c.client.post("/admin/login", data=crowded, allow_redirects=False)
    assert response.status == 403
    assert await c.sign_in() == 303
