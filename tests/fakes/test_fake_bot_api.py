"""The fake Bot API speaks well enough to the real python-telegram-bot for end-to-end tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from telegram import Bot, MessageEntity, Update
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from fakes.bot_api import TOKEN, FakeBotApi, Upload


async def _echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Reply with the same text, in the same forum topic."""
    assert update.effective_message is not None
    await update.effective_message.reply_text(f"echo: {update.effective_message.text}")


@pytest.fixture
async def app(bot_api: FakeBotApi) -> AsyncIterator[Application]:
    """A real PTB Application polling the fake, with an echo handler."""
    application = ApplicationBuilder().token(TOKEN).base_url(bot_api.base_url).build()
    application.add_handler(MessageHandler(filters.TEXT, _echo))
    async with application:
        await application.start()
        assert application.updater is not None
        await application.updater.start_polling(poll_interval=0, timeout=1)
        yield application
        await application.updater.stop()
        await application.stop()


@pytest.fixture
async def bare_bot(bot_api: FakeBotApi) -> AsyncIterator[Bot]:
    """A bare PTB Bot talking to the fake."""
    async with Bot(TOKEN, base_url=bot_api.base_url) as b:
        yield b


async def test_polling_echo_round_trip(bot_api: FakeBotApi, app: Application) -> None:
    """A pushed update reaches the handler and its reply is recorded as a sendMessage."""
    bot_api.push_update(bot_api.text_message(42, "hello", user_id=42))
    call = await bot_api.wait_for("sendMessage")
    assert call.params["chat_id"] == 42
    assert call.params["text"] == "echo: hello"
    assert bot_api.sent_texts(42) == ["echo: hello"]
    assert [c.method for c in bot_api.calls[:2]] == ["getMe", "deleteWebhook"]
    assert app.bot.username == bot_api.username


async def test_updates_are_confirmed_once(bot_api: FakeBotApi, app: Application) -> None:
    """Every update is delivered once, in order: getUpdates honours the offset."""
    for i in range(5):
        bot_api.push_update(bot_api.text_message(7, f"m{i}", user_id=7))
    await bot_api.wait_for("sendMessage", count=5)
    assert sorted(bot_api.sent_texts(7)) == [f"echo: m{i}" for i in range(5)]
    await bot_api.wait_for(lambda c: c.method == "getUpdates" and c.params.get("offset") == 6)


async def test_forum_topic_reply_stays_in_topic(bot_api: FakeBotApi, app: Application) -> None:
    """`message_thread_id` is sent back with the reply and echoed in the returned message."""
    bot_api.push_update(
        bot_api.text_message(
            -100, "hi", user_id=5, chat_type="supergroup", message_thread_id=9,
            is_topic_message=True,
        )
    )  # fmt: skip
    call = await bot_api.wait_for("sendMessage")
    assert call.params["message_thread_id"] == 9
    assert call.result["message_thread_id"] == 9
    assert call.result["chat"]["type"] == "supergroup"


async def test_command_gets_bot_command_entity(bot_api: FakeBotApi) -> None:
    """Command messages carry a `bot_command` entity, so PTB's CommandHandler sees them."""
    update = Update.de_json(bot_api.text_message(1, "/rounds@consult_bot 3", user_id=1), None)
    assert update.message is not None
    assert update.message.parse_entities([MessageEntity.BOT_COMMAND]) == {
        update.message.entities[0]: "/rounds@consult_bot"
    }
    photo = Update.de_json(bot_api.text_message(1, None, user_id=1, photo=True), None)
    assert photo.message is not None and photo.message.photo and photo.message.text is None


async def test_send_edit_and_not_modified(bot_api: FakeBotApi, bare_bot: Bot) -> None:
    """Edits change the stored text; editing to the same text is "message is not modified"."""
    sent = await bare_bot.send_message(3, "draft")
    assert sent.message_id > 0 and sent.text == "draft"
    edited = await bare_bot.edit_message_text("final", chat_id=3, message_id=sent.message_id)
    assert isinstance(edited, type(sent)) and edited.text == "final"
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bare_bot.edit_message_text("final", chat_id=3, message_id=sent.message_id)
    assert bot_api.sent_texts(3) == ["draft", "final"]


