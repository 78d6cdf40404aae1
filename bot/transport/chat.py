"""Who wrote what, where: Telegram updates reduced to plain values.

A conversation is a private chat, a group, or one forum topic of a supergroup;
its key is what the consultation store and the ordering lock are keyed on.
In groups the bot only takes messages addressed to it: commands, @mentions and
replies to its own messages (a forum topic's root message is not a reply). A file
counts in a group only when its message is addressed to the bot, or when a message
mentioning the bot replies to it: then that file is the input and the mentioning
message's text the words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telegram import Chat, Message, MessageEntity, Update, User
from telegram.ext import ContextTypes

from bot.transport.files import TelegramFile, file_of
from bot.transport.target import Target
from core.domain import telegram_keys
from i18n.languages import language_for

GROUP_TYPES = frozenset({Chat.GROUP, Chat.SUPERGROUP})

Context = ContextTypes.DEFAULT_TYPE
"""What PTB hands every handler next to the update (the bot, command arguments)."""


def chat_key(chat_id: int, thread_id: int | None = None, scope: int = 0) -> str:
    """The conversation's key in the bot of `scope` (`core.domain.telegram_keys`)."""
    return telegram_keys.chat_key(chat_id, thread_id, scope)


def topic_of(message: Message) -> int | None:
    """The forum topic a message belongs to (None outside forum topics)."""
    if message.is_topic_message and message.message_thread_id is not None:
        return message.message_thread_id
    return None


def conversation_key(update: Update, scope: int = 0) -> str | None:
    message = update.effective_message
    if message is None:
        chat = update.effective_chat
        return chat_key(chat.id, scope=scope) if chat is not None else None
    return chat_key(message.chat_id, topic_of(message), scope)


def turn_id_of(update_id: int, scope: int = 0) -> str:
    """The consultation turn id of a Telegram update (see `Incoming.turn_id`)."""
    return telegram_keys.turn_id(update_id, scope)


def display_name(user: User | None) -> str | None:
    if user is None:
        return None
    return user.full_name or (f"@{user.username}" if user.username else str(user.id))


def language_of(user: User | None) -> str:
    """The offered interface language the user's Telegram client names (English if none);
    a language chosen with /language overrides it (`bot.commands.language_choice`)."""
    return language_for(user.language_code if user is not None else None)


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
    """One update as plain values: everything a handler needs, built once by `incoming_of`.

    What arrived is `text` (a file's caption counts as text) and `file`: the voice
    note, document or photo the turn is about, not yet downloaded.
    """

    chat_id: int
    thread_id: int | None  # the forum topic, None outside topics
    message_id: int  # the user's message, or the bot's message under a pressed button
    user_id: int | None
    author: str | None  # the member's display name in groups; None in private chats
    language: str
    text: str  # mention of the bot stripped in groups; empty for a button press
    is_group: bool
    addressed: bool  # surely for the bot: private, a mention, a reply to it, a command naming it
    anonymous_admin: bool = False  # written as the group itself
    update_id: int | None = None  # the Telegram update it came from
    file: TelegramFile | None = None  # its own, or in a group the one its mention replies to
    scope: int = 0  # the bot it came to (`core.domain.telegram_keys`): 0, the deployment's

    @property
    def key(self) -> str:
        return chat_key(self.chat_id, self.thread_id, self.scope)

    @property
    def group_key(self) -> str:
        """The chat without its topic, in this bot: a group's memory spans its topics."""
        return chat_key(self.chat_id, scope=self.scope)

    def person(self, user_id: int) -> str:
        """A Telegram user of this bot as a person key (`tg:<id>`, `tg<n>:<id>`)."""
        return telegram_keys.person_key(user_id, self.scope)

    @property
    def turn_id(self) -> str | None:
        """The id of the consultation turn this update becomes (`tg:<update_id>`).

        The store keeps it with the user's message, so the same update handled again
        (delivered twice, or left by a worker that died after answering) is not a second
        turn: an answered one is replayed from the store and delivered again, so the user
        may see that reply twice — the price of handling each update at least once.
        """
        return None if self.update_id is None else turn_id_of(self.update_id, self.scope)

    @property
    def target(self) -> Target:
        """Where answers go: the same topic, as a reply to the message in groups."""
        return Target(
            chat_id=self.chat_id,
            thread_id=self.thread_id,
            reply_to=self.message_id if self.is_group else None,
            private=not self.is_group,
        )


def incoming_of(
    update: Update,
    bot_username: str,
    bot_id: int,
    *,
    max_image_bytes: int | None = None,
    scope: int = 0,
    language: str | None = None,
) -> Incoming | None:
    """The update as an `Incoming` of the bot of `scope`; None when it carries no
    (accessible) message. `language` is the bot's own (`BotConfig.language`), None: the
    one the user's client names.

    `max_image_bytes` picks the size of a photo to take (see `bot.transport.files.photo_size`).
    """
    message = update.effective_message
    if not isinstance(message, Message):
        return None
    user = update.effective_user
    group = is_group(message)
    button = update.callback_query is not None
    raw = "" if button else (message.text or message.caption or "")
    file = None
    if not button:
        file = file_of(message, max_image_bytes=max_image_bytes)
        if file is None and group:
            replied = file_of(message.reply_to_message, max_image_bytes=max_image_bytes)
            if replied is not None and mentions_bot(message, username=bot_username, bot_id=bot_id):
                file = replied  # entities are parsed only for a reply to a file
    return Incoming(
        chat_id=message.chat_id,
        thread_id=topic_of(message),
        message_id=message.message_id,
        user_id=user.id if user is not None else None,
        author=display_name(user) if group else None,
        language=language_for(language) if language else language_of(user),
        text=strip_mention(raw, bot_username) if group else raw,
        is_group=group,
        addressed=button or not group or addressed_in_group(message, bot_username, bot_id),
        anonymous_admin=(
            not button
            and message.sender_chat is not None
            and message.sender_chat.id == message.chat_id
        ),
        update_id=update.update_id,
        file=file,
        scope=scope,
    )


def addressed_in_group(message: Message, username: str, bot_id: int) -> bool:
    """A command naming this bot (a bare one may be any bot's), else a mention or a reply."""
    if command := command_of(message):
        _, _, name = command.partition("@")
        return name.lower() == username.lower()
    return mentions_bot(message, username=username, bot_id=bot_id) or replies_to_bot(
        message, bot_id=bot_id
    )


def command_of(message: Message) -> str | None:
    """The leading `/command[@bot]` of a message, as Telegram marks it."""
    text = message.text or ""
    for entity in message.entities:
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            return text[: entity.length]
    return None


def caption_command_of(message: Message) -> str | None:
    """The leading `/command[@bot]` of a file's caption, as Telegram marks it (PTB's
    command handlers read a text's command only)."""
    caption = message.caption or ""
    for entity in message.caption_entities:
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            return caption[: entity.length]
    return None
