"""Holding an `Idempotency-Key` while its request is answered, across every worker.

Invariants:
- the key is claimed in the store, in one statement, before the request does anything
  else (no file read, no session opened, no model called): whoever holds the claim is the
  only attempt answering that key, in any worker sharing the store;
- a holder renews its lease (`LEASE_SECONDS`) every third of it while it works, so a
  live holder is never taken over; a holder that died (a crash, `kill -9`) stops
  renewing, and once its lease ran out the next attempt with the same request takes the
  key over and retries — on the session the dead one opened, if it opened one, where
  its message is found by the key's turn id (`api.idempotency.turn_id`);
- an attempt that finds the key held by another waits for that one's reply, reading the
  key's row every `POLL_SECONDS`, for at most `WAIT_SECONDS` (then 409 `CONFLICT`: retry
  later); it gets the stored reply, or takes the key over when the holder gave it up
  unanswered or its lease ran out;
- a holder whose request fails releases the key (a claim made before any session was
  opened is deleted), so the retry really retries; the same key with another body is
  refused whichever worker sees it, since the claim stores the body's fingerprint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid

from api.errors import ApiError
from api.idempotency import KeyStore, key_reused, turn_id
from api.round_tasks import Flight, RoundTask

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
"""How long a claim outlives its holder's last renewal (a dead holder blocks no longer)."""
POLL_SECONDS = 0.2
"""How often an attempt waiting for another one's reply reads the key's row."""
WAIT_SECONDS = 300.0
"""How long an attempt waits for another one's reply before it is told to retry later."""


class Hold:
    """This attempt's claim on a key: renewed while it lives, released unless answered."""

    def __init__(self, keys: KeyStore, flight: Flight, owner: str, session_id: str | None) -> None:
        self.keys = keys
        self.flight = flight
        self.owner = owner
        self.session_id = session_id  # the session an earlier attempt opened, if any
        self.turn_id = turn_id(*flight)  # what the key's message is stored with
        self._saved = False
        self._renewing = asyncio.create_task(self._renew())

    async def attach(self, session_id: str) -> None:
        """Record the session this attempt answers in (raises `SessionNotFound`)."""
        if not await self.keys.attach_idempotency_session(
            *self.flight, owner=self.owner, session_id=session_id
        ):
            raise _lost()
        self.session_id = session_id

    async def save(self, body: dict[str, object]) -> None:
        """Store the reply the key answered with; the claim ends with it."""
        await self.keys.save_idempotent_response(*self.flight, json.dumps(body, ensure_ascii=False))
        self._saved = True

    async def end(self) -> None:
        """Stop renewing; release the key unless its reply was stored."""
        self._renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._renewing
        if self._saved:
            return
        try:
            await self.keys.release_idempotency_key(*self.flight, owner=self.owner)
        except Exception:  # the lease runs out instead: the key is free a little later
            log.warning("could not release an idempotency key", exc_info=True)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            try:
                held = await self.keys.renew_idempotency_key(
                    *self.flight, owner=self.owner, lease_until=time.time() + LEASE_SECONDS
                )
            except Exception:
                log.warning("could not renew an idempotency key's lease", exc_info=True)
                continue
            if not held:
                log.warning("an idempotency key's lease ran out while its request ran")
                return


async def claim(keys: KeyStore, flight: Flight, round_task: RoundTask) -> Hold | None:
    """Hold the key for this attempt; None when it was answered before (the round task is
    then answered with that reply). Waits while another attempt holds it; raises
    `IDEMPOTENCY_KEY_REUSED` for another body, `CONFLICT` after `WAIT_SECONDS`."""
    assert round_task.fingerprint is not None
    owner = uuid.uuid4().hex
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        now = time.time()
        held = await keys.claim_idempotency_key(
            *flight,
            fingerprint=round_task.fingerprint,
            owner=owner,
            at=now,
            lease_until=now + LEASE_SECONDS,
        )
        if held is not None:
            return Hold(keys, flight, owner, held.session_id)
        found = await keys.find_idempotency_key(*flight)
        if found is None:  # given up before a session was opened: claim it afresh
            continue
        if found.fingerprint != round_task.fingerprint:
            raise key_reused()
        if found.response is not None and found.session_id is not None:
            round_task.replay(found.session_id, json.loads(found.response))
            return None
        if found.lease_until is None or found.lease_until < time.time():
            continue  # given up, or its holder died: take it over
        if time.monotonic() > deadline:
            raise ApiError(
                "CONFLICT", "a request with this Idempotency-Key is still being answered"
            )
        await asyncio.sleep(POLL_SECONDS)


def _lost() -> ApiError:
    return ApiError("CONFLICT", "a request with this Idempotency-Key is answered elsewhere")
