"""Presses on a round's buttons (`bot.transport.keyboards`): an option that answers, an option that
is chosen, "Send answers", and "Give the final answer now".

Invariants:
- an answering option (a round of one question) and "Send answers" run the chat's turn
  the way a typed message does (progress, delivery, errors, the update's turn id, so an
  update handled twice is one turn), the answers stored as question–answer pairs
  (`ConsultationService.ask` with the round's `RoundRef`); a chosen option is kept with
  the consultation (`ConsultationService.pick`, one per question) and the pressed
  message's keyboard is edited to mark the chosen options ✓;
- "Give the final answer now" (`FINAL_NOW`) runs the turn `/answer` runs, for the round
  it names;
- a press on a round that is no longer the consultation's current one (an older round,
  a finished or another consultation) is told so in its popup and changes nothing;
  "Send answers" with nothing chosen says in its popup to choose or type; data naming
  what the round does not offer can only be forged: answered without text, ignored;
- a press that runs a turn is answered once the turn is under way (the reply's first
  text) or over, never before the service accepted it, so a stale press can still be
  told so in its popup;
- in groups any allowed member may press; an answer records who pressed (`Answer.by`,
  the member's display name, the one the group's messages are prefixed with).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from telegram import Message
from telegram.error import TelegramError

from bot.commands.turns import TurnRunner
from bot.commands.usage import payer_of
from bot.transport.chat import Context, Incoming
from bot.transport.keyboards import choice_of, round_keyboard, round_of, with_picks
from bot.transport.progress import Live
from bot.updates.buttons import Press, ignored
from core.domain.asking import RoundRef, UserMessage
from core.domain.clarifying import Answer, ClarifyingRound, Picks
from core.domain.errors import AnswerInvalid, AnswerStale, EmptyMessage
from core.domain.outcomes import Reply
from core.domain.tools import ToolSpec
from core.turns.service import ConsultationService
from i18n.translate import t

log = logging.getLogger(__name__)


class RoundPresses:
    """The callbacks of a round's buttons, for `bot.updates.buttons.Buttons`."""

    def __init__(self, service: ConsultationService, *, turns: TurnRunner) -> None:
        self.service = service
        self.turns = turns

    async def answer(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Answer the round's one question with the option pressed."""
        choice = choice_of(value)
        if choice is None:
            ignored(press.query.data, "not a round's option")
            return
        answer = Answer(choice.question, option=choice.option, by=incoming.author)
        await self._turn(incoming, context, press, choice.ref, (answer,))

    async def send(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Send the options chosen so far as the answers to the round."""
        ref = round_of(value)
        if ref is None:
            ignored(press.query.data, "not a round")
            return
        await self._turn(incoming, context, press, ref, ())

    async def final_now(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Give the final answer now, if the round the button names is still the current one."""
        ref = round_of(value)
        if ref is None:
            ignored(press.query.data, "not a round")
            return

        async def finish(live: Live) -> Reply:
            return await self.service.answer_now(
                incoming.key,
                author=incoming.author,
                is_group=incoming.is_group,
                on_text=live.on_text,
                on_tool=live.on_tool,
                language=incoming.language,
                turn_id=incoming.turn_id,  # handled twice, one turn (see Incoming.turn_id)
                payer=payer_of(incoming),
                ref=ref,
            )

        await self._run(incoming, context, press, finish)

    async def pick(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Choose the option pressed (or unchoose it) and mark the keyboard."""
        choice = choice_of(value)
        if choice is None:
            ignored(press.query.data, "not a round's option")
            return
        try:
            found, picks = await self.service.pick(
                incoming.key, choice.ref, choice.question, choice.option, by=incoming.author
            )
        except AnswerStale as exc:
            log.debug("stale pick in chat %s: %s", incoming.chat_id, exc)
            await press.answer(t(incoming.language, "round_stale"))
            return
        except AnswerInvalid:
            ignored(press.query.data, "not an option of the round")
            return
        await press.answer()
        await self._mark(incoming, context, press, choice.ref, found, picks)

    async def _turn(
        self,
        incoming: Incoming,
        context: Context,
        press: Press,
        ref: RoundRef,
        answers: Sequence[Answer],
    ) -> None:
        async def ask(live: Live) -> Reply:
            return await self.service.ask(
                UserMessage(
                    incoming.key,
                    "",
                    author=incoming.author,
                    author_id=incoming.user_id,
                    is_group=incoming.is_group,
                    on_text=live.on_text,
                    on_tool=live.on_tool,
                    turn_id=incoming.turn_id,  # handled twice, one turn (see Incoming.turn_id)
                    answers=answers,
                    ref=ref,
                    payer=payer_of(incoming),
                )
            )

        await self._run(incoming, context, press, ask)

    async def _run(
        self,
        incoming: Incoming,
        context: Context,
        press: Press,
        call: Callable[[Live], Awaitable[Reply]],
    ) -> None:
        """Run the turn `call` makes; the press is answered once its text (or a tool it
        runs) shows, or with the popup saying why nothing happened."""

        async def action(live: Live) -> Reply:
            async def shown(text: str) -> None:
                await press.answer()  # the turn is under way: the client stops waiting
                await live.on_text(text)

            async def tool(spec: ToolSpec) -> None:
                await press.answer()
                await live.on_tool(spec)

            return await call(Live(shown, tool))

        try:
            await self.turns.run(context.bot, incoming.target, incoming.language, action)
        except AnswerStale as exc:
            log.debug("stale answer in chat %s: %s", incoming.chat_id, exc)
            await press.answer(t(incoming.language, "round_stale"))
        except AnswerInvalid:
            ignored(press.query.data, "not an option of the round")
        except EmptyMessage:
            await press.answer(t(incoming.language, "round_nothing_chosen"))

    async def _mark(
        self,
        incoming: Incoming,
        context: Context,
        press: Press,
        ref: RoundRef,
        found: ClarifyingRound,
        picks: Picks,
    ) -> None:
        """Show the chosen options ✓ in the pressed message's keyboard (best effort: the
        picks are kept whether or not the edit goes through)."""
        message = press.query.message
        current = message.reply_markup if isinstance(message, Message) else None
        markup = (
            with_picks(current, found, picks)
            if current is not None
            else round_keyboard(found, ref, incoming.language, picks)
        )
        try:
            await context.bot.edit_message_reply_markup(
                incoming.chat_id, incoming.message_id, reply_markup=markup
            )
        except TelegramError as exc:
            log.debug("could not mark the chosen options in chat %s: %s", incoming.chat_id, exc)
