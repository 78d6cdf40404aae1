"""The API's idempotency keys (table `idempotency_keys`), the same on both stores: their
records and the methods each store inherits (`IdempotencyKeys`), running the statements of
`storage.statements.idempotency` in its own dialect.

- a key is claimed by one attempt at a time, in one statement (`INSERT … ON CONFLICT DO
  UPDATE … WHERE … RETURNING`): the first claim inserts the row, and a later attempt
  with the same request takes it over only when no reply is stored and no live lease
  holds it (its owner failed and released it, or died and let the lease run out);
- the row's `owner` and `lease_until` name the attempt answering it; only that owner
  renews, releases or attaches a session to it;
- its response is written at most once and never changed, so a retry always gets the
  reply of the round the key first answered. It is the body as it was sent, with what
  the session does not keep (the provider's model name, citations, notices, what was
  read from files); a reply the session holds but the key never got (the process
  stopped in between) is found in the session by its message's turn id;
- rows belong to a session and go with it (`ON DELETE CASCADE` when the retention purge
  deletes it); a claim released before any session was opened is deleted at once, and
  one whose holder died before opening a session goes with the retention purge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from storage.statements.idempotency import (
    ATTACH,
    CLAIM,
    FIND,
    RELEASE,
    RELEASE_UNOPENED,
    RENEW,
    SAVE,
)


class KeyRecord(NamedTuple):
    """A claimed key: the request it was first sent with, its session (None before one was
    opened), its reply (or None), and until when its current owner's lease runs (None:
    nobody is answering it)."""

    fingerprint: str
    session_id: str | None
    response: str | None
    lease_until: float | None


class Claimed(NamedTuple):
    """A key this attempt now holds: the session an earlier attempt opened (or None)."""

    session_id: str | None


Statement = tuple[str, tuple[Any, ...]]
"""A statement of `storage.statements` (PostgreSQL's `$n` parameters) and its parameters."""


class IdempotencyKeys:
    """The API's idempotency keys, the same on both stores: each store inherits these and
    runs the statements with `_key_read` and `_key_write` (its own dialect, connections
    and transactions)."""

    async def find_idempotency_key(self, client: str, key: str) -> KeyRecord | None:
        row = await self._key_read((FIND, (client, key)))
        return None if row is None else KeyRecord(*row)

    async def claim_idempotency_key(
        self,
        client: str,
        key: str,
        *,
        fingerprint: str,
        owner: str,
        at: float,
        lease_until: float,
    ) -> Claimed | None:
        """Hold the key for `owner` (a new claim, or one abandoned by an earlier attempt at
        the same request); None when another attempt holds it, answered it, or it was first
        sent with another request (`find_idempotency_key` tells which)."""
        row = await self._key_write((CLAIM, (client, key, fingerprint, at, owner, lease_until)))
        return None if row is None else Claimed(*row)

    async def renew_idempotency_key(
        self, client: str, key: str, *, owner: str, lease_until: float
    ) -> bool:
        """Extend `owner`'s lease; False when the key is no longer its own."""
        return await self._key_write((RENEW, (client, key, owner, lease_until))) is not None

    async def attach_idempotency_session(
        self, client: str, key: str, *, owner: str, session_id: str
    ) -> bool:
        """Record the session `owner` answers the key in; False when the key is not its own,
        `SessionNotFound` when the session is gone (purged meanwhile)."""
        return await self._key_write((ATTACH, (client, key, owner, session_id))) is not None

    async def release_idempotency_key(self, client: str, key: str, *, owner: str) -> None:
        """`owner` gives the key up unanswered: the next attempt with it really retries."""
        mine = (client, key, owner)
        await self._key_write((RELEASE_UNOPENED, mine), (RELEASE, mine))

    async def save_idempotent_response(self, client: str, key: str, response: str) -> None:
        """Store the reply a key answered with (once; a stored reply is never replaced)."""
        await self._key_write((SAVE, (client, key, response)))

    async def _key_read(self, statement: Statement) -> Sequence[Any] | None:
        """The first row `statement` reads, from committed data."""
        raise NotImplementedError

    async def _key_write(self, *statements: Statement) -> Sequence[Any] | None:
        """Run `statements` in one transaction, committed before this returns; the first row
        the last one returned (None: none). A session the table's foreign key no longer
        finds raises `SessionNotFound`."""
        raise NotImplementedError
