"""The cluster's schema: its tables, and its own migration history.

The cluster's first tables came with the store's history (`storage.postgres.schema`
m003, m004, m006, m008), released before it had one; so did their bots' scopes (m032,
which changes the store's tables' keys in the same step); every other change to them is a
migration here, named `c001_…`, `c002_…` in the order they run, so the store's history stays
the same on both backends. `migrate` applies the store's migrations first (the tables
these alter come from there), then these, under the same lock and into the same
`schema_migrations` table.
"""

from __future__ import annotations

import asyncpg

from storage.postgres import schema
from storage.postgres.schema import Migration

TABLES = frozenset(
    {
        "inbox",
        "dead_letters",
        "rate_limits",
        "press_limits",
        "bot_rate_limits",
        "bot_press_limits",
        "undelivered",
        "flood_waits",
        "workers",
        "admin_sign_ins",
    }
)
"""The tables only the cluster uses: a PostgreSQL database has them beside the store's,
which are the same on both backends."""

MIGRATIONS: list[Migration] = [
    (
        # The per-user limits become a sliding window log (at most N events in any window,
        # as in memory), not a token bucket: a row keeps the times of the user's events of
        # the last window (`hits`), which a bucket's state cannot give, so each user starts
        # with an empty window; the warned mark is kept. The bucket's columns stay, with
        # defaults, so workers of the previous release keep working through a rolling
        # restart (a row a new worker made reads to them as a full bucket); this release
        # neither reads nor writes them.
        "c001_rate_windows",
        (
            "ALTER TABLE rate_limits ADD COLUMN hits DOUBLE PRECISION[] NOT NULL DEFAULT '{}',"
            " ALTER COLUMN tokens SET DEFAULT 0, ALTER COLUMN updated_at SET DEFAULT 0",
            "ALTER TABLE press_limits ADD COLUMN hits DOUBLE PRECISION[] NOT NULL DEFAULT '{}',"
            " ALTER COLUMN tokens SET DEFAULT 0, ALTER COLUMN updated_at SET DEFAULT 0",
        ),
    ),
    (
        # The bot workers seen (`storage.postgres.cluster.workers`): each upserts its
        # row at start and every few seconds, deletes it when it stops cleanly; rows not
        # seen for a day are purged by the beats, through the index on `last_seen_at`.
        "c002_workers",
        (
            "CREATE TABLE workers (worker_id TEXT PRIMARY KEY, host TEXT NOT NULL,"
            " pid INTEGER NOT NULL, started_at DOUBLE PRECISION NOT NULL,"
            " last_seen_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX workers_last_seen ON workers (last_seen_at)",
        ),
    ),
    (
        # The console's sign-in attempts per client address, shared by the workers
        # (`storage.postgres.cluster.sign_ins`): the times of the address's attempts
        # of the last window; rows idle for a window are deleted through `last_at`.
        "c003_admin_sign_ins",
        (
            "CREATE TABLE admin_sign_ins (address TEXT PRIMARY KEY,"
            " hits DOUBLE PRECISION[] NOT NULL DEFAULT '{}',"
            " last_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX admin_sign_ins_last ON admin_sign_ins (last_at)",
        ),
    ),
    (
        # The per-user limits per bot: a user's messages and presses to one bot never spend
        # their budget in another (each bot at Telegram's limit is limited on its own). New
        # tables keyed by (bot, user_id), not a new key on the old ones: workers of the
        # previous release name `ON CONFLICT (user_id)`, which needs a unique index on
        # user_id alone, so they keep counting in `rate_limits` and `press_limits` through
        # a rolling restart (each release counting on its own, as with c001) while this
        # release counts in the new tables; every user's window so far is the deployment's
        # bot's (0). This release only deletes the old tables' idle rows; a later one drops
        # them once no worker of the release before this one can run.
        "c004_bot_rate_limits",
        tuple(
            statement
            for old, new in (
                ("rate_limits", "bot_rate_limits"),
                ("press_limits", "bot_press_limits"),
            )
            for statement in (
                f"CREATE TABLE {new} (bot BIGINT NOT NULL, user_id BIGINT NOT NULL,"
                " hits DOUBLE PRECISION[] NOT NULL DEFAULT '{}', warned_at DOUBLE PRECISION,"
                " PRIMARY KEY (bot, user_id))",
                f"INSERT INTO {new} (bot, user_id, hits, warned_at)"
                f" SELECT 0, user_id, hits, warned_at FROM {old}",
            )
        ),
    ),
]


async def migrate(connection: asyncpg.Connection) -> list[str]:
    """Apply the store's migrations, then the cluster's, this database lacks; return
    the names applied now."""
    applied = await schema.migrate(connection)
    return applied + await schema.apply_migrations(connection, MIGRATIONS)
