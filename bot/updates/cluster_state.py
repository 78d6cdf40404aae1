"""The state a bot keeps between updates that several worker processes must share.

Each field is a port; None keeps it in this process's memory (one process, as with
SQLite). The composition root gives shared implementations (PostgreSQL) when several
workers serve one bot.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.transport.flood import FloodWaits
from bot.transport.round_keyboards import KeyboardMessages
from bot.transport.undelivered import UndeliveredReplies
from bot.updates.access import UserRateLimits


@dataclass(frozen=True, slots=True)
class SharedState:
    rate_limits: UserRateLimits | None = None  # per-user message rate
    press_limits: UserRateLimits | None = None  # per-user button presses
    undelivered: UndeliveredReplies | None = None  # replies Telegram would not take
    flood_waits: FloodWaits | None = None  # Telegram's RetryAfter per chat
    # Which message carries each conversation's round keyboard: the store, so the next
    # reply takes it away after a restart too (one process on SQLite as well).
    round_keyboards: KeyboardMessages | None = None


IN_MEMORY = SharedState()
"""Everything in this process's memory: one worker."""
