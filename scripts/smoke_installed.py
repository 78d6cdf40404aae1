"""Production smoke: every path a deployment reaches, run on the installed product.

    python -m venv /tmp/smoke && /tmp/smoke/bin/pip install dist/consultation_bot-*.whl
    /tmp/smoke/bin/python scripts/smoke_installed.py

Run it with the interpreter of an environment where the wheel is installed without
extras (`.ci/run` and `scripts/check-image.sh` do): it imports nothing from the checkout
but its two sibling modules (stdlib and aiohttp only), and starts the installed
`consultation-bot` beside that interpreter, against a fake model and a fake Telegram on
127.0.0.1 (`smoke_fakes`), in an empty folder (no .env). It checks:

- a consultation at the terminal to the final answer, a PDF and a DOCX attached there
  reaching the model as text (the media readers), and `/export` writing DOCX and Markdown,
  both read back;
- the bot (`consultation-bot run`, polling): `/start` in each of the 14 languages, a
  consultation and `/export` sending both files;
- on the same process's HTTP server: `/healthz`, `/metrics`, a consultation through the
  API and its export in both formats, the web console's pages after signing in;
- SIGTERM ending the bot with exit code 0.

Exit status 0 when every check passed; 1 otherwise, each failed check named on its own
`SMOKE FAILED:` line with what was seen; the last line counts the steps (`smoke: 7
passed, 0 failed`). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from smoke_documents import docx_paragraphs, docx_with_text, pdf_with_text
from smoke_fakes import BOT_TOKEN, FakeModel, FakeTelegram

LANGUAGES = ("en", "ru", "uk", "de", "es", "pt-br", "it", "fr", "tr", "id", "ja", "zh-hans",
             "fa", "ar")  # fmt: skip
"""Telegram `language_code`s of the 14 interface languages."""
PDF_WORDS = "Quarterly revenue grew by seventeen percent"
DOCX_WORDS = "The warranty covers water damage for two years"
API_TOKEN = "smoke-api-token"
ADMIN_TOKEN = "smoke-admin-token-0123456789"
WAIT = 60.0
ADMIN_PAGES = ("/admin/", "/admin/consultations", "/admin/people", "/admin/audit",
               "/admin/evaluations")  # fmt: skip


class Failed(Exception):
    """A check that did not hold; the message says what was seen."""


def check(condition: object, message: str) -> None:
    if not condition:
        raise Failed(message)


def command() -> str:
    """The installed entry point beside this interpreter."""
    path = Path(sys.executable).parent / "consultation-bot"
    check(path.exists(), f"{path} is missing: is the wheel installed in this environment?")
    return str(path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(work: Path, model: FakeModel, **more: str) -> dict[str, str]:
    """A deployment's settings, nothing inherited but PATH."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "OPENAI_API_KEY": "smoke-key",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MODEL": "smoke-model",
        "LLM_MAX_RETRIES": "0",
        "LLM_STRUCTURED_QUESTIONS": "off",
        "MEMORY_ENABLED": "false",
        "LOG_LEVEL": "WARNING",
        **more,
    }


