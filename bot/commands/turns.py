"""Running one consultation turn in a chat: progress while the model works, then the reply.

Every outcome ends in a message the user can act on: the answer with where the
consultation stands, or a localized explanation. Nothing here retries the model:
a failed turn stays open in the store for /retry or the next message.

A final answer delivered (not replayed) is remembered afterwards (`remember`, client
memory): in a task of its own that the application awaits when it stops, so the answer
never waits for it; its failure is logged, never shown; the first time facts are kept for
a person the chat is told once how to see and delete them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from telegram.error import TelegramError

from bot.commands.quota import final_text, refused_text
from bot.transport.delivery import Sender
from bot.transport.keyboards import reply_keyboard
from bot.transport.outage import OutageNotices, store_failed
from bot.transport.progress import Live, Progress
from bot.transport.render import Part, knowledge_parts, sources_parts, tools_parts
from bot.transport.round_keyboards import KeyboardMessages, RoundKeyboards
from bot.transport.target import AnyBot, ChatUnavailable, Target
from bot.transport.undelivered import MemoryUndelivered, UndeliveredReplies
from core.domain.errors import (
    NOT_RETRYABLE,
    ModelError,
    ModelErrorKind,
    NoActiveConsultation,
    NothingToRetry,
    StoreUnavailable,
    TurnCancelled,
    TurnDidNotHappen,
    TurnSuperseded,
)
from core.domain.facts import MemoryUpdate
from core.domain.outcomes import Notice, Reply
from core.domain.quotas import QuotaExceeded
from core.domain.tool_uses import server_tool, used_line
from core.domain.tools import ToolSpec, ToolUse
from core.primitives.expiring import ExpiringDict
from i18n.translate import t

log = logging.getLogger(__name__)


FORGET_AFTER = 24 * 3600.0
"""A chat that refused the bot is forgotten after a day without news of it: memory holds
only the last day's chats."""

Action = Callable[[Live], Awaitable[Reply]]
"""A service call, given the callbacks that show its reply while it is written."""
Remember = Callable[[str], Awaitable[MemoryUpdate]]
"""`core.turns.memories.Memories.remember`: a completed consultation's facts kept."""
Spawn = Callable[[Coroutine[Any, Any, None]], object]
"""Runs a coroutine as a task its owner awaits on shutdown (`Application.create_task`)."""


def footer_for(reply: Reply, language: str) -> str:
    """The unobtrusive status line under a reply; a reply the model did not finish, or
    wrote without seeing the user's photo, says so. Under a final answer or a follow-up's,
    whether (and how) it can be asked about."""
    if reply.follow_up:
        limit = reply.follow_up + (reply.follow_ups_left or 0)
        lines = [t(language, "follow_up_label", number=reply.follow_up, limit=limit)]
    elif reply.is_final:
        lines = [t(language, "final_label")]
    else:
        lines = [t(language, "round_label", round=reply.round, max_rounds=reply.max_rounds)]
    if Notice.ANSWER_INCOMPLETE in reply.notices:
        lines.append(t(language, "incomplete"))
    if Notice.IMAGES_NOT_SEEN in reply.notices:
        lines.append(t(language, "images_not_seen"))
    if reply.quota is not None:
        lines.append(final_text(reply.quota, language))
    if reply.is_final and reply.is_complete:
        lines.append(t(language, _closing(reply), left=reply.follow_ups_left))
    return "\n".join(lines)


def appendix_for(reply: Reply, language: str) -> list[Part]:
    """What follows a reply's text: the provider's sources, the knowledge-base passages it
    cites, then the tools it used (each list only when it has any)."""
    return [
        *sources_parts(t(language, "sources"), reply.sources),
        *knowledge_parts(
            t(language, "knowledge_sources"),
            reply.knowledge_sources,
            lambda page: t(language, "knowledge_page", page=page),
        ),
        *tools_parts(t(language, "tools_used"), [tool_line(u, language) for u in reply.tool_uses]),
    ]


def tool_line(use: ToolUse, language: str) -> str:
    """One tool a reply used, as listed under it: `time · get_current_time (timezone=UTC)`,
    marked when it gave no result."""
    line = used_line(use)
    return line if use.ok else t(language, "tool_failed", call=line)


