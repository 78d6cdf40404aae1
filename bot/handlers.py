"""Telegram handlers: turn the update into an `Incoming`, check access, call the engine.

Handlers stay thin: Telegram specifics (addressing in groups, access, input limits,
which reply is a follow-up: `bot.commands.follow_ups`) are decided here; consultation rules live
in `core`. Every message for the bot and every command counts against its sender's
message limit before any work, and a refusal goes through `bot.commands.refusals` (in a group at
most one per person a minute). Every handler reads the update through one `Incoming`,
built once by `incoming_of`. Edited messages are ignored on purpose: the original text
is already part of the consultation and the model may have answered it, so re-answering
an edit would fork the conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from telegram import Update

from bot.commands.file_turns import FileTurns
from bot.commands.follow_ups import Aim, FollowUpTurns
from bot.commands.memory import scope_of
from bot.commands.refusals import Refusals
from bot.commands.turns import TurnRunner
from bot.commands.usage import payer_of
from bot.transport.chat import Context, Incoming, chat_key, incoming_of
from bot.transport.config import BotConfig
from bot.transport.delivery import Sender
from bot.transport.outage import OutageNotices, store_failed
from bot.transport.progress import Live
from bot.transport.say import Say
from bot.updates.access import RateLimiter, UserRateLimits, is_allowed
from core.domain.asking import UserMessage
from core.domain.blank import is_blank
from core.domain.errors import EmptyMessage, StoreUnavailable
from core.domain.outcomes import Reply
from core.turns.engine import Engine
from i18n.translate import t
from media.intake import Intake

log = logging.getLogger(__name__)

UpdateCallback = Callable[[Update, Context], Coroutine[Any, Any, None]]
CommandCallback = Callable[[Incoming, Context], Awaitable[None]]
Localize = Callable[[Incoming], Awaitable[Incoming]]
"""An update in the language its sender chose (`bot.commands.language_choice`)."""


async def as_sent(incoming: Incoming) -> Incoming:
    """No chosen languages: every update in its sender's Telegram language."""
    return incoming


