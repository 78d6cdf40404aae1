"""What limits the console's sign-in attempts per client address (`admin.throttle` in
memory, `storage.postgres.cluster.sign_ins` shared by the workers): an attempt is
reserved before its token is read and given back unless a wrong token was compared."""

from __future__ import annotations

from typing import NamedTuple, Protocol

MAX_AUDITED = 100
"""Failed sign-ins written to the audit log per window, all addresses together: many
addresses guessing at once cannot grow the log without limit."""


class Reserved(NamedTuple):
    """A sign-in attempt's reservation: `at`, the time it was counted at (give it back with
    `release`), or None when refused; `wait`, the seconds until a refused address may try
    again."""

    at: float | None
    wait: float = 0.0


class SignInLimits(Protocol):
    async def reserve(self, address: str) -> Reserved:
        """Count an attempt from `address` unless it used its attempts of the window."""
        ...

    async def release(self, address: str, at: float) -> None:
        """Uncount the attempt counted at `at` (it compared no wrong token)."""
        ...

    async def take_audit_slot(self) -> int | None:
        """Take one of the window's audit entries for failed sign-ins (`MAX_AUDITED`, all
        addresses together): how many remain after it, or None when none was left."""
        ...
