"""Photos in Telegram end to end: with LLM_VISION the photo (the largest size within the
image limit) goes to the model as an image part next to the caption; without it a photo
gets the "text only" answer (a caption is answered alone, as before); a model that
refuses images answers anyway and the user is told it did not see the photo."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage
from telegram import Message

from bot.transport.files import file_of
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer, image_parts
from tests.bot_harness import RunningBot, ask_private, conversation, started_bot

USER = 703


def jpeg(side: int, color: str = "red") -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (side, side), color).save(buffer, format="JPEG")
    return buffer.getvalue()


def data_url(data: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def last_user(request: dict[str, Any]) -> dict[str, Any]:
    return [m for m in request["messages"] if m["role"] == "user"][-1]


def file_calls(bot: RunningBot) -> list[str]:
    return [c.method for c in bot.api.calls if c.method in ("getFile", "download")]


@pytest.fixture
async def vision_bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningBot]:
    """A bot whose model sees images; images up to 5,000 bytes."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, llm_vision=True, max_image_bytes=5000
    ) as running:
        yield running


async def test_a_photo_goes_to_the_model_as_an_image_part(vision_bot: RunningBot) -> None:
    """The largest size within the limit is sent; the next round sees the placeholder."""
    small, medium = jpeg(8), jpeg(64, "blue")
    assert len(medium) <= 5000
    media = vision_bot.api.photo(small, medium, (b"far too large", 2_000_000))
    [reply] = await ask_private(vision_bot, USER, None, media=media, caption="Is this mould?")
    assert reply == "Reply to: [photo]\n\nIs this mould?\n\nRound 1 of 3"
    message = last_user(vision_bot.model.requests[0])
    assert message["content"][0] == {"type": "text", "text": "[photo]\n\nIs this mould?"}
    assert [p["image_url"]["url"] for p in image_parts(message)] == [data_url(medium)]
    await ask_private(vision_bot, USER, "It is on the wall")
    assert conversation(vision_bot.model.requests[1])[0] == "[photo]\n\nIs this mould?"
    assert not any(image_parts(m) for m in vision_bot.model.requests[1]["messages"])


async def test_an_image_sent_as_a_file_is_a_photo(vision_bot: RunningBot) -> None:
    png = io.BytesIO()
    PILImage.new("RGB", (10, 10), "green").save(png, format="PNG")
    media = vision_bot.api.document(png.getvalue(), "chart.png", "image/png")
    await ask_private(vision_bot, USER, None, media=media)
    message = last_user(vision_bot.model.requests[0])
    assert [p["image_url"]["url"] for p in image_parts(message)] == [
        data_url(png.getvalue(), "image/png")
    ]


async def test_a_photo_too_large_in_every_size_is_refused_unfetched(
    vision_bot: RunningBot,
) -> None:
    media = vision_bot.api.photo((b"a", 6000), (b"b", 9000))
    [text] = await ask_private(vision_bot, USER, None, media=media)
    assert text == "This file is too large: I can take files up to 5 KB."
    assert file_calls(vision_bot) == [] and vision_bot.model.requests == []


async def test_a_model_that_refuses_images_answers_and_the_user_is_told(
    vision_bot: RunningBot,
) -> None:
    vision_bot.model.reject_images = "openai"
    media = vision_bot.api.photo(jpeg(16))
    [reply] = await ask_private(vision_bot, USER, None, media=media, caption="What plant is it?")
    assert reply.startswith("Reply to: ")
    assert reply.endswith(
        "Round 1 of 3\n(I couldn't see your photo: this model reads text only. Describe it in "
        "words if it matters.)"
    )
    assert not any(image_parts(m) for m in vision_bot.model.requests[-1]["messages"])


async def test_without_vision_a_photo_alone_gets_the_text_only_answer(bot: RunningBot) -> None:
    [text] = await ask_private(bot, USER, None, media=bot.api.photo(jpeg(16)))
    assert text.startswith("I can only read text.")
    assert file_calls(bot) == [] and bot.model.requests == []


async def test_without_vision_a_captioned_photo_is_answered_from_its_caption(
    bot: RunningBot,
) -> None:
    media = bot.api.photo(jpeg(16))
    [reply] = await ask_private(bot, USER, None, media=media, caption="Is this plant healthy?")
    assert reply == "Reply to: Is this plant healthy?\n\nRound 1 of 3"
    assert file_calls(bot) == []


def test_the_largest_photo_size_within_the_limit_is_chosen(bot_api: FakeBotApi) -> None:
    update = bot_api.text_message(
        1, None, user_id=1, media=bot_api.photo((b"s", 100), (b"m", 900), (b"l", 5000))
    )
    message = Message.de_json(update["message"], None)
    sizes = {size.file_size: size.file_id for size in message.photo}
    for limit, expected in ((None, 5000), (5000, 5000), (4999, 900), (900, 900), (50, 100)):
        found = file_of(message, max_image_bytes=limit)
        assert found is not None and found.kind == "photo" and found.name == "photo.jpg"
        assert found.file_id == sizes[expected], limit
