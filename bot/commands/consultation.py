"""Command handlers: /start /help /rounds /reset /status /answer /retry /role, and their buttons.

Each command gets the update as an `Incoming` from the allow-list check in
`bot.handlers`. In groups, the commands that change the consultation (/rounds,
/reset, /role, and `bot.commands.model_choice`' /model by `may_configure`) are for chat admins and
the member who started the consultation, unless the operator opened them to everyone
(GROUP_CONFIG_ADMINS_ONLY=false); a refusal in a group is said at most once per
person a minute (`bot.commands.refusals`). A button press is refused in its own popup, never with
a chat message (see `bot.updates.buttons`), and a value no button of the bot offers is ignored.
"""

from __future__ import annotations

import logging

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.commands.admins import is_chat_admin
from bot.commands.refusals import Refusals
from bot.commands.turns import TurnRunner
from bot.commands.usage import payer_of
from bot.transport.chat import Context, Incoming
from bot.transport.config import BotConfig
from bot.transport.progress import Live
from bot.transport.say import Say
from bot.transport.target import AnyBot
from bot.updates.buttons import Press, ignored
from bot.updates.in_flight import stop_earlier
from core.domain.errors import InvalidMaxRounds
from core.domain.outcomes import Reply
from core.prompting.role_choice import role_choice
from core.turns.engine import Engine
from i18n.translate import t

log = logging.getLogger(__name__)

ROUNDS_CHOICES = (1, 2, 3, 5, 7, 10)


