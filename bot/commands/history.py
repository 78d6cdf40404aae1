"""/history: the chat's recent consultations, with buttons to show a final answer again
and to export each one.

Invariants: one message lists the chat's newest consultations (`core.turns.history`), numbered
as /export N reads them, each with its start date, the start of its request, its status
and the rounds it used; each has a "Document N" button (`ex:<id>`) and, when it ended
with a final answer, an "Answer N" button (`hs:<id>`); a button's data names only the
consultation, within Telegram's 64 bytes. "Answer N" sends the final answer again
rendered like the original, with the knowledge-base sources it cited, the tools it used
and the final answer's buttons, and only for the chat's own consultation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.commands.exports import consultation_pressed
from bot.commands.turns import appendix_for, footer_for
from bot.transport.chat import Context, Incoming
from bot.transport.delivery import Sender
from bot.transport.keyboards import EXPORT, bare_id, reply_keyboard
from bot.transport.say import Say
from bot.updates.buttons import Press
from core.domain.consultation import ConsultationSummary
from core.domain.outcomes import Reply
from core.turns.history import History, has_final_answer, request_line
from core.turns.transcript import transcript_of
from i18n.translate import t

SHOW = "hs"
"""Show a consultation's final answer again."""
SHOWN_REQUEST_CHARS = 80


class HistoryView:
    """The /history command and its "Answer N" button."""

    def __init__(self, history: History, *, say: Say) -> None:
        self._history = history
        self.say = say

    async def history(self, incoming: Incoming, context: Context) -> None:
        """List the chat's recent consultations with their buttons."""
        language = incoming.language
        items = await self._history.recent(incoming.key)
        if not items:
            await self.say(incoming, t(language, "history_empty"))
            return
        await self.say(
            incoming, history_text(items, language), keyboard=history_keyboard(items, language)
        )

    async def show_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Send a consultation's final answer again, as it was first sent."""
        consultation = await consultation_pressed(self._history, incoming, value, press)
        if consultation is None:
            return
        transcript = transcript_of(consultation)
        final = transcript.final_answer
        if final is None:  # not complete: its history entry offers no such button
            await press.answer(t(incoming.language, "export_gone"))
            return
        await press.answer()
        reply = Reply(
            final,
            consultation.id,
            consultation.current_round,
            consultation.max_rounds,
            is_final=True,
            is_complete=True,
            model="",
            knowledge_sources=transcript.final_sources,
            tool_uses=transcript.final_tools,
        )
        language = incoming.language
        await Sender(context.bot, incoming.target).send_markdown(
            final,
            footer=footer_for(reply, language),
            keyboard=reply_keyboard(reply, language),
            appendix=appendix_for(reply, language),
        )


def history_text(items: Sequence[ConsultationSummary], language: str) -> str:
    """The numbered list, newest first."""
    lines = [t(language, "history_title")]
    for number, item in enumerate(items, 1):
        date = datetime.fromtimestamp(item.created_at, UTC)
        lines.append(
            t(
                language,
                "history_item",
                number=number,
                date=f"{date:%Y-%m-%d %H:%M}",
                status=t(language, f"history_{item.status.value}"),
                done=item.current_round,
                rounds=item.max_rounds,
                request=request_line(item.request, SHOWN_REQUEST_CHARS),
            )
        )
    return "\n\n".join(lines)


def history_keyboard(items: Sequence[ConsultationSummary], language: str) -> InlineKeyboardMarkup:
    """A row per consultation: "Answer N" (a complete one), then "Document N"."""
    rows = []
    for number, item in enumerate(items, 1):
        bare = bare_id(item.id)
        if bare is None:
            continue
        row = [
            InlineKeyboardButton(
                t(language, "history_document_button", number=number),
                callback_data=f"{EXPORT}:{bare}",
            )
        ]
        if has_final_answer(item):
            label = t(language, "history_answer_button", number=number)
            row.insert(0, InlineKeyboardButton(label, callback_data=f"{SHOW}:{bare}"))
        rows.append(row)
    return InlineKeyboardMarkup(rows)
