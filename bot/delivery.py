"""Showing a reply while it is generated, then delivering it as normal messages.

Invariants:
- progress is best effort (drafts in private chats, throttled edits elsewhere) and
  never blocks the answer; the final text always goes out as ordinary messages,
  every part of it, whatever happened to the progress updates;
- a part Telegram rejects for its formatting is sent again as plain text, and a part
  hit by flood control or a timeout is retried, so nothing the model wrote is lost;
- a chat that blocked the bot raises `ChatUnavailable` once instead of retrying.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from telegram import InlineKeyboardMarkup, Message, MessageEntity, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut
from telegram.ext import ExtBot

from bot.flood import retry_seconds
from bot.render import MAX_ENTITIES, Part, plain_parts, render, utf16_len

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

AnyBot = ExtBot[Any]  # ExtBot: the calls pass `rate_limit_args` to the flood control

TELEGRAM_LIMIT = 4096
PROGRESS_LIMIT = 4000  # room for the " …" that marks a cut progress message
PROGRESS_WINDOW = 2 * PROGRESS_LIMIT
"""Characters of a long reply that a progress update renders: enough for one message."""
RENDER_INLINE_CHARS = 8000
"""Longer replies are rendered on a worker thread, so the event loop keeps serving."""
NO_RETRIES = {"max_retries": 0}
_draft_ids = itertools.count(1)


class ChatUnavailable(Exception):
    """The bot may not write to this chat (blocked, kicked, chat deleted)."""


@dataclass(frozen=True, slots=True)
class Target:
    chat_id: int
    thread_id: int | None = None
    reply_to: int | None = None
    private: bool = True


def attach(parts: list[Part], block: Part) -> list[Part]:
    """Append `block` to the last part after a blank line when the two fit one message
    (4096 UTF-16 units, `MAX_ENTITIES` entities), else as a part of its own.

    The block's entities are shifted by where it lands, in UTF-16 units.
    """
    separator = "\n\n"
    last = parts[-1] if parts else None
    if (
        last is not None
        and utf16_len(last.text + separator + block.text) <= TELEGRAM_LIMIT
        and len(last.entities) + len(block.entities) <= MAX_ENTITIES
    ):
        offset = utf16_len(last.text + separator)
        moved = tuple(_shifted(entity, offset) for entity in block.entities)
        return [*parts[:-1], Part(last.text + separator + block.text, (*last.entities, *moved))]
    return [*parts, block]


def _shifted(entity: MessageEntity, offset: int) -> MessageEntity:
    return MessageEntity(
        entity.type,
        entity.offset + offset,
        entity.length,
        url=entity.url,
        language=entity.language,
        custom_emoji_id=entity.custom_emoji_id,
    )


def with_footer(parts: list[Part], footer: str | None) -> list[Part]:
    """Append an italic status line (e.g. "Round 1 of 3") to the last part, or as its own part."""
    if not footer:
        return parts
    return attach(parts, Part(footer, (MessageEntity(MessageEntity.ITALIC, 0, utf16_len(footer)),)))


async def render_parts(markdown: str) -> list[Part]:
    """`render` for delivery: a long answer's conversion runs off the event loop.

    Rendering is pure Python and grows with the text (tens of milliseconds for tens of
    thousands of characters); on a thread, other chats keep being served meanwhile.
    """
    if len(markdown) <= RENDER_INLINE_CHARS:
        return render(markdown, limit=TELEGRAM_LIMIT)
    return await asyncio.to_thread(render, markdown, limit=TELEGRAM_LIMIT)


def progress_window(text: str, *, from_end: bool) -> tuple[str, bool]:
    """The slice of a growing reply that one progress update renders, and whether it is cut.

    Progress shows one message: the end of the reply in a draft, its start in an
    edited message. Rendering only a window of `PROGRESS_WINDOW` characters keeps
    each update's cost bounded however long the reply grows. The window starts (or
    ends) at a line break where one is near, and a window starting inside a code
    block reopens it, so the slice renders like the same lines of the whole text.
    """
    if len(text) <= PROGRESS_WINDOW:
        return text, False
    if not from_end:
        end = text.rfind("\n", PROGRESS_LIMIT, PROGRESS_WINDOW)
        return text[: end if end != -1 else PROGRESS_WINDOW], True
    start = len(text) - PROGRESS_WINDOW
    newline = text.find("\n", start, start + PROGRESS_LIMIT)
    if newline != -1:
        start = newline + 1
    window = text[start:]
    if text.count("```", 0, start) % 2:
        window = "```\n" + window
    return window, True


class Sender:
    """Sends complete texts to one chat with fallbacks and retries."""

    def __init__(self, bot: AnyBot, target: Target, *, attempts: int = 4) -> None:
        self._bot = bot
        self._target = target
        self._attempts = attempts

    @property
    def chat_id(self) -> int:
        return self._target.chat_id

    async def send_markdown(
        self,
        markdown: str,
        *,
        footer: str | None = None,
        keyboard: InlineKeyboardMarkup | None = None,
        edit: Message | None = None,
        appendix: Sequence[Part] = (),
    ) -> list[Message]:
        """Deliver `markdown` whole: formatted where Telegram accepts it, plain where not.

        `appendix` (ready parts, e.g. the list of sources) follows the text, joined to its
        last part where it fits; the footer comes last. With `edit`, the first part
        replaces that (progress) message's text.
        """
        parts = await render_parts(markdown)
        for block in appendix:
            parts = attach(parts, block)
        parts = with_footer(parts, footer)
        sent: list[Message] = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            markup = keyboard if last else None
            if index == 0 and edit is not None:
                edited = await self._edit_part(edit, part, markup)
                if edited is not None:
                    sent.append(edited)
                    continue
            sent.extend(await self._send_part(part, markup, reply=index == 0))
        return sent

    async def send_text(
        self, text: str, *, keyboard: InlineKeyboardMarkup | None = None
    ) -> list[Message]:
        """Deliver a UI string (no Markdown)."""
        chunks = plain_parts(text, limit=TELEGRAM_LIMIT)
        sent: list[Message] = []
        for index, chunk in enumerate(chunks):
            markup = keyboard if index == len(chunks) - 1 else None
            sent.append(await self._with_retries(self._send_raw, chunk, (), markup, index == 0))
        return sent

    async def _send_part(
        self, part: Part, markup: InlineKeyboardMarkup | None, *, reply: bool
    ) -> list[Message]:
        try:
            return [
                await self._with_retries(self._send_raw, part.text, part.entities, markup, reply)
            ]
        except BadRequest as exc:
            if "too long" not in str(exc).lower() and "entit" not in str(exc).lower():
                raise
            log.warning("formatting rejected (%s); sending plain text", exc)
        sent = []
        chunks = plain_parts(part.text, limit=TELEGRAM_LIMIT)
        for index, chunk in enumerate(chunks):
            chunk_markup = markup if index == len(chunks) - 1 else None
            sent.append(await self._with_retries(self._send_raw, chunk, (), chunk_markup, reply))
        return sent

    async def _edit_part(
        self, message: Message, part: Part, markup: InlineKeyboardMarkup | None
    ) -> Message | None:
        """Turn the progress message into the first final part; None if it cannot be edited."""
        for entities in (part.entities, ()):
            try:
                result = await self._with_retries(
                    self._bot.edit_message_text,
                    part.text,
                    chat_id=message.chat_id,
                    message_id=message.message_id,
                    entities=entities or None,
                    reply_markup=markup,
                )
                return result if isinstance(result, Message) else message
            except BadRequest as exc:
                text = str(exc).lower()
                if "not modified" in text:
                    return message
                if "entit" in text and entities:
                    continue  # retry the edit as plain text
                log.info("could not edit progress message: %s", exc)
                return None
        return None

    async def _send_raw(
        self,
        text: str,
        entities: Sequence[MessageEntity],
        markup: InlineKeyboardMarkup | None,
        reply: bool,
    ) -> Message:
        target = self._target
        reply_parameters = None
        if reply and target.reply_to is not None:
            reply_parameters = ReplyParameters(target.reply_to, allow_sending_without_reply=True)
        return await self._bot.send_message(
            target.chat_id,
            text,
            entities=list(entities) or None,
            message_thread_id=target.thread_id,
            reply_parameters=reply_parameters,
            reply_markup=markup,
            link_preview_options=None,
        )

    async def _with_retries(
        self, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Retry flood control and timeouts; stop at once when the chat is gone."""
        for attempt in range(1, self._attempts + 1):
            try:
                return await call(*args, **kwargs)
            except Forbidden as exc:
                raise ChatUnavailable(str(exc)) from exc
            except RetryAfter as exc:
                if attempt == self._attempts:
                    raise
                await asyncio.sleep(retry_seconds(exc) + 0.1)
            except (TimedOut, NetworkError) as exc:
                if isinstance(exc, BadRequest) or attempt == self._attempts:
                    raise
                await asyncio.sleep(0.5 * attempt)
        raise AssertionError("unreachable")


