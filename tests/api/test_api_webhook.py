"""The Telegram webhook on the API server, with the real PTB Application and the fake Bot API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from telegram import Update

from api.app import build_web_app, start_web_server
from api.webhook import SECRET_HEADER, TelegramApp, UpdateSink
from app.runtime import open_runtime
from app.settings import Settings
from bot.app import build_application
from core.domain.errors import StoreUnavailable
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.document_labels import DOCUMENT_LANGUAGES
from tests.api_harness import ApiTestServer, api_settings, running_api

SECRET = "webhook-Secret_123"
URL = "https://bot.example.com/telegram/webhook"


def settings_for(
    tmp_path: Path, bot_api: FakeBotApi, model: FakeModelServer, **more: Any
) -> Settings:
    return api_settings(
        tmp_path / "bot.sqlite3", model.base_url, telegram_bot_token=TOKEN,
        telegram_api_base_url=bot_api.base_url, webhook_url=URL, webhook_secret=SECRET,
        user_rate_limit_per_minute=0, **more,
    )  # fmt: skip


async def test_webhook_with_the_secret_reaches_the_bot_and_without_it_nothing_does(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A missing secret is 401, a wrong one 403 (nothing queued); the right one gets a reply."""
    settings = settings_for(tmp_path, bot_api, model_server)
    model_server.enqueue("What is your budget?")
    async with running_api(settings, telegram=telegram_app) as api:
        application = api.telegram
        assert application is not None and application.updater is None
        async with application:
            await application.start()
            try:
                update = bot_api.text_message(42, "I want to buy a laptop", user_id=42)
                path = settings.webhook_path
                for headers, status in (
                    ({}, 401),
                    ({"X-Telegram-Bot-Api-Secret-Token": "wrong"}, 403),
                    ({"X-Telegram-Bot-Api-Secret-Token": SECRET[:-1]}, 403),
                ):
                    response = await api.client.post(path, json=update, headers=headers)
                    assert response.status == status
                assert application.update_queue.qsize() == 0
                assert model_server.requests == [] and bot_api.calls_of("sendMessage") == []

                response = await api.client.post(
                    path, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
                )
                assert response.status == 200
                sent = await bot_api.wait_for("sendMessage", timeout=10)
                assert "What is your budget?" in sent.params["text"]
                assert sent.params["chat_id"] == 42
                first = model_server.requests[0]["messages"]
                assert first[-1] == {"role": "user", "content": "I want to buy a laptop"}
            finally:
                await application.stop()


