"""A process-wide budget of request-body bytes in flight (API_BODY_BYTES_IN_FLIGHT).

Invariants:
- a chat request reserves its body's size before a byte of the body is read: from its
  `Content-Length`, or, for a body without one, chunk by chunk as it is read; a request
  that cannot reserve is refused with SERVER_BUSY (503, `Retry-After`) and its
  connection closed, its body unread (or, without a length, read no further);
- a body under `FREE_BYTES` reserves nothing: ordinary chat is never refused, and such
  bodies cost at most FREE_BYTES per open connection (HTTP_MAX_CONNECTIONS bounds them);
- a reservation is held while the body, its parsed form or its decoded files are
  referenced: until the files are read into text, then only for the photos the round
  still sends to the model, and it is released when the round ends, or at once when the
  request is refused, fails or its client hangs up;
- the budget is never smaller than one largest chat body, so a file at its limit is
  always admissible (alone, when the budget is that small).

The budget counts body bytes; each costs a few bytes of memory at the peak (the raw body,
the base64 text in the parsed request, the decoded bytes), so the memory a process spends
on bodies is bounded by a small multiple of the budget, whatever the number of clients.
"""

from __future__ import annotations

from api.errors import ApiError

FREE_BYTES = 64 * 1024
"""Bodies smaller than this reserve nothing."""

RETRY_AFTER_SECONDS = 2
"""What a refused client is told to wait: bodies in flight are read in seconds."""


def server_busy() -> ApiError:
    """SERVER_BUSY: the budget has no room; the connection is closed, its body unread."""
    return ApiError(
        "SERVER_BUSY",
        "the server is handling too many large requests: try again shortly",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        close=True,
    )


class BodyBudget:
    """Bytes of request bodies the process holds at once, at most `capacity`."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_flight = 0

    def reserve(self, declared: int | None) -> Reservation | None:
        """A reservation for a body of `declared` bytes (None: not known yet, nothing is
        reserved until it grows); None when the budget has no room for it."""
        reservation = Reservation(self)
        if declared is not None and not reservation.grow_to(declared):
            return None
        return reservation

    def take(self, amount: int) -> bool:
        if amount > 0 and self.in_flight + amount > self.capacity:
            return False
        self.in_flight += amount
        return True


class Reservation:
    """One request's share of the budget; `release` is safe to call more than once."""

    __slots__ = ("_budget", "held")

    def __init__(self, budget: BodyBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow_to(self, size: int) -> bool:
        """Hold room for a body of `size` bytes; False (nothing changed) without room."""
        wanted = size if size >= FREE_BYTES else 0
        if wanted <= self.held:
            return True
        if not self._budget.take(wanted - self.held):
            return False
        self.held = wanted
        return True

    def shrink_to(self, size: int) -> None:
        """Keep room only for `size` bytes still referenced (never grows)."""
        wanted = size if size >= FREE_BYTES else 0
        if wanted < self.held:
            self._budget.in_flight -= self.held - wanted
            self.held = wanted

    def release(self) -> None:
        self.shrink_to(0)