async def until(what: str, ready: Callable[[], Awaitable[bool]]) -> None:
    """Wait up to WAIT seconds for `ready`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not await ready():
        check(loop.time() < deadline, f"gave up waiting for {what}")
        await asyncio.sleep(0.2)


def installed_not_checkout() -> None:
    """The product is imported from this environment, never from a source tree."""
    import app

    origin = Path(app.__file__).resolve()
    check(Path(sys.prefix).resolve() in origin.parents, f"app imported from {origin}")
    print(f"app from {origin.parent}")


async def console(work: Path, model: FakeModel) -> None:
    """A consultation to its final answer, /export, then a PDF and a DOCX sent."""
    exports = work / "exports"
    exports.mkdir()
    (work / "report.pdf").write_bytes(pdf_with_text(PDF_WORDS))
    (work / "terms.docx").write_bytes(docx_with_text(DOCX_WORDS))
    lines = [
        "Help me choose a laptop",
        "/answer",
        f"/export {exports}",
        f"/file {work / 'report.pdf'}",
        f"/file {work / 'terms.docx'}",
        "What do these two documents say?",
        "/quit",
    ]
    env = environment(work, model, DB_PATH=str(work / "console.sqlite3"))
    process = await asyncio.create_subprocess_exec(
        command(),
        "console",
        cwd=work,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate("\n".join(lines).encode()), WAIT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise Failed(f"the console did not finish within {WAIT:.0f} s") from None
    shown = out.decode() + err.decode()
    print(shown)
    check(process.returncode == 0, f"console exited {process.returncode}")
    check("Traceback" not in shown, "the console printed a traceback")
    check("Reply to: Help me choose a laptop" in shown, "no reply to the first message")
    check("[final answer" in shown, "no final answer shown")
    check("[wrote " in shown, "/export wrote no files")
    docx = sorted(exports.glob("*.docx"))
    markdown = sorted(exports.glob("*.md"))
    check(len(docx) == 1 and len(markdown) == 1, f"exported {os.listdir(exports)}")
    paragraphs = docx_paragraphs(docx[0].read_bytes())
    check("Final answer" in paragraphs, f"the DOCX has no final answer heading: {paragraphs}")
    check(any("Help me choose a laptop" in p for p in paragraphs), "the DOCX lacks the request")
    text = markdown[0].read_text(encoding="utf-8")
    check("Final answer" in text and "Help me choose a laptop" in text, f"the Markdown: {text}")
    sent = model.sent_text()
    check(PDF_WORDS in sent, "the PDF's text did not reach the model")
    check(DOCX_WORDS in sent, "the DOCX's text did not reach the model")


async def telegram_start(telegram: FakeTelegram) -> None:
    """/start in each language: 14 different texts, each filled in."""
    users = {code: 1000 + n for n, code in enumerate(LANGUAGES)}
    for code, user in users.items():
        telegram.push("/start", user_id=user, language_code=code)

    async def answered() -> bool:
        return all(telegram.texts_to(user) for user in users.values())

    await until("/start answered in every language", answered)
    texts = {code: telegram.texts_to(user)[0] for code, user in users.items()}
    for code, text in texts.items():
        check(text.strip() and "{" not in text, f"/start in {code}: {text!r}")
    check("consultant" in texts["en"], f"/start in English: {texts['en']!r}")
    same = [code for code, text in texts.items() if code != "en" and text == texts["en"]]
    check(not same, f"/start is the English text in {same}")
    check(len(set(texts.values())) == len(LANGUAGES), "two languages share a /start text")
    print(f"/start in {len(texts)} languages, e.g. {texts['de'].splitlines()[0]}")


async def telegram_export(telegram: FakeTelegram) -> None:
    """A consultation in a private chat, then /export: both files, read back."""
    user = 2001
    telegram.push("Plan a trip to Rome", user_id=user, language_code="en")

    async def replied() -> bool:
        return any("Reply to: Plan a trip to Rome" in t for t in telegram.texts_to(user))

    await until("the bot's reply", replied)
    telegram.push("/export", user_id=user, language_code="en")

    async def exported() -> bool:
        return len(telegram.documents_to(user)) >= 2 or len(telegram.texts_to(user)) > 1

    await until("/export's files", exported)
    files = {Path(d.filename).suffix: d.data for d in telegram.documents_to(user)}
    check(
        set(files) == {".docx", ".md"},
        f"/export sent {sorted(files)} and {telegram.texts_to(user)[1:]}",
    )
    paragraphs = docx_paragraphs(files[".docx"])
    check(any("Plan a trip to Rome" in p for p in paragraphs), f"the DOCX: {paragraphs}")
    check("Plan a trip to Rome" in files[".md"].decode(), "the Markdown lacks the request")


def client() -> aiohttp.ClientSession:
    jar = aiohttp.CookieJar(unsafe=True)  # keeps cookies for 127.0.0.1
    return aiohttp.ClientSession(cookie_jar=jar, timeout=aiohttp.ClientTimeout(total=WAIT))


async def health_and_metrics(http: aiohttp.ClientSession, base: str) -> None:
    async with http.get(f"{base}/healthz") as response:
        health = await response.json()
        check(response.status == 200 and health["status"] == "ok", f"/healthz: {health}")
    async with http.get(f"{base}/metrics") as response:
        text = await response.text()
        check(response.status == 200 and "# TYPE" in text, f"/metrics: {response.status}")


async def api_export(http: aiohttp.ClientSession, base: str, seen: dict[str, str]) -> None:
    """A consultation through the API (one round: the final answer), exported both ways."""
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    body = {"message": "Compare two phones"}
    async with http.post(f"{base}/api/chat", json=body, headers=auth) as response:
        reply: dict[str, Any] = await response.json()
        check(response.status == 200, f"/api/chat: {response.status} {reply}")
    check(reply["isComplete"], f"/api/chat did not finish: {reply}")
    check("Reply to: Compare two phones" in reply["content"], f"/api/chat: {reply}")
    seen["session"] = reply["sessionId"]
    export = f"{base}/api/sessions/{reply['sessionId']}/export"
    async with http.get(export, params={"format": "docx"}, headers=auth) as response:
        data = await response.read()
        check(response.status == 200, f"export as DOCX: {response.status} {data[:300]!r}")
    paragraphs = docx_paragraphs(data)
    check(any("Compare two phones" in p for p in paragraphs), f"the DOCX: {paragraphs}")
    async with http.get(export, params={"format": "md"}, headers=auth) as response:
        text = await response.text()
        check(response.status == 200 and "Compare two phones" in text, f"export as md: {text}")


async def openai_completion(http: aiohttp.ClientSession, base: str) -> None:
    """The OpenAI-compatible endpoint: the model list, then a one-round consultation."""
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    async with http.get(f"{base}/v1/models", headers=auth) as response:
        models: dict[str, Any] = await response.json()
        check(response.status == 200, f"/v1/models: {response.status} {models}")
    check(models["data"][0]["id"] == "consultation", f"/v1/models: {models}")
    message = {"role": "user", "content": "Compare two laptops"}
    body = {"model": "consultation-1", "messages": [message]}
    async with http.post(f"{base}/v1/chat/completions", json=body, headers=auth) as response:
        reply: dict[str, Any] = await response.json()
        check(response.status == 200, f"/v1/chat/completions: {response.status} {reply}")
    content = reply["choices"][0]["message"]["content"]
    check("Compare two laptops" in content, f"/v1/chat/completions: {reply}")


async def web_console(http: aiohttp.ClientSession, base: str, seen: dict[str, str]) -> None:
    """Signing in with ADMIN_TOKEN, then each page (and the API consultation's own)."""
    async with http.get(f"{base}/admin/login") as response:
        form = await response.text()
        check(response.status == 200, f"/admin/login: {response.status}")
    login = re.search(r'name="login" value="([^"]+)"', form)
    check(login, "the sign-in form has no login field")
    assert login is not None
    fields = {"login": login.group(1), "token": ADMIN_TOKEN}
    async with http.post(f"{base}/admin/login", data=fields, allow_redirects=False) as response:
        check(response.status == 303, f"signing in: {response.status} {await response.text()}")
    session = seen.get("session")
    pages = [*ADMIN_PAGES, *([f"/admin/consultations/{session}"] if session else [])]
    for page in pages:
        async with http.get(f"{base}{page}", headers={"Accept": "text/html"}) as response:
            html = await response.text()
            check(response.status == 200, f"{page}: {response.status}")
            check("</html>" in html, f"{page} is not a whole page")
    check(not session or "Compare two phones" in html, "the consultation's page lacks its request")
    print(f"web console: {len(pages)} pages")


async def bot(work: Path, model: FakeModel, telegram: FakeTelegram) -> None:
    """The bot process with its HTTP server; every check on it, then SIGTERM."""
    port = free_port()
    env = environment(
        work,
        model,
        DB_PATH=str(work / "bot.sqlite3"),
        TELEGRAM_BOT_TOKEN=BOT_TOKEN,
        TELEGRAM_API_BASE_URL=telegram.base_url,
        API_ENABLED="true",
        API_HOST="127.0.0.1",
        API_PORT=str(port),
        API_TOKEN=API_TOKEN,
        ADMIN_TOKEN=ADMIN_TOKEN,
    )
    log = (work / "bot.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        command(), "run", cwd=work, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:

        async def listening() -> bool:
            check(process.returncode is None, f"the bot exited {process.returncode}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.close()
            return "getUpdates" in telegram.methods

        await until("the bot polling and its HTTP server listening", listening)
        seen: dict[str, str] = {}
        async with client() as http:
            await run_steps(
                ("/start in 14 languages", telegram_start(telegram)),
                ("a Telegram consultation and /export", telegram_export(telegram)),
                ("/healthz and /metrics", health_and_metrics(http, base)),
                ("an API consultation and its export", api_export(http, base, seen)),
                ("an OpenAI-compatible completion", openai_completion(http, base)),
                ("the web console's pages", web_console(http, base, seen)),
            )
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), WAIT)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()
        output = (work / "bot.log").read_text(errors="replace")
        if "Traceback" in output or process.returncode != 0:
            print(output[-4000:])
    check(process.returncode == 0, f"the bot's exit code after SIGTERM: {process.returncode}")
    check("Traceback" not in output, "the bot logged a traceback")


FAILURES: list[str] = []
PASSED: list[str] = []


async def run_steps(*steps: tuple[str, Awaitable[None]]) -> None:
    """Each step in turn; a failed one is named and the next runs."""
    for name, step in steps:
        print(f"\n== {name}", flush=True)
        try:
            await step
        except (Failed, TimeoutError, OSError, aiohttp.ClientError, KeyError, ValueError) as exc:
            FAILURES.append(f"{name}: {exc or type(exc).__name__}")
            print(f"FAILED: {exc or type(exc).__name__}", flush=True)
        else:
            PASSED.append(name)
            print("ok", flush=True)


async def smoke(work: Path) -> None:
    model, telegram = FakeModel(), FakeTelegram()
    await model.served.start()
    await telegram.served.start()
    try:
        print("== the installed product")
        installed_not_checkout()
        await run_steps(
            ("a console consultation, documents and /export", console(work, model)),
            ("the bot and its HTTP server", bot(work, model, telegram)),
        )
    finally:
        await model.served.stop()
        await telegram.served.stop()


def main() -> int:
    try:
        with tempfile.TemporaryDirectory(prefix="smoke-") as folder:
            asyncio.run(smoke(Path(folder)))
    except Failed as exc:
        FAILURES.append(str(exc))
    except Exception as exc:  # a failure no check names: its traceback, then the verdict
        traceback.print_exc()
        FAILURES.append(f"{type(exc).__name__}: {exc}")
    for failure in FAILURES:
        print(f"SMOKE FAILED: {failure}", file=sys.stderr)
    print(f"\nsmoke: {len(PASSED)} passed, {len(FAILURES)} failed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
