"""Who is a group's admin, as Telegram says at the moment of asking."""

from __future__ import annotations

import logging

from telegram import ChatMember
from telegram.error import TelegramError

from bot.transport.chat import Context, Incoming

log = logging.getLogger(__name__)

ADMIN_STATUSES = frozenset({ChatMember.ADMINISTRATOR, ChatMember.OWNER})


async def is_chat_admin(incoming: Incoming, context: Context) -> bool:
    """True for an anonymous admin (written as the group) and a member Telegram lists as an
    administrator or the owner; False when that cannot be checked (refusing is safe)."""
    if incoming.anonymous_admin:
        return True
    if incoming.user_id is None:
        return False
    try:
        member = await context.bot.get_chat_member(incoming.chat_id, incoming.user_id)
    except TelegramError as exc:
        log.info("could not check admin rights in chat %s: %s", incoming.chat_id, exc)
        return False
    return member.status in ADMIN_STATUSES
