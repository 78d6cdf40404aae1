"""Inline button presses: each answered once, refused in its own popup, limited per person.

Invariants: every press gets exactly one answerCallbackQuery, whatever happens. A refusal
(not allowed here, not an admin, too many presses) is that answer's text, a popup only
the presser sees, never a chat message, so presses cannot spend a group's 20 messages a
minute; so is "temporarily unavailable" when the database fails during the press. Each
person has a budget of presses a minute of their own (`press_limits`, separate from the
message limit so settings buttons never cost a question); past it a press costs that one
answer and nothing else (no admin check, no store, no message).
Data no button of the bot carries (an unknown kind, over Telegram's 64 bytes, a value
the bot never offers) can only be forged: it is answered without text, ignored, and
logged at debug.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from telegram import CallbackQuery, Update
from telegram.error import TelegramError

from bot.transport.chat import Context, Incoming, incoming_of, language_of
from bot.updates.access import UserRateLimits
from core.domain.errors import StoreUnavailable
from i18n.languages import language_for
from i18n.translate import t

log = logging.getLogger(__name__)

MAX_DATA_BYTES = 64
"""Telegram's limit on a button's callback data: longer data was not sent by Telegram's
own clients for a button of this bot."""

LOGGED_DATA_CHARS = 80
"""How much of forged data a log line quotes."""


@dataclass(slots=True)
class Press:
    """A press being handled; `answer` reaches Telegram once, later calls do nothing."""

    query: CallbackQuery
    answered: bool = False

    async def answer(self, text: str | None = None) -> None:
        """Answer the press: stop the client's spinner, showing `text` as a popup if given."""
        if self.answered:
            return
        self.answered = True
        try:
            await self.query.answer(text)
        except TelegramError as exc:  # a press answered too late: the action still runs
            log.debug("could not answer a button press: %s", exc)


ButtonCallback = Callable[[Incoming, str, Context, Press], Awaitable[None]]
"""Called with the part of the button's data after "kind:" ("" when there is none). It
answers `press` itself before slow work (a turn) or once that work is under way, or with a
refusal; else it is answered without text when it returns. A value the bot never offers
it ignores, logged at debug."""


class Buttons:
    """Routes presses by the kind before ":" in their data, within each person's budget."""

    def __init__(
        self,
        callbacks: Mapping[str, ButtonCallback],
        *,
        allowed: Callable[[Incoming], Awaitable[bool]],
        press_limits: UserRateLimits,
        localize: Callable[[Incoming], Awaitable[Incoming]] | None = None,
        scope: int = 0,
        language: str | None = None,
    ) -> None:
        """`scope` is the bot the presses come to (`core.domain.telegram_keys`), `language`
        its own interface language (`BotConfig.language`)."""
        self._scope = scope
        self._language = language
        self._localize = localize
        self._callbacks = callbacks
        self._allowed = allowed
        self._limits = press_limits

    async def on_press(self, update: Update, context: Context) -> None:
        """A press on an inline button: answered once whatever happens (see the module)."""
        query = update.callback_query
        if query is None:
            return
        press = Press(query)
        try:
            await self._handle(update, context, press)
        except StoreUnavailable as exc:  # told in the popup (if still unanswered), not the chat
            log.warning("store unavailable on a button press: %s", exc)
            language = (
                language_for(self._language) if self._language else language_of(query.from_user)
            )
            await press.answer(t(language, "store_unavailable_press"))
        finally:
            await press.answer()

    async def _handle(self, update: Update, context: Context, press: Press) -> None:
        incoming = incoming_of(
            update,
            context.bot.username,
            context.bot.id,
            scope=self._scope,
            language=self._language,
        )
        if incoming is None:  # a press under an inline-mode message: no chat to act in
            ignored(press.query.data, "no message")
            return
        if not await self._allowed(incoming):
            await press.answer(t(incoming.language, "not_allowed"))
            return
        if self._localize is not None:  # a stranger costs no store read
            incoming = await self._localize(incoming)
        if incoming.user_id is not None:
            wait = await self._limits.check(incoming.user_id)
            if wait > 0:
                await press.answer(t(incoming.language, "presses_limited", seconds=int(wait) + 1))
                return
        parsed = parse_data(press.query.data)
        callback = None if parsed is None else self._callbacks.get(parsed[0])
        if parsed is None or callback is None:
            ignored(press.query.data, "no such button")
            return
        await callback(incoming, parsed[1], context, press)


def parse_data(data: str | None) -> tuple[str, str] | None:
    """(kind, value) of a button's data; None when no button could carry it."""
    if not data or len(data.encode()) > MAX_DATA_BYTES:
        return None
    kind, _, value = data.partition(":")
    return kind, value


def ignored(data: str | None, reason: str) -> None:
    """Log a press that is answered and otherwise ignored (its data is cut)."""
    shown = data if data is None or len(data) <= LOGGED_DATA_CHARS else data[:LOGGED_DATA_CHARS]
    size = 0 if data is None else len(data.encode())
    log.debug("ignored a button press (%s): %r, %d bytes", reason, shown, size)
