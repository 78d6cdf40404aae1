"""Delivering a finished reply as normal messages.

Invariants:
- the final text always goes out as ordinary messages, every part of it, whatever
  happened to the progress updates;
- a part Telegram rejects for its formatting is sent again as plain text, and a part
  hit by flood control or a timeout is retried, so nothing the model wrote is lost;
- a chat that blocked the bot raises `ChatUnavailable` once instead of retrying.

Showing the reply while it is generated lives in `bot.transport.progress`, and the terms shared by
both (`Target`, `AnyBot`, `ChatUnavailable`, `NO_RETRIES`) in `bot.transport.target`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from telegram import InlineKeyboardMarkup, Message, MessageEntity, ReplyParameters
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut
from telegramify_markdown import utf16_len

from bot.transport import message_calls
from bot.transport.flood import retry_seconds
from bot.transport.render import MAX_ENTITIES, TELEGRAM_LIMIT, Part, plain_parts, render
from bot.transport.target import AnyBot, ChatUnavailable, Target

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

RENDER_INLINE_CHARS = 8000
"""Longer replies are rendered on a worker thread, so the event loop keeps serving."""

_RENDER_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="render")
"""Rendering's own threads: never queued behind other work on the loop's default executor."""


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
    return attach(parts, _footer_part(footer))


@functools.lru_cache(maxsize=256)
def _footer_part(footer: str) -> Part:
    """The italic footer as a part; footers repeat ("Round 2 of 10"), and a PTB entity
    costs more to build than to look up."""
    return Part(footer, (MessageEntity(MessageEntity.ITALIC, 0, utf16_len(footer)),))


async def render_parts(markdown: str) -> list[Part]:
    """`render` for delivery: a long answer's conversion runs off the event loop.

    Rendering is pure Python and grows with the text (tens of milliseconds for tens of
    thousands of characters); on a thread of its own, other chats keep being served
    meanwhile, and it never waits behind other blocking work.
    """
    if len(markdown) <= RENDER_INLINE_CHARS:
        return render(markdown, limit=TELEGRAM_LIMIT)
    rendering = functools.partial(render, markdown, limit=TELEGRAM_LIMIT)
    return await asyncio.get_running_loop().run_in_executor(_RENDER_THREADS, rendering)


class Sender:
    """Sends complete texts to one chat with fallbacks and retries."""

    def __init__(self, bot: AnyBot, target: Target, *, attempts: int = 4) -> None:
        self._bot = bot
        self._target = target
        self._attempts = attempts

    @property
    def chat_id(self) -> int:
        return self._target.chat_id

    @property
    def bot(self) -> AnyBot:
        return self._bot

    @property
    def target(self) -> Target:
        return self._target

    async def send_markdown(
        self,
        markdown: str,
        *,
        footer: str | None = None,
        keyboard: InlineKeyboardMarkup | None = None,
        edit: int | None = None,
        appendix: Sequence[Part] = (),
    ) -> list[int]:
        """Deliver `markdown` whole: formatted where Telegram accepts it, plain where not;
        the ids of the messages it is now, in order.

        `appendix` (ready parts, e.g. the list of sources) follows the text, joined to its
        last part where it fits; the footer comes last. With `edit` (the id of a progress
        message in the chat), the first part replaces that message's text.
        """
        parts = await render_parts(markdown)
        for block in appendix:
            parts = attach(parts, block)
        parts = with_footer(parts, footer)
        sent: list[int] = []
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
    ) -> list[int]:
        """Deliver a UI string (no Markdown); the ids of its messages."""
        chunks = plain_parts(text, limit=TELEGRAM_LIMIT)
        sent: list[int] = []
        for index, chunk in enumerate(chunks):
            markup = keyboard if index == len(chunks) - 1 else None
            sent.append(await self._with_retries(self._send_raw, chunk, (), markup, index == 0))
        return sent

    async def send_file(self, filename: str, data: bytes) -> Message:
        """Deliver `data` as a document named `filename` (an upload), as a reply."""
        return await self._with_retries(self._send_document, filename, data)

    async def _send_document(self, filename: str, data: bytes) -> Message:
        target = self._target
        reply_parameters = None
        if target.reply_to is not None:
            reply_parameters = ReplyParameters(target.reply_to, allow_sending_without_reply=True)
        return await self._bot.send_document(
            target.chat_id,
            data,
            filename=filename,
            message_thread_id=target.thread_id,
            reply_parameters=reply_parameters,
        )

    async def _send_part(
        self, part: Part, markup: InlineKeyboardMarkup | None, *, reply: bool
    ) -> list[int]:
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
        self, message_id: int, part: Part, markup: InlineKeyboardMarkup | None
    ) -> int | None:
        """Turn the progress message into the first final part (its id); None if it cannot
        be edited."""
        for entities in (part.entities, ()):
            try:
                await self._with_retries(
                    message_calls.edit_message_text,
                    self._bot,
                    self._target.chat_id,
                    message_id,
                    part.text,
                    entities=entities,
                    markup=markup,
                )
                return message_id
            except BadRequest as exc:
                text = str(exc).lower()
                if "not modified" in text:
                    return message_id
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
    ) -> int:
        target = self._target
        reply_parameters = None
        if reply and target.reply_to is not None:
            reply_parameters = ReplyParameters(target.reply_to, allow_sending_without_reply=True)
        return await message_calls.send_message(
            self._bot,
            target.chat_id,
            text,
            entities=entities,
            thread_id=target.thread_id,
            reply_parameters=reply_parameters,
            markup=markup,
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