class Progress:
    """Streams partial text into the chat: drafts in private chats, edits elsewhere.

    The first update waits `first_delay` so a reply that completes at once costs no
    extra request; later ones are at least `interval` apart. The typing action is
    sent after `typing_delay` and renewed every 4 s until `close()`.
    """

    def __init__(
        self,
        bot: AnyBot,
        target: Target,
        *,
        interval: float = 1.0,
        first_delay: float = 0.25,
        typing_delay: float = 0.3,
    ) -> None:
        self._bot = bot
        self._target = target
        self._interval = interval
        self._first_delay = first_delay
        self._typing_delay = typing_delay
        self._latest = ""
        self._shown = ""
        self._changed = asyncio.Event()
        self._draft_id = next(_draft_ids)
        self.message: Message | None = None  # the progress message (edits mode)
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight: asyncio.Future[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._keep_typing()))

    async def update(self, text: str) -> None:
        """Called with the whole reply so far; returns at once."""
        self._latest = text
        self._changed.set()
        if len(self._tasks) < 2 and not self._closed:
            self._tasks.append(asyncio.create_task(self._pump()))

    async def close(self) -> None:
        """Stop typing and progress updates (the final delivery follows).

        A progress request already on its way is let finish, so the final delivery
        knows about a progress message that reached the chat and edits it instead
        of leaving a stray partial copy behind.
        """
        self._closed = True
        if self._in_flight is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._in_flight), timeout=10)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _keep_typing(self) -> None:
        await asyncio.sleep(self._typing_delay)
        while True:
            with contextlib.suppress(Exception):
                await self._bot.send_chat_action(
                    self._target.chat_id,
                    ChatAction.TYPING,
                    message_thread_id=self._target.thread_id,
                    rate_limit_args=NO_RETRIES,
                )
            await asyncio.sleep(4.0)

    async def _pump(self) -> None:
        await asyncio.sleep(self._first_delay)
        while True:
            await self._changed.wait()
            self._changed.clear()
            text = self._latest
            if text.strip() and text != self._shown and not self._closed:
                try:
                    self._in_flight = asyncio.ensure_future(self._show(text))
                    await asyncio.shield(self._in_flight)
                    self._shown = text
                except RetryAfter as exc:
                    await asyncio.sleep(retry_seconds(exc))
                except Forbidden:
                    return
                except Exception as exc:  # progress is cosmetic; the final delivery decides
                    log.debug("progress update failed: %s", exc)
                finally:
                    self._in_flight = None
            await asyncio.sleep(self._interval)

    async def _show(self, text: str) -> None:
        """Show `text` formatted; if Telegram refuses the formatting, show it plain."""
        part = self._progress_part(text)
        try:
            await self._send_progress(part)
        except BadRequest as exc:
            if not part.entities or "entit" not in str(exc).lower():
                raise
            await self._send_progress(Part(part.text, ()))

    def _progress_part(self, text: str) -> Part:
        """The formatted slice worth showing: the end in a draft, the start in a message."""
        text, cut = progress_window(text, from_end=self._target.private)
        try:
            parts = render(text, limit=PROGRESS_LIMIT)
        except Exception:  # a half-written answer must never break the progress display
            log.debug("progress rendering failed; showing plain text", exc_info=True)
            parts = [Part(chunk, ()) for chunk in plain_parts(text, limit=PROGRESS_LIMIT)]
        if not parts:
            return Part(text[:PROGRESS_LIMIT], ())
        if self._target.private:
            return parts[-1]
        first = parts[0]
        return Part(first.text + " …", first.entities) if len(parts) > 1 or cut else first

    async def _send_progress(self, part: Part) -> None:
        target = self._target
        entities = list(part.entities) or None
        if target.private:
            await self._bot.send_message_draft(
                target.chat_id,
                self._draft_id,
                part.text,
                entities=entities,
                rate_limit_args=NO_RETRIES,
            )
            return
        if self.message is None:
            self.message = await self._bot.send_message(
                target.chat_id,
                part.text,
                entities=entities,
                message_thread_id=target.thread_id,
                reply_parameters=ReplyParameters(target.reply_to, allow_sending_without_reply=True)
                if target.reply_to
                else None,
                rate_limit_args=NO_RETRIES,
            )
            return
        try:
            await self._bot.edit_message_text(
                part.text,
                chat_id=self.message.chat_id,
                message_id=self.message.message_id,
                entities=entities,
                rate_limit_args=NO_RETRIES,
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise
