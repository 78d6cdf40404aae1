"""/knowledge in Telegram: the operators manage the knowledge base from a private chat.

`/knowledge` lists the documents, `/knowledge remove N [M …]` removes them,
`/knowledge search [role=NAME] QUERY` shows the passages a consultation would receive,
and a document sent with the caption `/knowledge` (or `/knowledge role=NAME`) is added
(`bot.commands.knowledge_forms` reads the forms, `bot.commands.knowledge_texts` words the
answers).

Invariants:
- only a user in ADMIN_USER_IDS writing in a private chat reaches the knowledge base;
  anyone else, and everyone in a group, gets what an unknown command gets
  (`Commands.unknown`), so neither the command nor who the operators are shows, and
  nothing is read, fetched or changed for them;
- only the documented forms act, with a role the deployment has; anything else gets the
  usage text and changes nothing;
- a document is checked before it is fetched (its name's kind, the size its message
  announces, KNOWLEDGE_MAX_DOCUMENT_BYTES), fetched never past that limit nor Telegram's,
  and loaded by `media.knowledge_files.KnowledgeLoader.load_upload` through the runtime's
  one pool of document readers: stored whole, or not at all. It never becomes a turn of a
  consultation nor an attachment of one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram import Message
from telegram.ext import filters

from bot.commands.file_turns import typing
from bot.commands.knowledge_forms import (
    Asked,
    ListDocuments,
    RemoveDocuments,
    SearchPassages,
    caption_asks,
    command_asks,
)
from bot.commands.knowledge_texts import (
    documents_text,
    loaded_text,
    passages_text,
    refused_text,
    removed_text,
    upload_name,
    usage_text,
)
from bot.transport.chat import (
    Context,
    Incoming,
    caption_command_of,
    is_group,
    mentions_bot,
    replies_to_bot,
)
from bot.transport.config import BotConfig
from bot.transport.files import DownloadFailed, TelegramFile, download
from bot.transport.say import Say
from core.domain.errors import AttachmentProblem, AttachmentRefused
from core.domain.knowledge import KnowledgeBase
from core.prompting.excerpts import fit_passages
from core.prompting.prompts import RoleInfo
from core.prompting.requests import EngineConfig
from i18n.translate import t
from media.knowledge_files import SUFFIXES, KnowledgeLoader, Loaded

log = logging.getLogger(__name__)

KNOWLEDGE_COMMAND = "knowledge"

CommandCallback = Callable[[Incoming, Context], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class OperatorKnowledge:
    """What /knowledge works on: the knowledge base, the loader that reads uploads into it
    (the runtime's readers), and the largest document it takes (KNOWLEDGE_MAX_DOCUMENT_BYTES)."""

    base: KnowledgeBase
    loader: KnowledgeLoader
    max_bytes: int


class KnowledgeCaption(filters.MessageFilter):
    """A message whose caption starts with /knowledge for this bot: in a private chat bare
    or naming it; in a group naming it, or bare in a message that mentions or replies to
    it (a bare one otherwise may be another bot's, and is left to the other handlers)."""

    def filter(self, message: Message) -> bool:
        command = caption_command_of(message)
        if command is None:
            return False
        name, _, bot_name = command.partition("@")
        if name.lower() != "/" + KNOWLEDGE_COMMAND:
            return False
        bot = message.get_bot()
        if bot_name:
            return bot_name.lower() == bot.username.lower()
        if not is_group(message):
            return True
        return mentions_bot(message, username=bot.username, bot_id=bot.id) or replies_to_bot(
            message, bot_id=bot.id
        )


class KnowledgeCommand:
    """/knowledge and the documents captioned with it."""

    def __init__(
        self,
        knowledge: OperatorKnowledge,
        config: BotConfig,
        engine_config: EngineConfig,
        *,
        roles: Callable[[], dict[str, RoleInfo]],
        say: Say,
        unknown: CommandCallback,
    ) -> None:
        """`roles` are the personas a document may be tagged with; `unknown` answers a
        command the bot does not have (`Commands.unknown`)."""
        self.knowledge = knowledge
        self.admins = config.admin_user_ids
        self.download_timeout = config.download_timeout
        self.engine_config = engine_config
        self.roles = roles
        self.say = say
        self.unknown = unknown

    def _operator_in_private(self, incoming: Incoming) -> bool:
        return (
            not incoming.is_group
            and not incoming.anonymous_admin
            and incoming.user_id is not None
            and incoming.user_id in self.admins
        )

    async def command(self, incoming: Incoming, context: Context) -> None:
        """List, remove or search the knowledge base (operators, in private)."""
        if not self._operator_in_private(incoming):
            await self.unknown(incoming, context)
            return
        asked = command_asks(incoming.text)
        if asked is None:
            await self.say(incoming, usage_text(incoming.language, self.knowledge.max_bytes))
            return
        if isinstance(asked, SearchPassages) and not await self._role_known(incoming, asked.role):
            return
        await self.say(incoming, await self._answer(asked, incoming))

    async def caption(self, incoming: Incoming, context: Context) -> None:
        """Add the document the caption came with (operators, in private)."""
        if not self._operator_in_private(incoming):
            await self.unknown(incoming, context)
            return
        language = incoming.language
        asked = caption_asks(incoming.text)
        file = incoming.file
        if asked is None or file is None:
            await self.say(incoming, usage_text(language, self.knowledge.max_bytes))
            return
        if not await self._role_known(incoming, asked.role):
            return
        loaded = await self._upload(incoming, context, file, asked.role)
        if loaded is None:
            return
        log.info(
            "knowledge: operator %s uploaded %s from Telegram: %s",
            incoming.user_id,
            loaded.source,
            loaded.problem or (loaded.stored.value if loaded.stored else ""),
        )
        await self.say(incoming, loaded_text(language, loaded, self.knowledge.max_bytes))

    async def _answer(self, asked: Asked, incoming: Incoming) -> str:
        language = incoming.language
        base = self.knowledge.base
        if isinstance(asked, ListDocuments):
            documents = await base.documents()
            if not documents:
                return t(language, "knowledge_empty")
            return documents_text(language, documents)
        if isinstance(asked, RemoveDocuments):
            removed = await base.remove(asked.ids)
            log.info("knowledge: operator %s removed %s", incoming.user_id, removed)
            return removed_text(language, asked.ids, removed)
        config = self.engine_config
        found = await base.search(
            asked.query, role=asked.role or config.default_role, limit=config.knowledge_top_k
        )
        if found is None:
            return t(language, "knowledge_empty")
        passages = fit_passages(found[: config.knowledge_top_k], config.knowledge_max_chars)
        if not passages:
            return t(language, "knowledge_no_match")
        return passages_text(language, passages)

    async def _role_known(self, incoming: Incoming, role: str | None) -> bool:
        """Whether `role` is None or a persona of the deployment; says the roles when not."""
        roles = self.roles()
        if role is None or role in roles:
            return True
        known = ", ".join(sorted(roles))
        await self.say(incoming, t(incoming.language, "knowledge_unknown_role", role=role,
                                   roles=known))  # fmt: skip
        return False

    async def _upload(
        self, incoming: Incoming, context: Context, file: TelegramFile, role: str | None
    ) -> Loaded | None:
        """The file checked, fetched and loaded; None when it was refused before it was
        loaded (the reason already said)."""
        language = incoming.language
        limit = self.knowledge.max_bytes
        name = upload_name(file.name)
        problem = None
        if not name.lower().endswith(SUFFIXES):
            problem = AttachmentProblem.UNSUPPORTED  # a photo, a voice note, an archive
        elif file.file_size is not None and file.file_size > limit:
            problem = AttachmentProblem.TOO_LARGE
        if problem is not None:
            log.info("knowledge: upload %r refused unfetched: %s", name, problem.value)
            await self.say(incoming, refused_text(language, name, problem, "", limit))
            return None
        try:
            async with typing(context.bot, incoming.target):
                data = await download(
                    context.bot, file, timeout=self.download_timeout, max_bytes=limit
                )
                return await self.knowledge.loader.load_upload(data, name=file.name, role=role)
        except AttachmentRefused as refused:  # past the limit, or too big for Telegram
            log.info("knowledge: upload %r refused: %s", name, refused)
            shown = refused.limit or limit
            await self.say(incoming, refused_text(language, name, refused.problem, "", shown))
        except DownloadFailed as exc:
            log.warning("knowledge: upload %r not downloaded: %s", name, exc)
            await self.say(incoming, t(language, "knowledge_failed_download", name=name))
        return None
