"""Telegram handlers: parse the update, call the consultation service, show the result.

Handlers stay thin: Telegram specifics (addressing in groups, access, input limits)
are decided here; consultation rules live in `core`. Edited messages are ignored
on purpose: the original text is already part of the consultation and the model
may have answered it, so re-answering an edit would fork the conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from telegram import InlineKeyboardMarkup, Message, Update, User
from telegram.error import TelegramError
from telegram.ext import ApplicationHandlerStop, ContextTypes, filters

from bot.access import RateLimiter, is_allowed
from bot.chat import (
    Incoming,
    chat_key,
    display_name,
    is_group,
    language_of,
    mentions_bot,
    replies_to_bot,
    strip_mention,
    topic_of,
)
from bot.config import BotConfig
from bot.delivery import ChatUnavailable, Sender, Target
from bot.i18n import t
from bot.turns import ANSWER_NOW, TurnRunner
from core.blank import is_blank
from core.errors import EmptyMessage, StoreUnavailable
from core.outcomes import Reply
from core.service import ConsultationService, OnText

log = logging.getLogger(__name__)

Context = ContextTypes.DEFAULT_TYPE


def target_of(message: Message) -> Target:
    return Target(
        chat_id=message.chat_id,
        thread_id=topic_of(message) if message.is_topic_message else None,
        reply_to=message.message_id if is_group(message) else None,
        private=not is_group(message),
    )


class Handlers:
    def __init__(
        self,
        service: ConsultationService,
        config: BotConfig,
        *,
        on_reply: Callable[[Reply], None] | None = None,
    ) -> None:
        self.service = service
        self.config = config
        self.turns = TurnRunner(
            ttl_minutes=config.ttl_minutes,
            private_interval=config.private_progress_interval,
            group_interval=config.group_progress_interval,
            on_reply=on_reply,
        )
        self.rate_limiter = RateLimiter(config.user_rate_limit_per_minute)

    async def gate(self, update: Update, context: Context) -> None:
        """Stop commands and button presses from users outside the allow-lists.

        Runs before every other handler. Plain messages pass: `accept` refuses them
        (it knows which group messages are addressed to the bot); commands and buttons
        would otherwise change settings or call the model for anyone. Refused commands
        are answered in private chats only, since in a group they may be another bot's.
        """
        user, chat = update.effective_user, update.effective_chat
        if chat is None or is_allowed(
            user_id=user.id if user is not None else None,
            chat_id=chat.id,
            allowed_users=self.config.allowed_user_ids,
            allowed_chats=self.config.allowed_chat_ids,
        ):
            return
        refusal = t(language_of(user), "not_allowed")
        if update.callback_query is not None:
            try:
                await update.callback_query.answer(refusal)
            except TelegramError as exc:
                log.info("could not answer a refused button press: %s", exc)
            raise ApplicationHandlerStop
        message = update.message
        if message is None or not filters.COMMAND.check_update(update):
            return
        if not is_group(message):
            await self.say(Sender(context.bot, target_of(message)), refusal)
        raise ApplicationHandlerStop

    # -- messages ------------------------------------------------------------------------

    async def on_message(self, update: Update, context: Context) -> None:
        """Advance the consultation with a text (or a captioned photo) addressed to the bot."""
        message = update.effective_message
        if message is None:
            return
        incoming = await self.accept(message, context)
        if incoming is None:
            return
        text = incoming.text
        language = incoming.language
        sender = Sender(context.bot, target_of(message))
        if is_blank(text):
            await self.say(sender, t(language, "empty"))
            return
        if len(text) > self.config.max_input_chars:
            text = text[: self.config.max_input_chars]
            await self.say(sender, t(language, "truncated", limit=self.config.max_input_chars))

        async def ask(on_text: OnText) -> Reply:
            return await self.service.ask(
                incoming.key,
                text,
                author=incoming.author,
                author_id=incoming.user_id,
                is_group=incoming.is_group,
                on_text=on_text,
            )

        try:
            await self.turns.run(context.bot, target_of(message), language, ask)
        except EmptyMessage:
            await self.say(sender, t(language, "empty"))

    async def on_media(self, update: Update, context: Context) -> None:
        """Explain that only text is understood (stickers, voice, photos without caption)."""
        message = update.effective_message
        if message is None:
            return
        incoming = await self.accept(message, context)
        if incoming is not None:
            await self.say(
                Sender(context.bot, target_of(message)), t(incoming.language, "text_only")
            )

    async def accept(self, message: Message, context: Context) -> Incoming | None:
        """The message as plain values if it is for the bot and allowed; None to ignore it.

        Replies itself when a user is refused (not allowed, too fast).
        """
        user = message.from_user
        language = language_of(user)
        group = is_group(message)
        raw = message.text or message.caption or ""
        bot = context.bot
        if group and not (
            mentions_bot(message, username=bot.username, bot_id=bot.id)
            or replies_to_bot(message, bot_id=bot.id)
        ):
            return None
        sender = Sender(bot, target_of(message))
        user_id = user.id if user is not None else None
        if not is_allowed(
            user_id=user_id,
            chat_id=message.chat_id,
            allowed_users=self.config.allowed_user_ids,
            allowed_chats=self.config.allowed_chat_ids,
        ):
            await self.say(sender, t(language, "not_allowed"))
            return None
        if user_id is not None:
            wait = self.rate_limiter.check(user_id)
            if wait > 0:
                if self.rate_limiter.should_warn(user_id):
                    await self.say(sender, t(language, "rate_limited", seconds=int(wait) + 1))
                return None
        self.turns.forget_blocked(message.chat_id)
        text = strip_mention(raw, bot.username) if group else raw
        return Incoming(
            chat_id=message.chat_id,
            thread_id=topic_of(message),
            user_id=user_id,
            author=display_name(user) if group else None,
            language=language,
            text=text,
            is_group=group,
        )

    async def on_migrate(self, update: Update, context: Context) -> None:
        """Keep a group's consultation and settings when Telegram makes it a supergroup.

        The supergroup gets a new chat id; Telegram says so in the old group with
        `migrate_to_chat_id` (the matching `migrate_from_chat_id` in the new one is ignored).
        """
        message = update.effective_message
        if message is None or message.migrate_to_chat_id is None:
            return
        old, new = chat_key(message.chat_id), chat_key(message.migrate_to_chat_id)
        moved = await self.service.move_chat(old, new)
        log.info("chat %s became %s; %d consultation(s) moved", old, new, moved)

    async def on_answer_button(self, update: Update, context: Context) -> None:
        """Give the final answer now, from the button under a clarifying question."""
        query = update.callback_query
        if query is None:
            return
        await query.answer()
        message = query.message
        if not isinstance(message, Message) or query.data != ANSWER_NOW:
            return
        await self.final_answer_now(message, context, user=query.from_user)

    async def final_answer_now(
        self, message: Message, context: Context, *, user: User | None
    ) -> None:
        group = is_group(message)
        language = language_of(user)
        key = Incoming(message.chat_id, topic_of(message), None, None, language, "", group).key

        async def answer(on_text: OnText) -> Reply:
            return await self.service.answer_now(
                key,
                author=display_name(user) if group else None,
                is_group=group,
                on_text=on_text,
                language=language,
            )

        await self.turns.run(context.bot, target_of(message), language, answer)

    async def say(
        self, sender: Sender, text: str, *, keyboard: InlineKeyboardMarkup | None = None
    ) -> None:
        """Send a UI text; a chat that is gone or unreachable is logged, not raised."""
        try:
            await sender.send_text(text, keyboard=keyboard)
        except (ChatUnavailable, TelegramError) as exc:
            log.info("could not write to chat %s: %s", sender.chat_id, exc)

    async def on_error(self, update: object, context: Context) -> None:
        """Log the failure; tell the user something went wrong, never how."""
        unavailable = isinstance(context.error, StoreUnavailable)
        if unavailable:  # the disk or the file, not a bug: the same command works later
            log.warning("store unavailable while handling an update: %s", context.error)
        else:
            log.error("error while handling an update", exc_info=context.error)
        if isinstance(update, Update) and update.effective_message is not None:
            message = update.effective_message
            language = language_of(update.effective_user)
            try:
                await Sender(context.bot, target_of(message)).send_text(
                    t(language, "store_unavailable" if unavailable else "internal_error")
                )
            except Exception:  # the chat may be gone; nothing more to do
                log.debug("could not report the error to the chat", exc_info=True)