async def test_a_document_upload_keeps_its_name_and_bytes(
    bot_api: FakeBotApi, bare_bot: Bot
) -> None:
    """sendDocument (multipart) answers with a document message and records the file's
    name and bytes; an empty file is refused like Telegram refuses it."""
    sent = await bare_bot.send_document(3, b"\x00binary\xff", filename="Отчёт.docx")
    assert sent.document is not None and sent.document.file_name == "Отчёт.docx"
    assert sent.document.file_size == 8
    (call,) = bot_api.calls_of("sendDocument")
    upload = call.params["document"]
    assert isinstance(upload, Upload)
    assert (upload.filename, upload.data) == ("Отчёт.docx", b"\x00binary\xff")
    with pytest.raises(BadRequest, match="non-empty"):
        await bare_bot.send_document(3, b"", filename="empty.md")


async def test_text_validation(bot_api: FakeBotApi, bare_bot: Bot) -> None:
    """Too long, empty, and entities past the end (counted in UTF-16) are 400s like Telegram's."""
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bare_bot.send_message(1, "x" * 4097)
    await bare_bot.send_message(1, "😀" * 2048)  # 4096 UTF-16 units: fits
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bare_bot.send_message(1, "😀" * 2049)
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bare_bot.send_message(1, "  ")
    bad = [MessageEntity(MessageEntity.BOLD, offset=1, length=2)]
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bare_bot.send_message(1, "😀", entities=bad)  # the emoji is 2 units: 1 + 2 > 2
    ok = await bare_bot.send_message(1, "a😀", entities=bad)
    assert ok.entities == tuple(bad)
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bare_bot.send_message(1, "use the <div> tag", parse_mode="HTML")
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bare_bot.send_message(1, "end.", parse_mode="MarkdownV2")


@pytest.mark.parametrize(
    ("status", "description", "error"),
    [
        (429, "Too Many Requests: retry after 3", RetryAfter),
        (403, "Forbidden: bot was blocked by the user", Forbidden),
        (400, "Bad Request: can't parse entities: unsupported", BadRequest),
        (502, "Bad Gateway", NetworkError),
    ],
)
async def test_injected_failures_map_to_ptb_errors(
    bot_api: FakeBotApi, bare_bot: Bot, status: int, description: str, error: type[Exception]
) -> None:
    """Injected failures use real HTTP statuses, so PTB raises its matching exception once."""
    retry_after = 3 if status == 429 else None
    bot_api.fail_next(
        "sendMessage", status=status, description=description, retry_after=retry_after
    )
    with pytest.raises(error) as caught:
        await bare_bot.send_message(1, "hi")
    if isinstance(caught.value, RetryAfter):
        assert caught.value.retry_after.total_seconds() == 3  # type: ignore[union-attr]
    if status == 400:
        assert "can't parse entities" in str(caught.value).lower()
    assert (await bare_bot.send_message(1, "again")).text == "again"
    assert [c.status for c in bot_api.calls_of("sendMessage")] == [status, 200]


async def test_other_methods_answer_like_telegram(bot_api: FakeBotApi, bare_bot: Bot) -> None:
    """Chat members by status, getChat, commands, actions, drafts and unknown methods."""
    bot_api.member_status.update({10: "administrator", 11: "creator"})
    assert (await bare_bot.get_chat_member(-5, 10)).status == "administrator"
    assert (await bare_bot.get_chat_member(-5, 11)).status == "creator"
    assert (await bare_bot.get_chat_member(-5, 12)).status == "member"
    assert (await bare_bot.get_chat(-5)).type == "group"
    assert await bare_bot.set_my_commands([("start", "Start")], language_code="ru")
    assert await bare_bot.send_chat_action(1, "typing")
    assert await bare_bot.send_message_draft(1, 77, "partial answer")
    assert bot_api.calls_of("sendMessageDraft")[0].params["draft_id"] == 77
    sent = await bare_bot.send_message(1, "x")
    assert await bare_bot.delete_message(1, sent.message_id)
    with pytest.raises(BadRequest):
        await bare_bot.delete_message(1, sent.message_id)
    with pytest.raises(TelegramError, match=r"(?i)not found"):
        await bare_bot.do_api_request("noSuchMethod")