def tool_running_text(specs: Sequence[ToolSpec], language: str) -> str:
    """The progress line while `specs` run: "Looking up: time · get_current_time…"
    (several: "Looking up: time · get_current_time, docs · search…")."""
    names = ", ".join(server_tool(spec.server, spec.tool) for spec in specs)
    return t(language, "tool_running", tool=names)


def _closing(reply: Reply) -> str:
    """The key of what a finished reply's footer ends with."""
    if reply.follow_up:
        return "follow_ups_left" if reply.follow_ups_left else "follow_ups_done"
    return "complete_final" if reply.follow_ups_left == 0 else "complete"


def model_error_text(exc: ModelError, language: str) -> str:
    """What the user reads: for an error no retry can fix, what helps instead of /retry."""
    if exc.kind in NOT_RETRYABLE:
        return t(language, f"model_{exc.kind.value}")
    return t(language, "model_error", reason=t(language, f"reason_{exc.kind.value}"))


def did_not_happen_text(
    exc: TurnDidNotHappen, chat_id: int, language: str, outage: OutageNotices
) -> str | None:
    """Log a turn of `chat_id` that did not happen and return what the chat is told: None
    when whoever ended the turn answers for it, or when an outage was told there within the
    minute (`bot.transport.outage`). Every member of the family is worded here."""
    if isinstance(exc, ModelError):
        # A setting only the operator can fix is an error; the detail names the setting.
        level = logging.ERROR if exc.kind is ModelErrorKind.MISCONFIGURED else logging.WARNING
        log.log(level, "model error in chat %s: %s", chat_id, exc)
        return model_error_text(exc, language)
    if isinstance(exc, StoreUnavailable):  # nothing half-stored: the same message works later
        log.warning("store unavailable in chat %s: %s", chat_id, exc)
        notice = store_failed()
        if outage.may_tell(chat_id):
            return t(language, notice)
        log.debug("outage notice in chat %s not repeated", chat_id)
        return None
    if isinstance(exc, TurnCancelled):  # /reset stopped it and answers for itself
        log.info("turn in chat %s stopped by a reset", chat_id)
        return None
    if isinstance(exc, TurnSuperseded):  # whoever advanced the round answered the user
        log.info("turn in chat %s superseded: %s", chat_id, exc)
        return None
    raise TypeError(f"no wording for {type(exc).__name__}")


