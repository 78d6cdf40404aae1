"""Refusals said in a chat, at a cost no sender can multiply.

Invariant: in a group, one person's refused inputs (not allowed here, admins only, too
many, an empty mention, an unknown command, something other than text) cost the group at
most one message per window of the person's limit, whatever was refused and however often:
the first refusal in the window is said, later ones are dropped (logged at debug). Telegram
lets a bot send about 20 messages a minute to a group, so a refusal per input would let one
member silence the bot for everyone. The window is the limit's own "warned" mark
(`UserRateLimits.should_warn`), so "too many" and the other refusals share it, and workers
given a shared limit share it too. In a private chat a refusal costs only that chat and is
always said, except "too many", said once per window there as well.
"""

from __future__ import annotations

import logging

from bot.transport.chat import Incoming
from bot.transport.say import Say
from bot.updates.access import UserRateLimits
from i18n.translate import t

log = logging.getLogger(__name__)


def person_of(incoming: Incoming) -> int | None:
    """Whom a limit counts: the user, or for an anonymous admin the group itself (all
    anonymous admins share one user id, so counting it would pool every group's)."""
    return incoming.chat_id if incoming.anonymous_admin else incoming.user_id


class Refusals:
    """Checks a person's limit and says refusals, bound to one `say` and one limit."""

    def __init__(self, say: Say, limits: UserRateLimits) -> None:
        self._say = say
        self._limits = limits

    async def within_limit(self, incoming: Incoming) -> bool:
        """Count the input against its sender's limit; past it, say "too many" once per
        window and return False."""
        person = person_of(incoming)
        if person is None:
            return True
        wait = await self._limits.check(person)
        if wait <= 0:
            return True
        if await self._limits.should_warn(person):
            await self._say(incoming, t(incoming.language, "rate_limited", seconds=int(wait) + 1))
        else:
            log.debug("input from %s in chat %s dropped: over the limit", person, incoming.chat_id)
        return False

    async def __call__(self, incoming: Incoming, text: str) -> None:
        """Say the refusal `text`; in a group only the first of the sender's window."""
        if incoming.is_group:
            person = person_of(incoming)
            if person is None or not await self._limits.should_warn(person):
                log.debug("refusal to %s in chat %s not repeated", person, incoming.chat_id)
                return
        await self._say(incoming, text)