async def test_control_endpoints_for_benchmarks(bot_api: FakeBotApi, app: Application) -> None:
    """Over HTTP a load generator pushes updates and reads timestamped calls."""
    base = f"http://{bot_api.host}:{bot_api.port}/_control"
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{base}/updates", json=[{"chat_id": 8, "text": "load", "user_id": 8}]
        ) as resp:
            pushed = await resp.json()
        await bot_api.wait_for("sendMessage")
        async with http.get(f"{base}/calls", params={"method": "sendMessage"}) as resp:
            calls = json.loads(await resp.text())
    (sent,) = calls["calls"]
    assert sent["params"]["text"] == "echo: load"
    assert sent["monotonic"] > pushed[0]["monotonic"]
    assert 0 < calls["next"] <= len(bot_api.calls)


async def test_several_tokens_each_get_their_own_bot_and_others_are_unauthorized() -> None:
    """With a token map, real PTB Bots learn each token's own id and username from getMe,
    and an unknown token gets Telegram's 401 (PTB's InvalidToken); each call names its token."""
    from telegram.error import InvalidToken

    shop, news = "11:shop-token", "22:news-token"
    server = FakeBotApi(tokens={shop: (11, "shop_bot"), news: (22, "news_bot")})
    await server.start()
    try:
        for token, expected in ((shop, (11, "shop_bot")), (news, (22, "news_bot"))):
            async with Bot(token, base_url=server.base_url) as bot:
                assert (bot.id, bot.username) == expected
        with pytest.raises(InvalidToken):
            async with Bot("33:unknown", base_url=server.base_url):
                pass
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{server.base_url}33:unknown/getMe") as response,
        ):
            assert response.status == 401
            assert await response.json() == {
                "ok": False, "error_code": 401, "description": "Unauthorized",
            }  # fmt: skip
        calls = server.calls_of("getMe")
        assert [c.token for c in calls] == [shop, news, "33:unknown", "33:unknown"]
        assert [c.status for c in calls] == [200, 200, 401, 401]
    finally:
        await server.stop()


async def test_each_bot_polls_its_own_updates() -> None:
    """Real PTB Applications of two tokens each get only the updates pushed for their token,
    and pushing without naming a bot is refused when the server serves several."""
    shop, news = "11:shop-token", "22:news-token"
    server = FakeBotApi(tokens={shop: (11, "shop_bot"), news: (22, "news_bot")})
    await server.start()
    try:
        applications = []
        for token in (shop, news):
            application = ApplicationBuilder().token(token).base_url(server.base_url).build()
            application.add_handler(MessageHandler(filters.TEXT, _echo))
            applications.append(application)
        server.push_update(server.text_message(42, "for the shop", user_id=42), token=shop)
        server.push_update(server.text_message(42, "for the news", user_id=42), token=news)
        with pytest.raises(ValueError, match="name the bot"):
            server.push_update(server.text_message(42, "for whom?", user_id=42))
        for application in applications:
            await application.initialize()
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
        await server.wait_for("sendMessage", count=2)
        sent = {c.token: c.params["text"] for c in server.calls_of("sendMessage")}
        assert sent == {shop: "echo: for the shop", news: "echo: for the news"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://{server.host}:{server.port}/_control/updates", json=[]) as answer,
        ):
            assert answer.status == 400
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://{server.host}:{server.port}/_control/calls",
                params={"method": "sendMessage", "token": news},
            ) as answer,
        ):
            calls = (await answer.json())["calls"]
            assert [(c["token"], c["params"]["text"]) for c in calls] == [
                (news, "echo: for the news")
            ]
        for application in applications:
            assert application.updater is not None
            await application.updater.stop()
            await application.stop()
            await application.shutdown()
    finally:
        await server.stop()
