"""One update, one `Incoming`: what every handler reads of a message, command or button."""

from __future__ import annotations

from typing import Any

from telegram import Update

from bot.transport.chat import Incoming, incoming_of
from bot.transport.target import Target
from fakes.bot_updates import UpdateBuilder

BOT_ID, USERNAME = 999, "consult_bot"
GROUP, ALICE = -1001234, 11


def incoming(update: dict[str, Any]) -> Incoming | None:
    return incoming_of(Update.de_json(update, None), USERNAME, BOT_ID)


def test_a_private_message_is_addressed_and_answered_in_place() -> None:
    """Private chats: no author prefix, no reply-to, the user's language, the text as written."""
    build = UpdateBuilder()
    got = incoming(build.text_message(501, "Hello @consult_bot", user_id=501, language_code="ru"))
    assert got is not None
    assert (got.chat_id, got.thread_id, got.user_id, got.author) == (501, None, 501, None)
    assert (got.language, got.text, got.is_group, got.addressed) == (
        "ru",
        "Hello @consult_bot",
        False,
        True,
    )
    assert got.key == "tg:501" and got.target == Target(501, None, None, private=True)


def test_a_group_mention_in_a_topic_is_stripped_and_answered_as_a_reply() -> None:
    """Groups: the member is named, the mention removed, the reply threaded in the topic."""
    build = UpdateBuilder()
    text = "@consult_bot plan a trip"
    update = build.text_message(
        GROUP,
        text,
        user_id=ALICE,
        chat_type="supergroup",
        message_thread_id=7,
        is_topic_message=True,
        entities=[{"type": "mention", "offset": 0, "length": 12}],
    )
    got = incoming(update)
    assert got is not None
    message_id = update["message"]["message_id"]
    assert (got.text, got.author, got.is_group, got.addressed) == (
        "plan a trip",
        "Alice",
        True,
        True,
    )
    assert got.message_id == message_id and got.key == f"tg:{GROUP}:7"
    assert got.target == Target(GROUP, 7, message_id, private=False)


def test_group_messages_and_commands_for_others_are_not_addressed() -> None:
    """A group message without a mention or reply is not ours, nor is a command naming
    another bot or no bot (it may be another bot's); a command naming this bot is."""
    build = UpdateBuilder()

    def addressed(text: str) -> bool:
        name = "@consult_bot"
        entities = None
        if name in text:
            entities = [{"type": "mention", "offset": text.index(name), "length": len(name)}]
        update = build.text_message(
            GROUP, text, user_id=ALICE, chat_type="supergroup", entities=entities
        )
        got = incoming(update)
        assert got is not None
        return got.addressed

    assert not addressed("nice weather")
    assert not addressed("/start@other_bot")
    assert addressed("/start@Consult_Bot")
    assert not addressed("/start")
    assert addressed("@consult_bot /start")


def test_a_button_press_speaks_for_the_presser_under_the_bot_message() -> None:
    """A button press: the presser's id and language, the pressed message's conversation."""
    build = UpdateBuilder()
    question = build.text_message(GROUP, "/rounds", user_id=ALICE, chat_type="supergroup")
    message_id = question["message"]["message_id"]
    got = incoming(build.callback_query(GROUP, 12, "rounds:5", message_id))
    assert got is not None
    assert (got.user_id, got.text, got.addressed, got.is_group) == (12, "", True, True)
    assert got.target == Target(GROUP, None, message_id, private=False)


def test_an_update_without_a_message_gives_nothing() -> None:
    assert incoming({"update_id": 1}) is None
