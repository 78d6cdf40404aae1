"""Where a reply goes, and the terms every sending module shares.

Invariants:
- a `Target` is a plain frozen value: the chat, its forum topic, the message a reply
  answers and whether the chat is private; whoever sends to it decides nothing else;
- a chat that blocked the bot is reported as `ChatUnavailable`, never retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telegram.ext import ExtBot

AnyBot = ExtBot[Any]  # ExtBot: the calls pass `rate_limit_args` to the flood control

NO_RETRIES = {"max_retries": 0}


class ChatUnavailable(Exception):
    """The bot may not write to this chat (blocked, kicked, chat deleted)."""


@dataclass(frozen=True, slots=True)
class Target:
    chat_id: int
    thread_id: int | None = None
    reply_to: int | None = None
    private: bool = True
