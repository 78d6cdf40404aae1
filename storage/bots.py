"""What both stores' bots registries share: a bot's row read as a `StoredBot`, and its
profile as the stored settings JSON.

Invariant: the settings column holds exactly `BotProfile.to_json()`; a row whose settings
no longer parse (edited behind the store) reads as the defaults rather than failing every
list, and the operator sees `defaults` for it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.domain.bots import BotProfile, StoredBot, parse_profile


def settings_value(profile: BotProfile) -> str:
    """The settings column's text for `profile`."""
    return json.dumps(profile.to_json(), ensure_ascii=False, sort_keys=True)


def profile_of(text: str | None) -> BotProfile:
    try:
        return parse_profile(json.loads(text or "{}"))
    except ValueError:  # not JSON, or `ProfileInvalid`
        return BotProfile()


def bot_from_row(row: Sequence[Any]) -> StoredBot:
    """A row of `storage.statements.bots.BOT_COLUMNS`."""
    (id_, telegram_id, username, label, cipher, tail, enabled, settings) = row[:8]
    created_at, updated_at, removed_at, api_token_hash = row[8:12]
    return StoredBot(
        id=int(id_),
        telegram_id=int(telegram_id),
        username=str(username),
        label=str(label),
        token_cipher=str(cipher),
        token_tail=str(tail),
        enabled=bool(enabled),
        profile=profile_of(settings),
        created_at=float(created_at),
        updated_at=float(updated_at),
        removed_at=None if removed_at is None else float(removed_at),
        api_token_hash=None if api_token_hash is None else str(api_token_hash),
    )