async def test_a_webhook_body_that_is_not_an_update_is_refused(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Garbage with the right secret is a 400, not a crash."""
    settings = settings_for(tmp_path, bot_api, model_server)
    async with running_api(settings, telegram=telegram_app) as api:
        response = await api.client.post(
            settings.webhook_path, data=b"{not json",
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        )  # fmt: skip
        assert response.status == 400


async def test_a_webhook_body_nested_past_the_parser_s_depth_is_refused_without_a_crash(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """JSON nested deeper than the parsers recurse (an array, or a chain of replies): 400
    and a warning, never a 500 with a traceback."""
    settings = settings_for(tmp_path, bot_api, model_server)
    message = bot_api.text_message(42, "Hello", user_id=42)["message"]
    chain: dict[str, Any] = message
    for _ in range(600):
        chain = message | {"reply_to_message": chain}
    bodies = [
        b'{"update_id": 5, "message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        json.dumps({"update_id": bot_api.next_update_id(), "message": chain}).encode(),
    ]
    async with running_api(settings, telegram=telegram_app) as api:
        for body in bodies:
            response = await api.client.post(
                settings.webhook_path, data=body, headers={SECRET_HEADER: SECRET}
            )
            assert response.status == 400, await response.text()
    assert not [r for r in caplog.records if r.levelname in {"ERROR", "CRITICAL"}]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_start_web_server_serves_and_registers_the_webhook(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The server listens on API_HOST:API_PORT and calls setWebhook with the secret, asking
    Telegram for no more connections at once than one address may hold."""
    port = free_port()
    settings = settings_for(
        tmp_path,
        bot_api,
        model_server,
        api_host="127.0.0.1",
        api_port=port,
        http_max_connections_per_address=12,
    )
    async with running_api(settings) as api:
        application = telegram_app(settings, api.engine)
        async with application:
            runner = await start_web_server(
                settings.api_config(),
                api.engine,
                document_languages=DOCUMENT_LANGUAGES,
                store=api.store,
                metrics=api.metrics,
                telegram_application=application,
            )
            try:
                (call,) = bot_api.calls_of("setWebhook")
                assert call.params["url"] == URL and call.params["secret_token"] == SECRET
                assert "message" in call.params["allowed_updates"]
                assert int(call.params["max_connections"]) == 12
                async with aiohttp.ClientSession() as http:
                    response = await http.get(f"http://127.0.0.1:{port}/healthz")
                    assert response.status == 200
            finally:
                await runner.cleanup()


def telegram_app(settings: Settings, service: Any) -> TelegramApp:
    return build_application(settings.bot_config(), service)


async def test_a_redelivered_update_is_queued_once_even_after_a_restart(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The same update_id posted three times (and once more after a restart) is answered
    200 every time and queued once; a new update_id is queued again."""
    settings = settings_for(tmp_path, bot_api, model_server)
    update = bot_api.text_message(42, "I want to buy a laptop", user_id=42)
    headers = {SECRET_HEADER: SECRET}
    async with running_api(settings, telegram=telegram_app) as api:
        assert api.telegram is not None
        for _ in range(3):
            response = await api.client.post(settings.webhook_path, json=update, headers=headers)
            assert response.status == 200
        assert api.telegram.update_queue.qsize() == 1
    async with running_api(settings, telegram=telegram_app) as api:
        assert api.telegram is not None
        response = await api.client.post(settings.webhook_path, json=update, headers=headers)
        assert response.status == 200
        assert api.telegram.update_queue.qsize() == 0
        following = bot_api.text_message(42, "Under 1000 euros", user_id=42)
        await api.client.post(settings.webhook_path, json=following, headers=headers)
        assert api.telegram.update_queue.qsize() == 1


async def test_an_update_the_store_cannot_record_is_refused_for_a_later_redelivery(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With the database file gone the update is not queued and Telegram is told 503."""
    settings = settings_for(tmp_path, bot_api, model_server)
    async with running_api(settings, telegram=telegram_app) as api:
        assert api.telegram is not None
        settings.db_path.unlink()
        response = await api.client.post(
            settings.webhook_path,
            json=bot_api.text_message(42, "Hello", user_id=42),
            headers={SECRET_HEADER: SECRET},
        )
        assert response.status == 503
        assert (await response.json())["code"] == "STORE_UNAVAILABLE"
        assert api.telegram.update_queue.qsize() == 0


async def test_a_secret_header_that_is_not_utf8_is_forbidden_without_a_traceback(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Raw non-UTF-8 bytes in the secret header are a wrong secret: 403 JSON, nothing logged
    as an error, nothing queued."""
    settings = settings_for(tmp_path, bot_api, model_server)
    body = json.dumps(bot_api.text_message(42, "Hello", user_id=42)).encode()
    async with running_api(settings, telegram=telegram_app) as api:
        assert api.telegram is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", api.client.port)
        writer.write(
            f"POST {settings.webhook_path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + SECRET_HEADER.encode()
            + b": \xff\xfe"
            + SECRET.encode()
            + b"\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        response = await reader.read()
        writer.close()
        await writer.wait_closed()
        head, _, payload = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 403"), response
        assert json.loads(payload)["code"] == "FORBIDDEN"
        assert api.telegram.update_queue.qsize() == 0
    assert not [r for r in caplog.records if r.levelname in {"ERROR", "CRITICAL"}]


@contextlib.asynccontextmanager
async def webhook_with_sink(
    settings: Settings, sink: UpdateSink
) -> AsyncIterator[tuple[TestClient, TelegramApp]]:
    """The production runtime and web app with an update sink (the PostgreSQL inbox's place)."""
    async with open_runtime(settings, background=False) as runtime:
        application = telegram_app(settings, runtime.engine)
        app = build_web_app(
            settings.api_config(),
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            telegram_application=application,
            metrics=runtime.metrics,
            update_sink=sink,
        )
        client = TestClient(ApiTestServer(app, host="127.0.0.1"))
        await client.start_server()
        try:
            yield client, application
        finally:
            await client.close()


async def test_with_a_sink_the_200_waits_until_the_sink_has_the_update(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The update goes to the sink, not to the application's queue, and Telegram hears 200
    only once the sink returned (the update is committed): a crash before that makes
    Telegram deliver it again."""
    settings = settings_for(tmp_path, bot_api, model_server)
    received: list[dict[str, Any]] = []
    entered = asyncio.Event()
    release = asyncio.Event()

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        assert parsed.update_id == update["update_id"]
        entered.set()
        await release.wait()
        received.append(update)
        return True

    update = bot_api.text_message(42, "Hello", user_id=42)
    async with webhook_with_sink(settings, sink) as (client, application):
        posting = asyncio.create_task(
            client.post(settings.webhook_path, json=update, headers={SECRET_HEADER: SECRET})
        )
        await asyncio.wait_for(entered.wait(), 10)
        assert not posting.done()
        release.set()
        response = await asyncio.wait_for(posting, 10)
        assert response.status == 200
        assert received == [update]
        assert application.update_queue.qsize() == 0


async def test_with_a_sink_a_redelivery_is_200_and_an_unavailable_sink_is_503(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The sink decides what is new; a sink that cannot commit makes Telegram retry later."""
    settings = settings_for(tmp_path, bot_api, model_server)
    answers: list[bool | Exception] = [False, StoreUnavailable("database gone")]

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        assert parsed.update_id == update["update_id"]
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    update = bot_api.text_message(42, "Hello", user_id=42)
    headers = {SECRET_HEADER: SECRET}
    async with webhook_with_sink(settings, sink) as (client, application):
        response = await client.post(settings.webhook_path, json=update, headers=headers)
        assert response.status == 200
        response = await client.post(settings.webhook_path, json=update, headers=headers)
        assert response.status == 503
        assert (await response.json())["code"] == "STORE_UNAVAILABLE"
        response = await client.post(settings.webhook_path, data=b"[1]", headers=headers)
        assert response.status == 400
        assert answers == [] and application.update_queue.qsize() == 0


def forged_updates(bot_api: FakeBotApi) -> list[dict[str, Any]]:
    """Updates with the right secret that no worker could handle: Telegram would resend
    them forever if they were refused."""
    good = bot_api.text_message(42, "Hello", user_id=42)
    message = good["message"]
    chatless = {k: v for k, v in message.items() if k != "chat"}
    return [
        {"update_id": "abc", "message": message},
        {"update_id": 2**80, "message": message},
        {"update_id": -(2**80), "message": message},
        {"update_id": 12.5, "message": message},
        {"update_id": True, "message": message},
        {"update_id": bot_api.next_update_id(), "message": chatless},
        {"update_id": bot_api.next_update_id(), "edited_message": chatless},
        # A field the bot reads, of another JSON type than Telegram sends.
        {"update_id": bot_api.next_update_id(), "message": message | {"text": 12345}},
        {"update_id": bot_api.next_update_id(), "message": message | {"text": ["a"]}},
        {"update_id": bot_api.next_update_id(), "message": message | {"caption": {"a": 1}}},
        {"update_id": bot_api.next_update_id(), "message": message | {"message_thread_id": "x"}},
        {"update_id": bot_api.next_update_id(), "message": message | {"message_thread_id": 2**70}},
        {
            "update_id": bot_api.next_update_id(),
            "message": message | {"from": message["from"] | {"id": "42"}},
        },
        {
            "update_id": bot_api.next_update_id(),
            "message": message | {"reply_to_message": message | {"text": 7}},
        },
        {
            "update_id": bot_api.next_update_id(),
            "callback_query": {
                "id": "1",
                "from": message["from"],
                "chat_instance": "c",
                "data": {"a": 1},
                "message": message,
            },
        },
    ]


async def test_a_forged_update_with_the_secret_is_dropped_with_200(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A non-integer or huge `update_id`, or a message without a chat: 200 (so Telegram does
    not resend it), logged, nothing queued; the next good update is handled."""
    settings = settings_for(tmp_path, bot_api, model_server)
    model_server.enqueue("What is your budget?")
    headers = {SECRET_HEADER: SECRET}
    async with running_api(settings, telegram=telegram_app) as api:
        application = api.telegram
        assert application is not None
        async with application:
            await application.start()
            try:
                for update in forged_updates(bot_api):
                    response = await api.client.post(
                        settings.webhook_path, json=update, headers=headers
                    )
                    assert response.status == 200, (update, await response.text())
                    assert application.update_queue.qsize() == 0
                good = bot_api.text_message(42, "I want to buy a laptop", user_id=42)
                response = await api.client.post(settings.webhook_path, json=good, headers=headers)
                assert response.status == 200
                sent = await bot_api.wait_for("sendMessage", timeout=10)
                assert "What is your budget?" in sent.params["text"]
            finally:
                await application.stop()
    dropped = [r for r in caplog.records if "not an update we can handle" in r.getMessage()]
    assert len(dropped) == len(forged_updates(bot_api))
    assert not [r for r in caplog.records if r.levelname in {"ERROR", "CRITICAL"}]


async def test_with_a_sink_a_forged_update_never_reaches_it(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The inbox (the sink) only ever gets updates it can store and handle."""
    settings = settings_for(tmp_path, bot_api, model_server)
    received: list[dict[str, Any]] = []

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        received.append(update)
        return True

    async with webhook_with_sink(settings, sink) as (client, _):
        for update in forged_updates(bot_api):
            response = await client.post(
                settings.webhook_path, json=update, headers={SECRET_HEADER: SECRET}
            )
            assert response.status == 200
    assert received == []


async def test_a_lone_surrogate_in_a_webhook_body_is_refused_before_the_sink(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """`\\ud800` is valid JSON but no Unicode text: no store can keep it (PostgreSQL's
    driver cannot encode it), so the update is a 400, as the API's bodies are, and never
    reaches the inbox."""
    settings = settings_for(tmp_path, bot_api, model_server)
    received: list[dict[str, Any]] = []

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        received.append(update)
        return True

    message = bot_api.text_message(42, "Hello", user_id=42)["message"]
    body = json.dumps({"update_id": bot_api.next_update_id(), "message": message})
    bodies = [body.replace("Hello", "a \\ud800 b"), body.replace("Hello", "\\udc00")]
    async with webhook_with_sink(settings, sink) as (client, _):
        for text in bodies:
            response = await client.post(
                settings.webhook_path, data=text.encode(), headers={SECRET_HEADER: SECRET}
            )
            assert response.status == 400, await response.text()
    assert received == []