class Commands:
    """The commands and the settings buttons; each method takes the update as an `Incoming`."""

    def __init__(
        self,
        engine: Engine,
        config: BotConfig,
        *,
        turns: TurnRunner,
        say: Say,
        refuse: Refusals,
        payments: bool = False,
    ) -> None:
        self.engine = engine
        self.config = config
        self.turns = turns
        self.say = say
        self.refuse = refuse
        self.payments = payments
        """The bot sells plans: /help lists /plans, /paysupport and /terms."""

    async def start(self, incoming: Incoming, context: Context) -> None:
        """Greet and explain how a consultation works."""
        status = await self.engine.turns.status(incoming.key)
        await self.say(incoming, t(incoming.language, "start", rounds=status.max_rounds))

    async def help(self, incoming: Incoming, context: Context) -> None:
        """List the commands (the payment ones only when the bot sells plans); in groups
        explain privacy mode when it hides messages."""
        language = incoming.language
        status = await self.engine.turns.status(incoming.key)
        text = t(
            language,
            "help",
            limit=self.engine.config.max_rounds_limit,
            rounds=status.max_rounds,
            username=context.bot.username,
        )
        if self.payments:
            text += "\n\n" + t(language, "help_payments")
        if incoming.is_group and not context.bot.can_read_all_group_messages:
            text += "\n\n" + t(language, "privacy_note", username=context.bot.username)
        await self.say(incoming, text)

    async def rounds(self, incoming: Incoming, context: Context) -> None:
        """Show or set the number of rounds per consultation."""
        args = context.args or []
        if not args:
            status = await self.engine.turns.status(incoming.key)
            limit = self.engine.config.max_rounds_limit
            await self.say(
                incoming,
                t(incoming.language, "rounds_show", rounds=status.max_rounds, limit=limit),
                keyboard=rounds_keyboard(limit),
            )
            return
        if not await self.may_configure(incoming, context):
            await self.refuse(incoming, t(incoming.language, "not_admin"))
            return
        await self._set_rounds(incoming, " ".join(args))

    async def rounds_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Apply a choice from the /rounds buttons (a refusal goes in the press's popup)."""
        offered = rounds_choices(self.engine.config.max_rounds_limit)
        if value not in {str(n) for n in offered}:
            ignored(press.query.data, "not a rounds choice")
            return
        if not await self.may_configure(incoming, context):
            await press.answer(t(incoming.language, "not_admin"))
            return
        # The press is answered after the change, so a failing store is told in its popup.
        await self._set_rounds(incoming, value)

    async def _set_rounds(self, incoming: Incoming, raw: str) -> None:
        language = incoming.language
        limit = self.engine.config.max_rounds_limit
        invalid = t(language, "rounds_invalid", value=raw[:40], limit=limit)
        try:
            value = int(raw.strip())
        except ValueError:
            await self.say(incoming, invalid)
            return
        try:
            change = await self.engine.settings.set_max_rounds(incoming.key, value)
        except InvalidMaxRounds:
            await self.say(incoming, invalid)
            return
        lines = [t(language, "rounds_set", rounds=change.max_rounds)]
        if change.active:
            lines.append(t(language, "rounds_set_active", done=change.rounds_done, rounds=value))
            if change.next_is_final:
                lines.append(t(language, "rounds_next_final"))
        await self.say(incoming, "\n".join(lines))

    async def reset(self, incoming: Incoming, context: Context) -> None:
        """End the active consultation, stopping a reply being written (runs out of order)."""
        if not await self.may_configure(incoming, context):
            await self.refuse(incoming, t(incoming.language, "not_admin"))
            return
        stopped = await stop_earlier()  # the chat's update held on any worker (shared inbox)
        ended = await self.engine.lifecycle.reset(incoming.key)
        said = "reset_done" if ended else "reset_stopped" if stopped else "reset_none"
        await self.say(incoming, t(incoming.language, said))

    async def status(self, incoming: Incoming, context: Context) -> None:
        """Say where the consultation stands (runs out of order, even mid-turn)."""
        language = incoming.language
        status = await self.engine.turns.status(incoming.key, payer_of(incoming))
        role = self._role_title(status.role)
        if not status.active:
            text = t(
                language, "status_idle", rounds=status.max_rounds, role=role, model=status.model
            )
        else:
            request = status.initial_request or ""
            shown = request if len(request) <= 200 else request[:200] + "…"
            text = t(
                language,
                "status_active",
                done=status.rounds_done,
                rounds=status.max_rounds,
                role=role,
                model=status.model,
                request=shown,
            )
            if status.answering:
                text += "\n" + t(language, "status_answering")
            elif status.open_turn:
                text += "\n" + t(language, "status_open_turn")
        await self.say(incoming, text)

    async def answer(self, incoming: Incoming, context: Context) -> None:
        """Give the final answer now."""
        await self._answer_now(incoming, context.bot)

    async def retry(self, incoming: Incoming, context: Context) -> None:
        """Answer the waiting message again after a model error."""

        async def retry(live: Live) -> Reply:
            return await self.engine.turns.retry(
                incoming.key,
                is_group=incoming.is_group,
                on_text=live.on_text,
                on_tool=live.on_tool,
                payer=payer_of(incoming),
            )

        await self.turns.run(context.bot, incoming.target, incoming.language, retry)

    async def role(self, incoming: Incoming, context: Context) -> None:
        """Show or choose the expert persona (or a custom instruction) for the chat."""
        roles = self.engine.settings.roles()
        args = context.args or []
        if not args:
            status = await self.engine.turns.status(incoming.key)
            await self.say(
                incoming,
                t(incoming.language, "role_show", role=self._role_title(status.role)),
                keyboard=roles_keyboard({k: r.title for k, r in roles.items()}),
            )
            return
        if not await self.may_configure(incoming, context):
            await self.refuse(incoming, t(incoming.language, "not_admin"))
            return
        await self._set_role(incoming, " ".join(args))

    async def role_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Apply a choice from the /role buttons (a refusal goes in the press's popup); a
        button names a persona, never an instruction of its own."""
        if value not in self.engine.settings.roles():
            ignored(press.query.data, "not a role")
            return
        if not await self.may_configure(incoming, context):
            await press.answer(t(incoming.language, "not_admin"))
            return
        # The press is answered after the change, so a failing store is told in its popup.
        await self._set_role(incoming, value)

    async def answer_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Give the final answer now, from the button under a clarifying question."""
        if value:  # the button's data is the kind alone
            ignored(press.query.data, "not the answer button")
            return
        await press.answer()  # before the turn: the client stops waiting at once
        await self._answer_now(incoming, context.bot)

    async def _answer_now(self, incoming: Incoming, bot: AnyBot) -> None:
        """Close the consultation with its final answer, in the asker's language: one path
        for /answer and the button, so the command and the button always behave the same."""

        async def answer(live: Live) -> Reply:
            return await self.engine.turns.answer_now(
                incoming.key,
                author=incoming.author,
                is_group=incoming.is_group,
                on_text=live.on_text,
                on_tool=live.on_tool,
                language=incoming.language,
                turn_id=incoming.turn_id,  # handled twice, one turn (see Incoming.turn_id)
                payer=payer_of(incoming),
            )

        await self.turns.run(bot, incoming.target, incoming.language, answer)

    async def _set_role(self, incoming: Incoming, raw: str) -> None:
        roles = self.engine.settings.roles()
        choice = role_choice(raw, roles)
        if choice is None:
            names = ", ".join(sorted(roles))
            await self.say(
                incoming, t(incoming.language, "role_unknown", value=raw[:40], roles=names)
            )
            return
        await self.engine.settings.set_role(
            incoming.key, choice.role, system_prompt=choice.system_prompt
        )
        await self.say(incoming, t(incoming.language, "role_set", role=choice.title))

    async def unknown(self, incoming: Incoming, context: Context) -> None:
        """Point to /help for a command the bot does not have (registered for addressed
        commands only: in groups a bare one may be another bot's)."""
        await self.refuse(incoming, t(incoming.language, "unknown_command"))

    # -- helpers ---------------------------------------------------------------------------

    def _role_title(self, role: str) -> str:
        info = self.engine.settings.roles().get(role)
        return info.title if info is not None else role

    async def may_configure(self, incoming: Incoming, context: Context) -> bool:
        """In groups: admins and the consultation's starter; elsewhere anyone."""
        if not incoming.is_group or not self.config.group_config_admins_only:
            return True
        if incoming.user_id is not None and not incoming.anonymous_admin:
            status = await self.engine.turns.status(incoming.key)
            if status.active and status.started_by == incoming.user_id:
                return True
        return await is_chat_admin(incoming, context)


def rounds_choices(limit: int) -> tuple[int, ...]:
    """The numbers of rounds the /rounds buttons offer under `limit`."""
    return tuple(n for n in ROUNDS_CHOICES if n <= limit)


def rounds_keyboard(limit: int) -> InlineKeyboardMarkup:
    buttons = [
        InlineKeyboardButton(str(n), callback_data=f"rounds:{n}") for n in rounds_choices(limit)
    ]
    return InlineKeyboardMarkup([buttons])


def roles_keyboard(titles: dict[str, str]) -> InlineKeyboardMarkup:
    rows = [
        [InlineKeyboardButton(title, callback_data=f"role:{key}")] for key, title in titles.items()
    ]
    return InlineKeyboardMarkup(rows)
