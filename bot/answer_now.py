"""The final answer now, asked for with /answer or the button under a clarifying question.

One path for both, so the command and the button always behave the same.
"""

from __future__ import annotations

from bot.chat import Incoming
from bot.target import AnyBot
from bot.turns import TurnRunner
from core.outcomes import Reply
from core.ports import OnText
from core.service import ConsultationService


class AnswerNow:
    def __init__(self, service: ConsultationService, turns: TurnRunner, bot: AnyBot) -> None:
        self._service = service
        self._turns = turns
        self._bot = bot

    async def __call__(self, incoming: Incoming) -> None:
        """Close the consultation with its final answer, in the asker's language."""

        async def answer(on_text: OnText) -> Reply:
            return await self._service.answer_now(
                incoming.key,
                author=incoming.author,
                is_group=incoming.is_group,
                on_text=on_text,
                language=incoming.language,
                turn_id=incoming.turn_id,  # handled twice, one turn (see Incoming.turn_id)
            )

        await self._turns.run(self._bot, incoming.target, incoming.language, answer)
