"""Command handlers: /start /help /rounds /reset /status /answer /retry /role, and their buttons.

In groups, the commands that change the consultation (/rounds, /reset, /role) are
for chat admins and the member who started the consultation, unless the operator
opened them to everyone (GROUP_CONFIG_ADMINS_ONLY=false).
"""

from __future__ import annotations

import logging

from telegram import (
    ChatMember,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.error import TelegramError

from bot.chat import chat_key, is_group, language_of, topic_of
from bot.delivery import Sender
from bot.handlers import Context, Handlers, target_of
from bot.i18n import t
from core.errors import InvalidMaxRounds
from core.outcomes import Reply
from core.service import OnText

log = logging.getLogger(__name__)

ROUNDS_CHOICES = (1, 2, 3, 5, 7, 10)
ADMIN_STATUSES = frozenset({ChatMember.ADMINISTRATOR, ChatMember.OWNER})


class Commands:
    def __init__(self, handlers: Handlers) -> None:
        self.h = handlers
        self.service = handlers.service
        self.config = handlers.config

    async def start(self, update: Update, context: Context) -> None:
        """Greet and explain how a consultation works."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        status = await self.service.status(key)
        await self._say(message, context, t(language, "start", rounds=status.max_rounds))

    async def help(self, update: Update, context: Context) -> None:
        """List the commands; in groups explain privacy mode when it hides messages."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        status = await self.service.status(key)
        text = t(
            language,
            "help",
            limit=self.service.config.max_rounds_limit,
            rounds=status.max_rounds,
            username=context.bot.username,
        )
        if is_group(message) and not context.bot.can_read_all_group_messages:
            text += "\n\n" + t(language, "privacy_note", username=context.bot.username)
        await self._say(message, context, text)

    async def rounds(self, update: Update, context: Context) -> None:
        """Show or set the number of rounds per consultation."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        args = context.args or []
        if not args:
            status = await self.service.status(key)
            limit = self.service.config.max_rounds_limit
            await self._say(
                message,
                context,
                t(language, "rounds_show", rounds=status.max_rounds, limit=limit),
                keyboard=rounds_keyboard(limit),
            )
            return
        if not await self._may_configure(message, context, key):
            await self._say(message, context, t(language, "not_admin"))
            return
        await self._set_rounds(message, context, language, key, " ".join(args))

    async def _set_rounds(
        self, message: Message, context: Context, language: str, key: str, raw: str
    ) -> None:
        limit = self.service.config.max_rounds_limit
        invalid = t(language, "rounds_invalid", value=raw[:40], limit=limit)
        try:
            value = int(raw.strip())
        except ValueError:
            await self._say(message, context, invalid)
            return
        try:
            change = await self.service.set_max_rounds(key, value)
        except InvalidMaxRounds:
            await self._say(message, context, invalid)
            return
        lines = [t(language, "rounds_set", rounds=change.max_rounds)]
        if change.active:
            lines.append(t(language, "rounds_set_active", done=change.rounds_done, rounds=value))
            if change.next_is_final:
                lines.append(t(language, "rounds_next_final"))
        await self._say(message, context, "\n".join(lines))

    async def reset(self, update: Update, context: Context) -> None:
        """End the active consultation, stopping a reply being written (runs out of order)."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        if not await self._may_configure(message, context, key):
            await self._say(message, context, t(language, "not_admin"))
            return
        ended = await self.service.reset(key)
        await self._say(message, context, t(language, "reset_done" if ended else "reset_none"))

    async def status(self, update: Update, context: Context) -> None:
        """Say where the consultation stands (runs out of order, even mid-turn)."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        status = await self.service.status(key)
        role = self._role_title(status.role)
        if not status.active:
            text = t(language, "status_idle", rounds=status.max_rounds, role=role)
        else:
            request = status.initial_request or ""
            shown = request if len(request) <= 200 else request[:200] + "…"
            text = t(
                language,
                "status_active",
                done=status.rounds_done,
                rounds=status.max_rounds,
                role=role,
                request=shown,
            )
            if status.answering:
                text += "\n" + t(language, "status_answering")
            elif status.open_turn:
                text += "\n" + t(language, "status_open_turn")
        await self._say(message, context, text)

    async def answer(self, update: Update, context: Context) -> None:
        """Give the final answer now."""
        message = update.effective_message
        if message is None:
            return
        await self.h.final_answer_now(message, context, user=update.effective_user)

    async def retry(self, update: Update, context: Context) -> None:
        """Answer the waiting message again after a model error."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        group = is_group(message)

        async def retry(on_text: OnText) -> Reply:
            return await self.service.retry(key, is_group=group, on_text=on_text)

        await self.h.turns.run(context.bot, target_of(message), language, retry)

    async def role(self, update: Update, context: Context) -> None:
        """Show or choose the expert persona (or a custom instruction) for the chat."""
        if (found := self._message(update)) is None:
            return
        message, language, key = found
        roles = self.service.roles()
        args = context.args or []
        if not args:
            status = await self.service.status(key)
            await self._say(
                message,
                context,
                t(language, "role_show", role=self._role_title(status.role)),
                keyboard=roles_keyboard({k: r.title for k, r in roles.items()}),
            )
            return
        if not await self._may_configure(message, context, key):
            await self._say(message, context, t(language, "not_admin"))
            return
        await self._set_role(message, context, language, key, " ".join(args))

    async def _set_role(
        self, message: Message, context: Context, language: str, key: str, raw: str
    ) -> None:
        roles = self.service.roles()
        choice = raw.strip().lower()
        if choice in roles:
            await self.service.set_role(key, choice)
            title = roles[choice].title
        elif len(raw.split()) >= 3:  # a sentence: the chat's own instruction for the expert
            await self.service.set_role(key, None, system_prompt=raw.strip()[:2000])
            title = "“" + raw.strip()[:60] + "”"
        else:
            names = ", ".join(sorted(roles))
            await self._say(
                message, context, t(language, "role_unknown", value=raw[:40], roles=names)
            )
            return
        await self._say(message, context, t(language, "role_set", role=title))

    async def unknown(self, update: Update, context: Context) -> None:
        """Point to /help for a command the bot does not have."""
        message = update.effective_message
        if message is None or not message.text:
            return
        if is_group(message):
            command = message.text.split()[0]
            if (
                "@" not in command
                or command.split("@", 1)[1].lower() != context.bot.username.lower()
            ):
                return  # possibly another bot's command
        await self._say(message, context, t(language_of(update.effective_user), "unknown_command"))

    async def on_settings_button(self, update: Update, context: Context) -> None:
        """Apply a choice from the /rounds or /role buttons."""
        query = update.callback_query
        if query is None or not isinstance(query.message, Message) or not query.data:
            return
        await query.answer()
        message = query.message
        language = language_of(query.from_user)
        key = chat_key(message.chat_id, topic_of(message))
        if not await self._may_configure(message, context, key, user_id=query.from_user.id):
            await self._say(message, context, t(language, "not_admin"))
            return
        kind, _, value = query.data.partition(":")
        if kind == "rounds":
            await self._set_rounds(message, context, language, key, value)
        elif kind == "role":
            await self._set_role(message, context, language, key, value)

    # -- helpers ---------------------------------------------------------------------------

    def _message(self, update: Update) -> tuple[Message, str, str] | None:
        message = update.effective_message
        if message is None:
            return None
        return (
            message,
            language_of(update.effective_user),
            chat_key(message.chat_id, topic_of(message)),
        )

    async def _say(
        self,
        message: Message,
        context: Context,
        text: str,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> None:
        await self.h.say(Sender(context.bot, target_of(message)), text, keyboard=keyboard)

    def _role_title(self, role: str) -> str:
        info = self.service.roles().get(role)
        return info.title if info is not None else role

    async def _may_configure(
        self, message: Message, context: Context, key: str, *, user_id: int | None = None
    ) -> bool:
        """In groups: admins and the consultation's starter; elsewhere anyone."""
        if not is_group(message) or not self.config.group_config_admins_only:
            return True
        if message.sender_chat is not None and message.sender_chat.id == message.chat_id:
            return True  # an anonymous admin writing as the group
        if user_id is None:
            user_id = message.from_user.id if message.from_user is not None else None
        if user_id is None:
            return False
        status = await self.service.status(key)
        if status.active and status.started_by == user_id:
            return True
        try:
            member = await context.bot.get_chat_member(message.chat_id, user_id)
        except TelegramError as exc:
            log.info("could not check admin rights in chat %s: %s", message.chat_id, exc)
            return False
        return member.status in ADMIN_STATUSES


def rounds_keyboard(limit: int) -> InlineKeyboardMarkup:
    buttons = [
        InlineKeyboardButton(str(n), callback_data=f"rounds:{n}")
        for n in ROUNDS_CHOICES
        if n <= limit
    ]
    return InlineKeyboardMarkup([buttons])


def roles_keyboard(titles: dict[str, str]) -> InlineKeyboardMarkup:
    rows = [
        [InlineKeyboardButton(title, callback_data=f"role:{key}")] for key, title in titles.items()
    ]
    return InlineKeyboardMarkup(rows)
