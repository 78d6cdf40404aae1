"""/memory in Telegram: what the bot remembers about a person, deleting it, turning it off.

Invariants:
- a person's memory scope comes from who wrote and where (`scope_of`): their private
  chat's facts in private, their own facts for that group in a group (never another
  member's, never their private ones); a message written as the group itself has none;
- a delete button carries only `mf:<fact id>` and is checked against the presser's own
  scope in the chat it is pressed in: a forged, foreign or stale id deletes nothing;
- /memory off and on are the person's, whatever chat they are sent in;
- the list fits one Telegram message: at most `MAX_FACTS` facts, each shown within
  `SHOWN_FACT_CHARS`.
"""

from __future__ import annotations

import logging

from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from bot.updates.buttons import Press, ignored
from core.domain.facts import MAX_FACT_ID, Fact, MemoryScope, memory_scope
from core.turns.memories import Memories
from i18n.translate import t

log = logging.getLogger(__name__)

DELETE_FACT = "mf"
"""The kind of a delete button's data: `mf:<fact id>`."""
SHOWN_FACT_CHARS = 180
"""20 facts of this length and the words around them fit Telegram's 4096."""
BUTTONS_PER_ROW = 5


def scope_of(incoming: Incoming) -> MemoryScope | None:
    """Whose memory a message or press in this chat reaches (see the module)."""
    if incoming.user_id is None or incoming.anonymous_admin:
        return None
    person = incoming.person(incoming.user_id)
    return memory_scope(person, incoming.group_key if incoming.is_group else None)


class MemoryCommands:
    """/memory and its delete buttons."""

    def __init__(self, memories: Memories, *, say: Say) -> None:
        self._memories = memories
        self.say = say

    async def memory(self, incoming: Incoming, context: Context) -> None:
        """Show what the bot remembers about the sender, or turn it off or on."""
        language = incoming.language
        scope = scope_of(incoming)
        if not self._memories.enabled or scope is None:
            await self.say(incoming, t(language, "memory_disabled"))
            return
        args = [a.lower() for a in context.args or []]
        if args in (["off"], ["on"]):
            enabled = args == ["on"]
            await self._memories.set_enabled(scope, enabled)
            await self.say(
                incoming, t(language, "memory_on_done" if enabled else "memory_off_done")
            )
            return
        if args:
            await self.say(incoming, t(language, "memory_usage"))
            return
        text, keyboard = await self._listing(incoming, scope)
        await self.say(incoming, text, keyboard=keyboard)

    async def delete_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Delete one of the presser's own facts, then show the list as it is now."""
        fact_id = fact_id_of(value)
        scope = scope_of(incoming)
        if fact_id is None or scope is None or not self._memories.enabled:
            ignored(press.query.data, "not a fact of this bot")
            return
        deleted = await self._memories.forget_fact(scope, fact_id)
        language = incoming.language
        await press.answer(t(language, "memory_deleted" if deleted else "memory_not_found"))
        if not deleted:
            return
        text, keyboard = await self._listing(incoming, scope)
        try:
            await press.query.edit_message_text(text, reply_markup=keyboard)
        except TelegramError as exc:  # the list stays as it was; the fact is gone anyway
            log.debug("could not update a memory list: %s", exc)

    async def _listing(
        self, incoming: Incoming, scope: MemoryScope
    ) -> tuple[str, InlineKeyboardMarkup | None]:
        language = incoming.language
        state = await self._memories.state(scope)
        if not state.preferences.enabled:
            return t(language, "memory_is_off"), None
        where = t(language, "memory_in_group") if incoming.is_group else ""
        if not state.facts:
            return t(language, "memory_empty", where=where), None
        text = t(language, "memory_list", where=where, facts=numbered(state.facts))
        return text, delete_keyboard(state.facts)


def numbered(facts: tuple[Fact, ...]) -> str:
    return "\n".join(f"{n}. {shown(fact.text)}" for n, fact in enumerate(facts, start=1))


def shown(text: str) -> str:
    return text if len(text) <= SHOWN_FACT_CHARS else text[: SHOWN_FACT_CHARS - 1] + "…"


def delete_keyboard(facts: tuple[Fact, ...]) -> InlineKeyboardMarkup:
    """One button per fact, labelled with its number in the list."""
    buttons = [
        InlineKeyboardButton(f"🗑 {n}", callback_data=f"{DELETE_FACT}:{fact.id}")
        for n, fact in enumerate(facts, start=1)
    ]
    rows = [buttons[i : i + BUTTONS_PER_ROW] for i in range(0, len(buttons), BUTTONS_PER_ROW)]
    return InlineKeyboardMarkup(rows)


def fact_id_of(value: str) -> int | None:
    """The fact id of a delete button's value, read strictly: plain digits, in range."""
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        return None
    number = int(value)
    return number if 0 < number <= MAX_FACT_ID else None
