"""/export, /export N and the "Document" button: a consultation sent as a DOCX and a
Markdown file.

Invariants: only a consultation of the chat the command or press came from is sent (an
id of another chat's consultation sends nothing, told like a consultation no longer
kept); N is the number /history shows (1 = newest), and a number outside it gets the
valid range, nothing sent; the DOCX is built on one thread of its own, a document at a
time, so the event loop never waits for it (nor for several at once); both files go as
replies, named from the title (`core.prompting.file_names`: safe characters, at most 64 with the
extension), while the chat shows "sending a file"; their labels are in the interface
language of the person who asked, the language of the bot's messages to them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid

from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.transport.chat import Context, Incoming
from bot.transport.delivery import Sender
from bot.transport.keyboards import consultation_of
from bot.transport.say import Say
from bot.transport.target import AnyBot, ChatUnavailable, Target
from bot.updates.buttons import Press, ignored
from core.domain.consultation import Consultation
from core.prompting.file_names import readable_stem
from core.turns.history import History, numbered
from core.turns.transcript import render_markdown, transcript_of
from i18n.document_labels import document_labels
from i18n.translate import t

log = logging.getLogger(__name__)


_NUMBER = re.compile("[1-9][0-9]{0,3}")
"""A history number as typed: what /history can show, and no more digits than that."""


class Exports:
    """Sends a chat's consultations as files."""

    def __init__(self, history: History, *, say: Say) -> None:
        self.history = history
        self.say = say

    async def export(self, incoming: Incoming, context: Context) -> None:
        """Send the latest consultation, or number N of /history, as DOCX and Markdown."""
        language = incoming.language
        args = context.args or []
        if len(args) > 1 or (args and _NUMBER.fullmatch(args[0]) is None):
            await self.say(incoming, t(language, "export_usage"))
            return
        if not args:
            consultation = await self.history.find(incoming.key, None)
        else:
            history = await self.history.recent(incoming.key)
            chosen = numbered(history, int(args[0]))
            if chosen is None and history:
                text = t(language, "export_range", number=args[0], count=len(history))
                await self.say(incoming, text)
                return
            consultation = (
                None if chosen is None else await self.history.find(incoming.key, chosen.id)
            )
        if consultation is None:
            await self.say(incoming, t(language, "export_none"))
            return
        await self.send(context.bot, replying(incoming), consultation, language)

    async def export_button(
        self, incoming: Incoming, value: str, context: Context, press: Press
    ) -> None:
        """Send the consultation a "Document" button names, if it is this chat's."""
        consultation = await consultation_pressed(self.history, incoming, value, press)
        if consultation is None:
            return
        await press.answer()  # before the files: the client stops waiting at once
        await self.send(context.bot, replying(incoming), consultation, incoming.language)

    async def send(
        self, bot: AnyBot, target: Target, consultation: Consultation, language: str
    ) -> None:
        """Both files, labelled in the person's interface `language`, as replies; a chat
        that cannot take them is logged, not retried."""
        from media.export_docx import built_docx  # the DOCX builder, on the first export

        await _uploading(bot, target)
        transcript = transcript_of(consultation, document_labels(language))
        markdown = render_markdown(transcript).encode()
        document = await built_docx(transcript)
        stem = readable_stem(transcript.title or transcript.labels.untitled)
        sender = Sender(bot, target)
        try:
            await sender.send_file(f"{stem}.docx", document)
            await sender.send_file(f"{stem}.md", markdown)
        except (ChatUnavailable, TelegramError) as exc:
            log.info("could not send the export to chat %s: %s", target.chat_id, exc)


async def consultation_pressed(
    history: History, incoming: Incoming, value: str, press: Press
) -> Consultation | None:
    """The chat's consultation a final answer's or the history's button names; None, with
    the press told, when the data is forged or the consultation is not this chat's (any
    more): the same popup either way, so it says nothing of other chats."""
    bare = consultation_of(value)
    if bare is None:
        ignored(press.query.data, "not a consultation")
        return None
    found = await history.find(incoming.key, str(uuid.UUID(hex=bare)))
    if found is None:
        await press.answer(t(incoming.language, "export_gone"))
    return found


def replying(incoming: Incoming) -> Target:
    """Where files go: as replies to the command, or to the message under the pressed
    button, in private chats too (the files say which consultation they are)."""
    return dataclasses.replace(incoming.target, reply_to=incoming.message_id)


async def _uploading(bot: AnyBot, target: Target) -> None:
    """Show "sending a file" in the chat; best effort."""
    try:
        await bot.send_chat_action(
            target.chat_id, ChatAction.UPLOAD_DOCUMENT, message_thread_id=target.thread_id
        )
    except TelegramError as exc:
        log.debug("could not show the upload action in chat %s: %s", target.chat_id, exc)
