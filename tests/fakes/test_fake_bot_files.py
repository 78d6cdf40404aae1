"""The fake Bot API hands out files the way Telegram does, to the real python-telegram-bot:
getFile, then a download from the file URL the bot's configuration points at."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import Bot, Update
from telegram.error import BadRequest

from app.settings import load_settings
from bot.transport.config import BotConfig
from fakes.bot_api import TOKEN, FakeBotApi


@pytest.fixture
async def file_bot(bot_api: FakeBotApi) -> AsyncIterator[Bot]:
    """A bare PTB Bot whose file URL is the one `BotConfig` derives from the API URL."""
    config = BotConfig(token=TOKEN, api_base_url=bot_api.base_url)
    async with Bot(TOKEN, base_url=bot_api.base_url, base_file_url=config.file_base_url) as bot:
        yield bot


async def test_get_file_then_download(bot_api: FakeBotApi, file_bot: Bot) -> None:
    """getFile names a path under the file URL; downloading it returns the registered bytes."""
    voice = bot_api.voice(b"OggS voice bytes")["voice"]
    remote = await file_bot.get_file(voice["file_id"])
    assert remote.file_size == len(b"OggS voice bytes")
    assert remote.file_path == f"{bot_api.file_base_url}{TOKEN}/voice/file_1.oga"
    assert await remote.download_as_bytearray() == bytearray(b"OggS voice bytes")
    assert [c.method for c in bot_api.calls[-2:]] == ["getFile", "download"]
    assert bot_api.calls[-1].params == {"file_path": "voice/file_1.oga"}


async def test_a_file_over_20_mb_is_too_big_for_get_file(
    bot_api: FakeBotApi, file_bot: Bot
) -> None:
    """Like Telegram: getFile refuses files over 20 MB, so nothing can be downloaded."""
    document = bot_api.document(b"%PDF-", "big.pdf", "application/pdf", size=25_000_000)
    with pytest.raises(BadRequest, match=r"(?i)file is too big"):
        await file_bot.get_file(document["document"]["file_id"])
    with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
        await file_bot.get_file("no-such-file")
    assert bot_api.calls_of("download") == []


async def test_a_failed_download_is_an_error(bot_api: FakeBotApi, file_bot: Bot) -> None:
    """An injected failure of the download reaches PTB as an error status."""
    remote = await file_bot.get_file(bot_api.document(b"hello", "a.txt")["document"]["file_id"])
    bot_api.fail_next("download", status=502, description="Bad Gateway")
    with pytest.raises(Exception, match="Bad Gateway"):
        await remote.download_as_bytearray()
    assert await remote.download_as_bytearray() == bytearray(b"hello")


def test_builders_make_messages_ptb_reads(bot_api: FakeBotApi) -> None:
    """Voice, audio, video note, document and photo sizes, with a caption and its entities."""
    caption = "@consult_bot what is it?"
    entities = [{"type": "mention", "offset": 0, "length": 12}]
    media = [
        bot_api.voice(b"v"),
        bot_api.audio(b"a", name="talk.m4a", mime="audio/mp4"),
        bot_api.video_note(b"n"),
        bot_api.document(b"d", "notes.txt", "text/plain"),
        bot_api.photo(b"s", b"m", b"large"),
    ]
    messages = []
    for fields in media:
        update = bot_api.text_message(
            -5, None, user_id=1, chat_type="group", media=fields, caption=caption, entities=entities
        )
        message = Update.de_json(update, None).message
        assert message is not None and message.text is None and message.caption == caption
        assert list(message.parse_caption_entities().values()) == ["@consult_bot"]
        messages.append(message)
    voice, audio, note, document, photo = messages
    assert voice.voice is not None and voice.voice.mime_type == "audio/ogg"
    assert audio.audio is not None and audio.audio.file_name == "talk.m4a"
    assert note.video_note is not None and note.video_note.length == 240
    assert document.document is not None and document.document.file_size == 1
    assert [size.file_size for size in photo.photo] == [1, 1, 5]
    assert [size.width for size in photo.photo] == [90, 180, 270]


def test_file_url_from_the_settings(tmp_path: Path) -> None:
    """TELEGRAM_FILE_BASE_URL wins; else the API URL's trailing /bot becomes /file/bot."""
    base = {"telegram_bot_token": TOKEN, "openai_api_key": "k", "_env_file": None}
    derived = load_settings(**base, telegram_api_base_url="http://botapi.local:8081/bot")
    assert derived.bot_config().file_base_url == "http://botapi.local:8081/file/bot"
    default = load_settings(**base)
    assert default.bot_config().file_base_url == "https://api.telegram.org/file/bot"
    explicit = load_settings(**base, telegram_file_base_url="http://files.local/file/bot")
    assert explicit.bot_config().file_base_url == "http://files.local/file/bot"
