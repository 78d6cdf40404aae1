"""Follow-up questions in Telegram: a reply to the bot's final answer, or the "Ask a
follow-up" press and the reply it asks for.

Invariants:
- a message is a follow-up only when it replies to a message of this bot: one whose
  keyboard names a consultation (its "Ask a follow-up" or "Document" button), the prompt
  a press sent, or another message the bot sent for the final answer of the chat's
  newest consultation, once complete, or after it (the other parts of a long final
  answer carry no keyboard). Anything
  else starts or continues a consultation as before; with FOLLOWUP_LIMIT=0 nothing is a
  follow-up;
- the consultation a follow-up names is looked up in the asking chat only
  (`ConsultationService.follow_up`): data naming another chat's reaches nothing;
- a follow-up runs like a turn (progress, delivery, errors, the update's turn id, so an
  update handled twice is one follow-up); one the consultation cannot take is told why,
  nothing stored;
- a press on "Ask a follow-up" sends the prompt to reply to (a ForceReply) only for the
  chat's newest consultation while it takes follow-ups; any other is refused in the
  press's popup, never in the chat; data the bot never sends is ignored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import (
    ForceReply,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.error import TelegramError

from bot.commands.turns import TurnRunner
from bot.commands.usage import payer_of
from bot.transport.chat import Context, Incoming
from bot.transport.keyboards import EXPORT, FOLLOW_UP, bare_id, consultation_of
from bot.transport.progress import Live
from bot.transport.say import Say
from bot.updates.buttons import Press, ignored
from core.domain.attachments import Image
from core.domain.consultation import Consultation, Role
from core.domain.errors import FollowUpReason, FollowUpUnavailable
from core.domain.outcomes import Reply
from core.turns.engine import Engine
from core.turns.follow_ups import final_index, unavailable_reason
from i18n.translate import every_translation, t

log = logging.getLogger(__name__)

PROMPTS = every_translation("follow_up_prompt")
"""The prompt a press sends, in every language: a reply to it asks a follow-up."""


@dataclass(frozen=True, slots=True)
class Aim:
    """A message asks a follow-up about `consultation_id` (32 hex digits), or about the
    chat's newest consultation when None."""

    consultation_id: str | None


def named_consultation(markup: InlineKeyboardMarkup | None) -> str | None:
    """The consultation a final answer's keyboard names (its follow-up or document
    button), read as strictly as the buttons are (`consultation_of`)."""
    if not isinstance(markup, InlineKeyboardMarkup):
        return None
    for row in markup.inline_keyboard:
        for button in row:
            data = button.callback_data if isinstance(button.callback_data, str) else ""
            kind, _, value = data.partition(":")
            if kind in (FOLLOW_UP, EXPORT) and (found := consultation_of(value)) is not None:
                return found
    return None


def reason_text(reason: FollowUpReason, language: str, ttl_minutes: int) -> str:
    """Why a consultation takes no follow-up, in the user's language."""
    return t(language, f"follow_up_{reason.value}", minutes=ttl_minutes)


class FollowUpTurns:
    """Recognises follow-ups, runs them, and handles the "Ask a follow-up" press."""

    def __init__(self, engine: Engine, *, turns: TurnRunner, say: Say, ttl_minutes: int) -> None:
        self.engine = engine
        self.turns = turns
        self.say = say
        self.ttl_minutes = ttl_minutes

    async def aim(self, update: Update, bot_id: int, key: str) -> Aim | None:
        """The follow-up the update's message asks (see the module), else None."""
        if self.engine.config.followup_limit <= 0:
            return None
        message = update.effective_message
        replied = message.reply_to_message if isinstance(message, Message) else None
        if replied is None or replied.from_user is None or replied.from_user.id != bot_id:
            return None
        named = named_consultation(replied.reply_markup)
        if named is not None:
            return Aim(named)
        if replied.text in PROMPTS:
            return Aim(None)
        latest = await self.engine.history.latest(key)
        if latest is None or not _sent_after_completion(replied, latest):
            return None
        return Aim(bare_id(latest.id))

    async def run(
        self,
        incoming: Incoming,
        context: Context,
        text: str,
        aim: Aim,
        *,
        images: Sequence[Image] = (),
    ) -> None:
        """Ask the follow-up `text` (already checked and cut like a turn's, a file's as
        stored with its `images`) and deliver the answer; a consultation that takes none
        is told why."""

        async def ask(live: Live) -> Reply:
            return await self.engine.turns.follow_up(
                incoming.key,
                text,
                consultation_id=aim.consultation_id,
                author=incoming.author,
                is_group=incoming.is_group,
                on_text=live.on_text,
                on_tool=live.on_tool,
                turn_id=incoming.turn_id,
                images=images,
                payer=payer_of(incoming),
            )

        try:
            await self.turns.run(context.bot, incoming.target, incoming.language, ask)
        except FollowUpUnavailable as exc:
            log.info("follow-up in chat %s refused: %s", incoming.chat_id, exc)
            await self.say(incoming, reason_text(exc.reason, incoming.language, self.ttl_minutes))

    async def press(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """ "Ask a follow-up": the prompt to reply to, or the reason in the popup."""
        bare = consultation_of(value)
        if bare is None:
            ignored(press.query.data, "not a consultation")
            return
        latest = await self.engine.history.latest(incoming.key)
        if latest is None or bare_id(latest.id) != bare:
            await press.answer(t(incoming.language, "follow_up_reply_instead"))
            return
        reason = unavailable_reason(latest, now=time.time(), config=self.engine.config)
        if reason is not None:
            await press.answer(reason_text(reason, incoming.language, self.ttl_minutes))
            return
        await press.answer()
        await self._prompt(incoming, context)

    async def _prompt(self, incoming: Incoming, context: Context) -> None:
        """The message a follow-up replies to, under the pressed answer."""
        text = t(incoming.language, "follow_up_prompt")
        try:
            await context.bot.send_message(
                incoming.chat_id,
                text,
                message_thread_id=incoming.thread_id,
                reply_parameters=ReplyParameters(
                    incoming.message_id, allow_sending_without_reply=True
                ),
                reply_markup=ForceReply(
                    input_field_placeholder=t(incoming.language, "follow_up_button")
                ),
            )
        except TelegramError as exc:
            log.info("could not send the follow-up prompt to chat %s: %s", incoming.chat_id, exc)


def _sent_after_completion(replied: Message, latest: Consultation) -> bool:
    """The replied message was sent for `latest`'s final answer or after it: the
    consultation is COMPLETE (so no newer one started) and the message is no older than
    the user's message the final answer answered. Every part of the answer was sent after
    that message was stored, its first one maybe as the progress message, whose date is
    when the model began writing (Telegram's dates are whole seconds)."""
    index = final_index(latest)
    if index is None:
        return False
    turn_began = latest.messages[index].created_at
    for message in reversed(latest.messages[:index]):
        if message.role is not Role.USER:
            break
        turn_began = message.created_at
    return replied.date.timestamp() >= int(turn_began)
