"""A turn made of a file: a voice note, a document or a photo (with its caption as words).

Order, and why: the size is checked before anything is fetched (a 25 MB voice note is
refused without a download, and so is a document whose name or type already says it is an
archive, a program or a video), then the file is downloaded and read into a `MessageInput`
(transcribed, its text extracted, or an image), and only then does the turn reach the
engine. A refusal or a failed download is answered in the user's language (in a group at
most once per person a minute, `bot.commands.refusals`) and nothing is stored, so no round is used
and the user can simply send again. A transcript is shown
to the user before the answer, so a misheard word is seen next to the reply it caused;
a document cut to the text budget is said once, with the limit.

A photo while the model cannot see images, sent with a caption, is answered from the
caption alone, as before photos were read; without one the user is asked for words.

A file sent as a reply to the bot's final answer (`bot.commands.follow_ups.Aim`) is a follow-up
of that consultation, read the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol

from bot.commands.follow_ups import Aim, FollowUpTurns
from bot.commands.memory import scope_of
from bot.commands.quota import refused_text
from bot.commands.refusals import Refusals
from bot.commands.turns import TurnRunner
from bot.commands.usage import payer_of
from bot.transport.chat import Context, Incoming
from bot.transport.config import BotConfig
from bot.transport.files import DownloadFailed, TelegramFile, download
from bot.transport.progress import Live, Progress
from bot.transport.say import Say
from bot.transport.target import AnyBot, Target
from core.domain.asking import UserMessage
from core.domain.attachments import Attachment, MessageInput, Transcription
from core.domain.blank import is_blank
from core.domain.errors import AttachmentProblem, AttachmentRefused, EmptyMessage, StoreUnavailable
from core.domain.outcomes import Reply
from core.domain.quotas import QuotaExceeded
from core.domain.telegram_keys import file_chat_key, file_user_key
from core.turns.engine import Engine
from i18n.translate import t
from media.documents import SUPPORTED_DOCUMENTS
from media.intake import Intake
from media.text import cut

log = logging.getLogger(__name__)

HEARD_CHARS = 200
"""How much of a transcript the user is shown before the answer."""


class TextTurn(Protocol):
    """The turn of a message's words alone (`bot.handlers.Handlers.text_turn`)."""

    def __call__(
        self, incoming: Incoming, context: Context, *, aim: Aim | None = None
    ) -> Awaitable[None]: ...


