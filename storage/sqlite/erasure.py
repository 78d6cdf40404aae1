"""Deleted words leave the SQLite file and its WAL, not only the tables.

Invariants:
- The writer runs with ``secure_delete`` on (`storage.sqlite.store`): a deleted row's bytes
  and every page freed are overwritten with zeros in the pages it writes.
- The request search index (`consultations_search`) keeps no trigram of a deleted request.
  With SQLite 3.42 or later its own FTS5 ``secure-delete`` option takes the entries out as
  the row goes. Before, a delete only adds a marker, and the entries go when the segments
  holding them are merged into one: the deleting transaction starts a merge of every
  segment (`scrub_search_index`) and the deletion returns once `merge_step`, each in its
  own transaction writing at most `MERGE_PAGES_PER_STEP` pages, finds nothing left to
  merge. That rewrites the whole index (a forget took about 0.3 s with 10,000
  consultations stored, 2.2 s with 100,000, `python -m bench.forget`), in steps, so other
  chats' writes wait at most one step.
- A write wrapped in `Erasing` is followed, once committed, by a TRUNCATE checkpoint: the
  file receives the zeroed pages and the WAL, whose older frames still hold the deleted
  words, is cut to nothing. The deletion stands even if that checkpoint cannot run (a
  reader kept it busy past the busy timeout): it is logged, and the next erasing write or
  SQLite's own checkpoints copy the pages; only the WAL's tail keeps old frames until then.

What the file system does with the blocks a file gave back is beyond SQLite (see
`docs/privacy.md`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiosqlite

log = logging.getLogger(__name__)

T = TypeVar("T")

FTS5_SECURE_DELETE = (3, 42, 0)
"""The first SQLite whose FTS5 has the ``secure-delete`` option."""
MERGE_PAGES_PER_STEP = 200
"""Pages of the search index one merge step writes (50–150 ms here)."""
_MERGE = "INSERT INTO consultations_search (consultations_search, rank) VALUES ('merge', ?)"


def index_erases_itself(version: tuple[int, int, int] = sqlite3.sqlite_version_info) -> bool:
    """True when the linked SQLite's FTS5 removes a deleted row's entries itself."""
    return version >= FTS5_SECURE_DELETE


async def secure_search_index(db: aiosqlite.Connection) -> None:
    """Turn on the search index's ``secure-delete`` where SQLite has it (a setting kept in
    the file), merging once the entries deleted before it was on. SQLite older than 3.42
    may refuse to write an index with it on."""
    if not index_erases_itself():
        return
    rows = list(
        await db.execute_fetchall(
            "SELECT v FROM consultations_search_config WHERE k = 'secure-delete'"
        )
    )
    if rows and rows[0][0] == 1:
        return
    await db.execute("BEGIN IMMEDIATE")
    await db.execute(
        "INSERT INTO consultations_search (consultations_search, rank) VALUES ('secure-delete', 1)"
    )
    await db.execute("INSERT INTO consultations_search (consultations_search) VALUES ('optimize')")
    await db.execute("COMMIT")


def scrub_search_index(db: sqlite3.Connection) -> None:
    """Start dropping the deleted requests' trigrams from the search index (called in the
    transaction that deleted them, after the deletes); `merge_step` finishes it."""
    if not index_erases_itself():
        # Negative: every segment joins one merge, whatever its level.
        db.execute(_MERGE, (-MERGE_PAGES_PER_STEP,))


def merge_step(db: sqlite3.Connection) -> bool:
    """Go on with the search index's merge for at most `MERGE_PAGES_PER_STEP` pages; False
    when there was nothing to merge (the deleted entries are gone)."""
    if index_erases_itself():
        return False
    before = db.total_changes
    db.execute(_MERGE, (MERGE_PAGES_PER_STEP,))
    return db.total_changes - before >= 2  # FTS5: fewer changes mean no work was done


def nothing(db: sqlite3.Connection) -> None:
    """Writes nothing: run as `Erasing(nothing)`, it truncates the WAL after earlier writes."""


@dataclass(frozen=True)
class Erasing(Generic[T]):
    """A write that deletes someone's words: `after_commit` truncates the WAL behind it."""

    op: Callable[[sqlite3.Connection], T]

    def __call__(self, db: sqlite3.Connection) -> T:
        return self.op(db)


def after_commit(
    db: sqlite3.Connection, ops: Sequence[Callable[[sqlite3.Connection], Any]]
) -> None:
    """Checkpoint and truncate the WAL when one of the committed `ops` is `Erasing`."""
    if any(isinstance(op, Erasing) for op in ops):
        truncate_wal(db)


def truncate_wal(db: sqlite3.Connection) -> bool:
    """Copy the WAL into the file and cut it to zero bytes; False (logged) when a reader
    or an error kept it from completing."""
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as error:
        log.warning("the WAL was not truncated after a deletion: %s", error)
        return False
    if busy:
        log.warning("the WAL was not truncated after a deletion: a reader kept it busy")
        return False
    return True
