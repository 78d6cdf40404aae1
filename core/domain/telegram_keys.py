"""The keys a Telegram bot's data is stored under, built and read for one bot's scope.

Invariants:
- a scope is a bot: 0 is the deployment's own bot (TELEGRAM_BOT_TOKEN), n > 0 the bot the
  bots table names n. Scope 0 keeps the keys stored before bots had scopes (`tg:`), so no
  stored key is ever rewritten; scope n writes `tg<n>:` where scope 0 writes `tg:`;
- every key of one scope starts with `prefix(scope) + ":"` (`tg:`, `tg2:`), and no key of
  another scope does (`tg2:` is not a prefix of `tg20:`): a scope's keys are one range,
  which is how a store finds and forgets everything one bot keeps;
- `scope_of` reads back exactly the keys these functions build: `tg:` is 0, `tg<n>:` with n
  written without leading zeros is n (up to `MAX_SCOPE`); anything else (an API or
  terminal key, `tg0:`, `tg02:`) is no Telegram key.
Pure: no I/O.
"""

from __future__ import annotations

import re

DEFAULT_SCOPE = 0
"""The deployment's own bot: TELEGRAM_BOT_TOKEN, and everything stored before scopes."""

MAX_SCOPE = 2**63 - 1
"""Scopes are the bots table's 64-bit ids."""

PERSON_PATTERN = r"tg(?:[1-9][0-9]{0,18})?:[1-9][0-9]{0,18}"
"""A Telegram person key of any scope, as a regular expression (`tg:42`, `tg2:42`)."""

_SCOPED = re.compile(r"tg([1-9][0-9]{0,18})?:")


def check_scope(scope: int) -> int:
    """`scope` when it names a bot (0 to `MAX_SCOPE`); ValueError otherwise."""
    if isinstance(scope, bool) or not isinstance(scope, int) or not 0 <= scope <= MAX_SCOPE:
        raise ValueError(f"a bot's scope is an integer from 0 to {MAX_SCOPE}, not {scope!r}")
    return scope


def prefix(scope: int = DEFAULT_SCOPE) -> str:
    """The scope's word before the colon: `tg` for the deployment's bot, `tg<n>` for bot n."""
    return "tg" if check_scope(scope) == DEFAULT_SCOPE else f"tg{scope}"


def key_range(scope: int = DEFAULT_SCOPE) -> str:
    """What every chat, person and group-owner key of the scope starts with (`tg2:`)."""
    return prefix(scope) + ":"


def chat_key(chat_id: int, thread_id: int | None = None, scope: int = DEFAULT_SCOPE) -> str:
    """A conversation: a chat (`tg:<chat>`), or a forum topic of one (`tg:<chat>:<topic>`)."""
    head = key_range(scope)
    return f"{head}{chat_id}" if thread_id is None else f"{head}{chat_id}:{thread_id}"


def person_key(user_id: int, scope: int = DEFAULT_SCOPE) -> str:
    """A Telegram user as quotas, memory and the console name people (`tg:<user id>`)."""
    return f"{key_range(scope)}{user_id}"


def turn_id(update_id: int, scope: int = DEFAULT_SCOPE) -> str:
    """The consultation turn an update becomes (`tg:<update id>`): two bots' update ids
    collide, their turn ids do not."""
    return f"{key_range(scope)}{update_id}"


def file_user_key(user_id: int, scope: int = DEFAULT_SCOPE) -> str:
    """Who a file turn is charged to when its sender is known (`tg-user:<user id>`)."""
    return f"{prefix(scope)}-user:{user_id}"


def file_chat_key(key: str, scope: int = DEFAULT_SCOPE) -> str:
    """Who a file turn is charged to when no sender is known (`tg-chat:<chat key>`)."""
    return f"{prefix(scope)}-chat:{key}"


def scope_of(key: str) -> int | None:
    """The scope of a Telegram chat, person or group-owner key; None for any other key."""
    found = _SCOPED.match(key)
    if found is None:
        return None
    digits = found.group(1)
    if digits is None:
        return DEFAULT_SCOPE
    scope = int(digits)
    return scope if scope <= MAX_SCOPE else None


def unscoped(key: str) -> str:
    """A Telegram key of any scope as the deployment's bot writes it (`tg2:42` → `tg:42`):
    a Telegram user's id is the same in every bot. Any other key is returned as it is."""
    found = _SCOPED.match(key)
    if found is None or scope_of(key) is None:
        return key
    return key_range(DEFAULT_SCOPE) + key[found.end() :]


def is_telegram(key: str) -> bool:
    """A key one of these functions built (of any scope)."""
    return scope_of(key) is not None