class FileTurns:
    """Runs the turn of an accepted message that carries a file (`Incoming.file`)."""

    def __init__(
        self,
        engine: Engine,
        config: BotConfig,
        intake: Intake,
        *,
        turns: TurnRunner,
        say: Say,
        refuse: Refusals,
        text_turn: TextTurn,
        follow_ups: FollowUpTurns,
    ) -> None:
        self.engine = engine
        self.config = config
        self.intake = intake
        self.turns = turns
        self.say = say
        self.refuse = refuse
        self.text_turn = text_turn  # the caption alone, when the photo cannot be seen
        self.follow_ups = follow_ups

    async def __call__(
        self, incoming: Incoming, context: Context, *, aim: Aim | None = None
    ) -> None:
        """The file's turn; with `aim`, the follow-up it asks."""
        file = incoming.file
        assert file is not None
        language = incoming.language
        try:  # before the file is read: a refused person's voice note is not transcribed
            await self.engine.turns.admits(
                incoming.key, payer_of(incoming), follow_up=aim is not None
            )
        except QuotaExceeded as exc:
            offer = self.turns.offer_plans
            await self.say(incoming, refused_text(exc.hit, language, offer_plans=offer))
            return
        try:
            message_input = await self._read(incoming, file, context)
        except AttachmentRefused as refused:
            log.info("file %r in chat %s refused: %s", file.name, incoming.chat_id, refused)
            if refused.problem is AttachmentProblem.VISION_OFF and not is_blank(incoming.text):
                await self.text_turn(incoming, context, aim=aim)
            else:
                await self.refuse(incoming, refusal_text(refused, language))
            return
        except DownloadFailed as exc:
            log.warning("file %r in chat %s not downloaded: %s", file.name, incoming.chat_id, exc)
            await self.refuse(incoming, t(language, "download_failed"))
            return
        if message_input.transcription is not None:
            await self._charge(incoming, message_input.transcription)
        message_input = await self._within_input_limit(incoming, message_input)
        if message_input.transcript is not None:
            await self.say(incoming, t(language, "heard", text=excerpt(message_input.transcript)))
        if message_input.documents_cut:
            limit = self.intake.config.max_document_chars
            whole = all(document.complete for document in message_input.documents)
            notice = "document_cut" if whole else "document_not_read_whole"
            await self.say(incoming, t(language, notice, limit=limit))

        async def ask(live: Live) -> Reply:
            return await self.engine.turns.ask(
                UserMessage(
                    incoming.key,
                    message_input.stored_text,
                    images=message_input.images,
                    author=incoming.author,
                    author_id=incoming.user_id,
                    is_group=incoming.is_group,
                    on_text=live.on_text,
                    on_tool=live.on_tool,
                    turn_id=incoming.turn_id,
                    memory=scope_of(incoming),
                    payer=payer_of(incoming),
                )
            )

        try:
            if aim is not None:
                await self.follow_ups.run(
                    incoming, context, message_input.stored_text, aim, images=message_input.images
                )
            else:
                await self.turns.run(context.bot, incoming.target, language, ask)
        except EmptyMessage:
            await self.refuse(incoming, t(language, "empty"))

    async def _read(self, incoming: Incoming, file: TelegramFile, context: Context) -> MessageInput:
        """The file checked, fetched and read; raises AttachmentRefused or DownloadFailed."""
        kind = file.kind
        if kind == "document" and self.intake.declared_kind(file.name, file.mime) == "unsupported":
            kind = "unsupported"  # an archive, a program, a video: refused unfetched
        self.intake.check_size(kind, file.file_size, name=file.name)
        async with typing(context.bot, incoming.target):  # a transcription takes a while
            data = await download(
                context.bot,
                file,
                timeout=self.config.download_timeout,
                max_bytes=self.intake.byte_limit(kind),
            )
            attachment = Attachment(file.name, file.mime, data, kind_hint=file.kind_hint)
            return await self.intake.read(
                incoming.text, [attachment], language=incoming.language, owner=_owner(incoming)
            )

    async def _charge(self, incoming: Incoming, heard: Transcription) -> None:
        """Count the transcription; a store that cannot take the count does not cost the
        user their turn (the turn's own write then says whether the store is back)."""
        try:
            await self.engine.figures.charge_transcription(
                incoming.key, heard, payer=payer_of(incoming)
            )
        except StoreUnavailable as exc:
            log.warning("transcription in chat %s not counted: %s", incoming.chat_id, exc)

    async def _within_input_limit(
        self, incoming: Incoming, message_input: MessageInput
    ) -> MessageInput:
        """The typed words and the transcript cut to the input limit (the user is told)."""
        limit = self.config.max_input_chars
        transcript = message_input.transcript
        if len(message_input.words) <= limit and (transcript is None or len(transcript) <= limit):
            return message_input
        await self.say(incoming, t(incoming.language, "truncated", limit=limit))
        return dataclasses.replace(
            message_input,
            words=message_input.words[:limit],
            transcript=None if transcript is None else transcript[:limit],
        )


def refusal_text(refused: AttachmentRefused, language: str) -> str:
    """Why the file was not taken, and what the user can do instead."""
    problem = refused.problem
    if problem is AttachmentProblem.TOO_LARGE:
        return t(language, "file_too_large", limit=size_text(refused.limit, language))
    if problem is AttachmentProblem.UNSUPPORTED:
        return t(language, "file_unsupported", supported=SUPPORTED_DOCUMENTS)
    if problem is AttachmentProblem.VISION_OFF:
        return t(language, "text_only")
    return t(language, f"file_{problem.value}")


@contextlib.asynccontextmanager
async def typing(bot: AnyBot, target: Target) -> AsyncIterator[None]:
    """ "typing…" in the chat while the block runs (sent and renewed by `Progress`)."""
    progress = Progress(bot, target, typing_delay=0.0)
    progress.start()
    try:
        yield
    finally:
        await progress.close()


def size_text(limit: int | None, language: str) -> str:
    """A byte limit as users read it: "20 MB", "2.5 MB", "500 KB" (decimal units)."""
    if limit is None:
        return "?"
    if limit >= 1_000_000:
        return t(language, "megabytes", value=f"{round(limit / 1_000_000, 1):g}")
    return t(language, "kilobytes", value=f"{max(round(limit / 1000), 1)}")


def excerpt(text: str, limit: int = HEARD_CHARS) -> str:
    """`text` on one line, cut at a word near `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    kept, omitted = cut(flat, limit)
    return kept.rstrip(" ,.;:") + "…" if omitted else flat


def _owner(incoming: Incoming) -> str:
    """Whose files these are, for the readers' per-owner share: the user, or the chat
    when no user is known (a channel, an anonymous admin)."""
    if incoming.user_id is not None and not incoming.anonymous_admin:
        return file_user_key(incoming.user_id, incoming.scope)
    return file_chat_key(incoming.key, incoming.scope)
