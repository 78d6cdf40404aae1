"""The pool of the state workers share (rate limits, undelivered replies, flood waits, the
periodic job's turn), opened with the cluster's migrations applied."""

from __future__ import annotations

import asyncpg

from storage.postgres.cluster.schema import migrate
from storage.postgres.pool import open_pool


async def open_shared_pool(url: str, *, size: int = 5) -> asyncpg.Pool:
    """A small pool for the shared state; applies the cluster's missing migrations
    (the store's first).

    Losing the last writes of this state in a database crash is harmless (a limit or a
    pause a little short; an undelivered reply is still in the history), so its commits
    do not wait for the disk.
    """
    return await open_pool(
        url,
        size=size,
        purpose="shared state",
        migrate=migrate,
        server_settings={"synchronous_commit": "off"},
    )
