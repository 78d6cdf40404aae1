"""Who wrote what, where: Telegram updates reduced to plain values.

A conversation is a private chat, a group, or one forum topic of a supergroup;
its key is what the consultation store and the ordering lock are keyed on.
In groups the bot only takes messages addressed to it: commands, @mentions and
replies to its own messages (a forum topic's root message is not a reply).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telegram import Chat, Message, MessageEntity, Update, User

GROUP_TYPES = frozenset({Chat.GROUP, Chat.SUPERGROUP})


def chat_key(chat_id: int, thread_id: int | None = None) -> str:
    return f"tg:{chat_id}" if thread_id is None else f"tg:{chat_id}:{thread_id}"


def topic_of(message: Message) -> int | None:
    """The forum topic a message belongs to (None outside forum topics)."""
    if message.is_topic_message and message.message_thread_id is not None:
        return message.message_thread_id
    return None


def conversation_key(update: Update) -> str | None:
    message = update.effective_message
    if message is None:
        chat = update.effective_chat
        return chat_key(chat.id) if chat is not None else None
    return chat_key(message.chat_id, topic_of(message))


def display_name(user: User | None) -> str | None:
    if user is None:
        return None
    return user.full_name or (f"@{user.username}" if user.username else str(user.id))


def language_of(user: User | None) -> str:
    code = (user.language_code or "") if user is not None else ""
    return "ru" if code.lower().startswith(("ru", "uk", "be")) else "en"


def is_group(message: Message) -> bool:
    return message.chat.type in GROUP_TYPES


def mentions_bot(message: Message, *, username: str, bot_id: int) -> bool:
    """An @username mention (any case) or a text mention of the bot, in text or caption."""
    wanted = "@" + username.lower()
    for entities, text in (
        (message.entities, message.text),
        (message.caption_entities, message.caption),
    ):
        if not text:
            continue
        parsed = (
            message.parse_entities()
            if entities is message.entities
            else message.parse_caption_entities()
        )
        for entity, value in parsed.items():
            if entity.type == MessageEntity.MENTION and value.lower() == wanted:
                return True
            if (
                entity.type == MessageEntity.TEXT_MENTION
                and entity.user
                and entity.user.id == bot_id
            ):
                return True
    return False


def replies_to_bot(message: Message, *, bot_id: int) -> bool:
    """A reply to one of the bot's messages; a topic's root service message does not count."""
    replied = message.reply_to_message
    if replied is None or replied.from_user is None or replied.from_user.id != bot_id:
        return False
    return replied.forum_topic_created is None


def strip_mention(text: str, username: str) -> str:
    """Remove @username mentions of the bot; collapse the space they leave."""
    cleaned = re.sub(rf"(?i)[,;]?[ \t]*@{re.escape(username)}\b[,:;]?", " ", text)
    cleaned = re.sub(r"[ \t]+([?!.,;:])", r"\1", cleaned)  # "think ?" -> "think?"
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip()


@dataclass(frozen=True, slots=True)
class Incoming:
    """A text addressed to the bot, free of Telegram types."""

    chat_id: int
    thread_id: int | None
    user_id: int | None
    author: str | None
    language: str
    text: str
    is_group: bool

    @property
    def key(self) -> str:
        return chat_key(self.chat_id, self.thread_id)