class TurnRunner:
    def __init__(
        self,
        *,
        ttl_minutes: int,
        private_interval: float = 1.0,
        group_interval: float = 3.0,
        on_reply: Callable[[Reply], None] | None = None,
        undelivered: UndeliveredReplies | None = None,
        outage: OutageNotices | None = None,
        clock: Callable[[], float] = time.monotonic,
        remember: Remember | None = None,
        spawn: Spawn | None = None,
        keyboards: KeyboardMessages | None = None,
        scope: int = 0,
        offer_plans: bool = False,
    ) -> None:
        """`scope` is the bot whose chats these are: the keyboards are kept under it. With
        `offer_plans` (plans are on sale) a quota refusal points to /plans."""
        self.offer_plans = offer_plans
        self._on_reply = on_reply
        self._remember = remember
        self._spawn = spawn
        self._outage = OutageNotices(clock=clock) if outage is None else outage
        self._ttl_minutes = ttl_minutes
        self._private_interval = private_interval
        self._group_interval = group_interval
        self._blocked: ExpiringDict[int, bool] = ExpiringDict(FORGET_AFTER, clock=clock)
        # Replies stored but not delivered (Telegram unreachable through every retry), by
        # conversation; sent before that conversation's next turn (see bot.transport.undelivered).
        self._undelivered = MemoryUndelivered(clock=clock) if undelivered is None else undelivered
        # Which message carries each conversation's round keyboard, taken away by the next
        # reply (see bot.transport.round_keyboards).
        self._keyboards = RoundKeyboards(keyboards, scope=scope)

    async def run(self, bot: AnyBot, target: Target, language: str, action: Action) -> Reply | None:
        """Run `action` (a service call showing its reply through `Live`) and deliver its
        outcome."""
        sender = Sender(bot, target)
        await self._redeliver(sender, target)
        interval = self._private_interval if target.private else self._group_interval
        progress = Progress(
            bot,
            target,
            interval=interval,
            tool_text=lambda specs: tool_running_text(specs, language),
        )
        progress.start()
        try:
            try:
                reply = await action(progress.live)
            finally:
                await progress.close()
            if self._on_reply is not None:
                self._on_reply(reply)
            try:
                await self._deliver(sender, reply, language, progress)
            except TelegramError as exc:  # ChatUnavailable is not a TelegramError
                log.error("reply in chat %s not delivered, kept for later: %s", target.chat_id, exc)
                await self._keep(target, reply, language)
            else:
                self._after_delivery(sender, reply, language)
            return reply
        except TurnDidNotHappen as exc:
            text = did_not_happen_text(exc, target.chat_id, language, self._outage)
            if text is not None:
                await self._say(sender, text)
        except NothingToRetry:
            await self._say(sender, t(language, "retry_none"))
        except NoActiveConsultation:
            await self._say(sender, t(language, "answer_none"))
        except QuotaExceeded as exc:  # refused before anything was stored
            await self._say(sender, refused_text(exc.hit, language, offer_plans=self.offer_plans))
        except ChatUnavailable as exc:
            self._note_blocked(target.chat_id, exc)
        return None

    def _after_delivery(self, sender: Sender, reply: Reply, language: str) -> None:
        """Remember a completed consultation in the background (see the module)."""
        if self._remember is None or self._spawn is None:
            return
        if reply.completed_now:
            self._spawn(self._remember_and_tell(sender, reply.consultation_id, language))

    async def _remember_and_tell(self, sender: Sender, consultation_id: str, language: str) -> None:
        assert self._remember is not None
        try:
            update = await self._remember(consultation_id)
        except Exception as exc:  # a nicety: the answer was delivered, nothing else depends on it
            log.warning("consultation %s not remembered: %s", consultation_id, exc)
            return
        if update.first_time:
            await self._say(sender, t(language, "memory_notice"))

    async def _redeliver(self, sender: Sender, target: Target) -> None:
        """Send a reply this conversation never received, before anything new.

        When the kept replies cannot be read (the database is down) the turn goes on
        without them: the reply is in the consultation's history anyway.
        """
        try:
            pending = await self._undelivered.pop(target.chat_id, target.thread_id)
        except StoreUnavailable as exc:
            log.warning("undelivered reply of chat %s not read: %s", target.chat_id, exc)
            return
        if pending is None:
            return
        reply, language = pending
        try:
            await self._deliver(sender, reply, language, None)
        except TelegramError:
            await self._keep(target, reply, language)
            raise

    async def _keep(self, target: Target, reply: Reply, language: str) -> None:
        try:
            await self._undelivered.put(target.chat_id, target.thread_id, reply, language)
        except StoreUnavailable as exc:
            log.warning("undelivered reply of chat %s not kept: %s", target.chat_id, exc)

    async def _deliver(
        self, sender: Sender, reply: Reply, language: str, progress: Progress | None
    ) -> None:
        if Notice.PREVIOUS_EXPIRED in reply.notices:
            await sender.send_text(t(language, "expired", minutes=self._ttl_minutes))
        sent = await sender.send_markdown(
            reply.text,
            footer=footer_for(reply, language),
            keyboard=reply_keyboard(reply, language, follow_up=reply.follow_ups_left != 0),
            edit=progress.message_id if progress is not None else None,
            appendix=appendix_for(reply, language),
        )
        await self._keyboards.delivered(sender.bot, sender.target, reply, sent)

    async def _say(self, sender: Sender, text: str) -> None:
        """Send an explanation; a partial reply already shown stays above it."""
        try:
            await sender.send_text(text)
        except ChatUnavailable as exc:
            self._note_blocked(sender.chat_id, exc)

    def _note_blocked(self, chat_id: int, exc: Exception) -> None:
        """Log a chat that refuses the bot once; later failures stay quiet."""
        if chat_id not in self._blocked:
            self._blocked[chat_id] = True
            log.info("chat %s does not accept messages: %s", chat_id, exc)

    async def forget_chat(self, chat_id: int) -> int:
        """Drop what is kept for the chat's conversations (it asked to be forgotten): the
        replies not delivered, and which messages carry round keyboards; how many replies
        went."""
        await self._keyboards.forget_chat(chat_id)
        return await self._undelivered.forget_chat(chat_id)

    def forget_blocked(self, chat_id: int) -> None:
        """The chat wrote to us again, so it accepts messages again."""
        self._blocked.discard(chat_id)
