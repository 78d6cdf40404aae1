"""`AiohttpRequest` keeps `HTTPXRequest`'s contract: forms, files, timeouts and errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from bot.transport.telegram_http import AiohttpRequest, BodyTooLarge
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.bot_files import UNANNOUNCED


class _Echo:
    """A server that answers each request with what it received."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.delay = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        if request.content_type == "application/json":
            fields = await request.json()
        else:
            fields = {
                k: (v.filename, v.file.read()) if isinstance(v, web.FileField) else v
                for k, v in (await request.post()).items()
            }
        self.received.append({"type": request.content_type, "fields": fields})
        await asyncio.sleep(self.delay)
        return web.json_response({"ok": True, "result": True}, status=200)


@pytest.fixture
async def echo() -> AsyncIterator[tuple[_Echo, str]]:
    """The echo server and its URL."""
    server = _Echo()
    app = web.Application()
    app.router.add_post("/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield server, f"http://127.0.0.1:{port}/method"
    finally:
        await runner.cleanup()


def _data(**params: Any) -> RequestData:
    return RequestData([RequestParameter.from_input(k, v) for k, v in params.items()])


async def test_parameters_go_as_a_json_object_of_ptbs_values(echo: tuple[_Echo, str]) -> None:
    """Strings go raw and other values JSON-encoded (as PTB encodes a form's), in one JSON
    object: what `RequestData.json_payload` sends, and the Bot API reads."""
    server, url = echo
    async with AiohttpRequest() as request:
        status, body = await request.do_request(
            url, "POST", _data(chat_id=5, text="héllo & bye", entities=[{"type": "bold"}])
        )
    assert status == 200 and b'"ok": true' in body
    [got] = server.received
    assert got["type"] == "application/json"
    assert got["fields"] == {
        "chat_id": "5",
        "text": "héllo & bye",
        "entities": '[{"type": "bold"}]',
    }


async def test_a_file_goes_as_multipart_with_the_other_fields(echo: tuple[_Echo, str]) -> None:
    """An attached file switches to multipart and keeps the plain fields beside it."""
    server, url = echo
    document = InputFile(b"file body", filename="notes.txt")
    async with AiohttpRequest() as request:
        await request.do_request(url, "POST", _data(chat_id=5, document=document))
    [got] = server.received
    assert got["type"] == "multipart/form-data"
    assert got["fields"]["chat_id"] == "5"
    assert got["fields"]["document"] == ("notes.txt", b"file body")


async def test_a_file_name_in_any_script_goes_as_written(echo: tuple[_Echo, str]) -> None:
    """A Cyrillic file name with spaces reaches the server as written (UTF-8, as httpx
    sends it), not percent-encoded: Telegram would show the encoding as the name."""
    server, url = echo
    document = InputFile(b"body", filename="Отчёт по базе.docx")
    async with AiohttpRequest() as request:
        await request.do_request(url, "POST", _data(chat_id=5, document=document))
    [got] = server.received
    assert got["fields"]["document"] == ("Отчёт по базе.docx", b"body")


async def test_a_slow_answer_raises_timed_out(echo: tuple[_Echo, str]) -> None:
    """A server slower than the read timeout gives PTB's `TimedOut`."""
    server, url = echo
    server.delay = 1.0
    async with AiohttpRequest(read_timeout=0.1, write_timeout=0.0) as request:
        with pytest.raises(TimedOut):
            await request.do_request(url, "POST", _data(chat_id=1))


async def test_a_refused_connection_raises_network_error() -> None:
    """Nothing listening gives PTB's `NetworkError`, not an aiohttp exception."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with AiohttpRequest() as request:
        with pytest.raises(NetworkError):
            await request.do_request(f"http://127.0.0.1:{port}/x", "POST", _data(chat_id=1))


async def test_a_bot_works_over_it(bot_api: FakeBotApi) -> None:
    """A real `Bot` built on it sends messages and long-polls the fake Bot API."""
    request = AiohttpRequest()
    updates = AiohttpRequest(pool_size=1)
    async with Bot(
        TOKEN, base_url=bot_api.base_url, request=request, get_updates_request=updates
    ) as bot:
        message = await bot.send_message(7, "hi")
        bot_api.push_update(bot_api.text_message(7, "question", user_id=7))
        [update] = await bot.get_updates(timeout=1)
    assert message.text == "hi"
    assert update.message is not None and update.message.text == "question"


async def test_a_fetch_reads_no_more_than_its_limit_plus_one_byte(bot_api: FakeBotApi) -> None:
    """A body without a Content-Length is read only to the limit plus one byte; one whose
    Content-Length is over the limit is refused unread; one within it comes back whole."""
    unannounced = bot_api.register_file(b"x" * 1_000_000, size=UNANNOUNCED)
    announced = bot_api.register_file(b"y" * 300_000)
    small = bot_api.register_file(b"z" * 70_000, size=UNANNOUNCED)
    request = AiohttpRequest()
    await request.initialize()
    try:
        base = f"{bot_api.file_base_url}{TOKEN}/"
        with pytest.raises(BodyTooLarge) as streamed:
            await request.fetch(base + unannounced.path, max_bytes=100_000)
        with pytest.raises(BodyTooLarge) as said:
            await request.fetch(base + announced.path, max_bytes=100_000)
        whole = await request.fetch(base + small.path, max_bytes=100_000)
        with pytest.raises(NetworkError, match="HTTP 404"):
            await request.fetch(base + "documents/missing", max_bytes=100_000)
    finally:
        await request.shutdown()
    assert (streamed.value.read, streamed.value.announced) == (100_001, None)
    assert (said.value.read, said.value.announced) == (0, 300_000)
    assert whole == small.data