class Handlers:
    """Messages, files, media and the allow-list check around commands; shares the
    turn runner and `say` with `Commands` (wired by `bot.app.register`).

    Without an `intake` files are not read: they get the "text only" answer.
    """

    def __init__(
        self,
        engine: Engine,
        config: BotConfig,
        *,
        turns: TurnRunner,
        say: Say,
        rate_limits: UserRateLimits | None = None,
        intake: Intake | None = None,
        outage: OutageNotices | None = None,
        localize: Localize = as_sent,
        blocked: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        """`blocked` says whether an operator blocked a person (`core.turns.blocks`); without it
        no one is."""
        self.localize = localize
        self._blocked = blocked
        self.outage = OutageNotices() if outage is None else outage
        self.engine = engine
        self.config = config
        self.turns = turns
        self.say = say
        # Shared by every worker when given; this process's memory by default.
        self.rate_limiter = (
            RateLimiter(config.user_rate_limit_per_minute) if rate_limits is None else rate_limits
        )
        self.refuse = Refusals(say, self.rate_limiter)
        self.follow_ups = FollowUpTurns(
            engine, turns=turns, say=say, ttl_minutes=config.ttl_minutes
        )
        self.max_image_bytes = None if intake is None else intake.config.max_image_bytes
        self.files = (
            None
            if intake is None
            else FileTurns(
                engine,
                config,
                intake,
                turns=turns,
                say=say,
                refuse=self.refuse,
                text_turn=self.text_turn,
                follow_ups=self.follow_ups,
            )
        )

    async def allowed(self, incoming: Incoming) -> bool:
        """On the allow-lists and not blocked by an operator (`core.turns.blocks`: a cached
        read, so a person's messages cost at most one read per few seconds)."""
        listed = is_allowed(
            user_id=incoming.user_id,
            chat_id=incoming.chat_id,
            allowed_users=self.config.allowed_user_ids,
            allowed_chats=self.config.allowed_chat_ids,
        )
        if not listed or incoming.user_id is None or self._blocked is None:
            return listed
        return not await self._blocked(incoming.person(incoming.user_id))

    def command(self, callback: CommandCallback, *, addressed_only: bool = False) -> UpdateCallback:
        """`callback` for the users on the allow-lists only, within the sender's message
        limit (/status and /reset too: they answer at once but still count).

        A command refused by the allow-list is answered in private chats only, since in a
        group it may be another bot's. With `addressed_only` a group's command that does not
        name this bot (`/x@other_bot`, a bare unknown one) is ignored before anything, so
        another bot's commands never count against anyone's limit here.
        """

        async def handle(update: Update, context: Context) -> None:
            incoming = incoming_of(
                update,
                context.bot.username,
                context.bot.id,
                scope=self.config.scope,
                language=self.config.language,
            )
            if incoming is None or (addressed_only and not incoming.addressed):
                return
            if not await self.allowed(incoming):
                if not incoming.is_group:
                    await self.refuse(incoming, t(incoming.language, "not_allowed"))
                return
            incoming = await self.localize(incoming)  # a stranger costs no store read
            if await self.refuse.within_limit(incoming):
                await callback(incoming, context)

        return handle

    # -- messages ------------------------------------------------------------------------

    async def on_message(self, update: Update, context: Context) -> None:
        """Advance the consultation with a text addressed to the bot (in a group, a mention
        replying to a file makes that file the turn)."""
        incoming = await self.accept(update, context)
        if incoming is None:
            return
        aim = await self.follow_ups.aim(update, context.bot.id, incoming.key)
        if incoming.file is not None and self.files is not None:
            await self.files(incoming, context, aim=aim)
        else:
            await self.text_turn(incoming, context, aim=aim)

    async def on_file(self, update: Update, context: Context) -> None:
        """A voice note, audio, video note, document or photo addressed to the bot."""
        incoming = await self.accept(update, context)
        if incoming is None:
            return
        aim = await self.follow_ups.aim(update, context.bot.id, incoming.key)
        if incoming.file is not None and self.files is not None:
            await self.files(incoming, context, aim=aim)
        elif not is_blank(incoming.text):  # files not read here: the caption is all
            await self.text_turn(incoming, context, aim=aim)
        else:
            await self.refuse(incoming, t(incoming.language, "text_only"))

    async def text_turn(
        self, incoming: Incoming, context: Context, *, aim: Aim | None = None
    ) -> None:
        """The turn of `incoming.text` alone (a caption counts as text); with `aim`, the
        follow-up it asks (`bot.commands.follow_ups`)."""
        text = incoming.text
        language = incoming.language
        if is_blank(text):
            await self.refuse(incoming, t(incoming.language, "empty"))
            return
        if len(text) > self.config.max_input_chars:
            text = text[: self.config.max_input_chars]
            await self.say(incoming, t(language, "truncated", limit=self.config.max_input_chars))

        async def ask(live: Live) -> Reply:
            return await self.engine.turns.ask(
                UserMessage(
                    incoming.key,
                    text,
                    author=incoming.author,
                    author_id=incoming.user_id,
                    is_group=incoming.is_group,
                    on_text=live.on_text,
                    on_tool=live.on_tool,
                    turn_id=incoming.turn_id,  # handled twice, one turn (see Incoming.turn_id)
                    memory=scope_of(incoming),
                    payer=payer_of(incoming),
                )
            )

        try:
            if aim is not None:
                await self.follow_ups.run(incoming, context, text, aim)
            else:
                await self.turns.run(context.bot, incoming.target, language, ask)
        except EmptyMessage:
            await self.refuse(incoming, t(incoming.language, "empty"))

    async def on_media(self, update: Update, context: Context) -> None:
        """Explain that only text is understood (stickers, videos, locations and the like)."""
        incoming = await self.accept(update, context)
        if incoming is not None:
            await self.refuse(incoming, t(incoming.language, "text_only"))

    async def accept(self, update: Update, context: Context) -> Incoming | None:
        """The message if it is for the bot and allowed; None to ignore it.

        Refuses itself (not allowed, too fast), in a group at most once per person a
        minute (`bot.commands.refusals`).
        """
        incoming = incoming_of(
            update,
            context.bot.username,
            context.bot.id,
            max_image_bytes=self.max_image_bytes,
            scope=self.config.scope,
            language=self.config.language,
        )
        if incoming is None or not incoming.addressed:
            return None
        if not await self.allowed(incoming):
            await self.refuse(incoming, t(incoming.language, "not_allowed"))
            return None
        incoming = await self.localize(incoming)  # a stranger costs no store read
        if not await self.refuse.within_limit(incoming):
            return None
        self.turns.forget_blocked(incoming.chat_id)
        return incoming

    async def on_migrate(self, update: Update, context: Context) -> None:
        """Keep a group's consultation and settings when Telegram makes it a supergroup.

        The supergroup gets a new chat id; Telegram says so in the old group with
        `migrate_to_chat_id` (the matching `migrate_from_chat_id` in the new one is ignored).
        """
        message = update.effective_message
        if message is None or message.migrate_to_chat_id is None:
            return
        scope = self.config.scope
        old = chat_key(message.chat_id, scope=scope)
        new = chat_key(message.migrate_to_chat_id, scope=scope)
        moved = await self.engine.lifecycle.move_chat(old, new)
        log.info("chat %s became %s; %d consultation(s) moved", old, new, moved)

    async def on_error(self, update: object, context: Context) -> None:
        """Log the failure; tell the user something went wrong, never how. An outage is
        told in a chat at most once a minute (`bot.transport.outage`); a button press is told in
        its popup (`bot.updates.buttons`), never in the chat."""
        unavailable = isinstance(context.error, StoreUnavailable)
        if unavailable:  # the disk or the database, not a bug: the same command works later
            log.warning("store unavailable while handling an update: %s", context.error)
        else:
            log.error("error while handling an update", exc_info=context.error)
        if not isinstance(update, Update) or (unavailable and update.callback_query is not None):
            return
        notice = store_failed() if unavailable else "internal_error"
        incoming = incoming_of(
            update,
            context.bot.username,
            context.bot.id,
            scope=self.config.scope,
            language=self.config.language,
        )
        if incoming is None:
            return
        if unavailable and not self.outage.may_tell(incoming.chat_id):
            log.debug("outage notice in chat %s not repeated", incoming.chat_id)
            return
        if not unavailable:  # a store that just failed is not asked again
            incoming = await self.localize(incoming)
        text = t(incoming.language, notice)
        try:
            await Sender(context.bot, incoming.target).send_text(text)
        except Exception:  # the chat may be gone; nothing more to do
            log.debug("could not report the error to the chat", exc_info=True)
