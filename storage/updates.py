"""Which Telegram updates the webhook has already accepted (de-duplication by `update_id`).

Invariant: `remember` records an id and answers "new" in one write, so two
deliveries of the same update — even at the same moment — are answered "new"
exactly once. The table keeps ids for `KEEP_SECONDS` and at most `KEEP_IDS` of
them: each call deletes what fell out of both bounds through indexes, so it
costs O(log n) and the table never grows past the bounds.
"""

from __future__ import annotations

import sqlite3

KEEP_SECONDS = 24 * 3600
"""Telegram gives up redelivering an update well within a day."""

KEEP_IDS = 1_000_000
"""update_ids are consecutive, so this keeps the last million (~40 MB at most)."""


def remember(db: sqlite3.Connection, update_id: int, at: float) -> bool:
    """Record `update_id`; True if it was not recorded yet."""
    new = db.execute(
        "INSERT OR IGNORE INTO telegram_updates (update_id, received_at) VALUES (?, ?)",
        (update_id, at),
    ).rowcount
    db.execute("DELETE FROM telegram_updates WHERE received_at < ?", (at - KEEP_SECONDS,))
    db.execute("DELETE FROM telegram_updates WHERE update_id <= ?", (update_id - KEEP_IDS,))
    return new == 1
