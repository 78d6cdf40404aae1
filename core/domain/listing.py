"""Consultations as the operator's console lists them: filtered, newest first, a page at
a time.

Invariants: a page is read by keyset (`before`: the last row of the previous page), so
every page costs one index range scan however deep it is; the order is (created_at, id)
descending, total even between consultations started in the same second. The text
searched for is matched literally (`%` and `_` are not wildcards) in the request, case
aside for ASCII letters at least (a store may fold other letters' case too), and is at most
`MAX_SEARCH_CHARS` characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.domain.consultation import Status

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_SEARCH_CHARS = 200
LISTED_REQUEST_CHARS = 160
"""How much of a request a listed row keeps."""
LIKE_ESCAPE = "\\"


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts: after the row started at `created_at` with `id`."""

    created_at: float
    id: str


@dataclass(frozen=True, slots=True)
class ConsultationQuery:
    """Which consultations to list: started in [`since`, `until`) (seconds since the
    epoch; None: unbounded), of `status`, in `chat_key`, asked by `person`
    (`Consultation.person`), whose request contains `text`."""

    since: float | None = None
    until: float | None = None
    status: Status | None = None
    chat_key: str | None = None
    text: str | None = None
    person: str | None = None
    before: Cursor | None = None
    limit: int = PAGE_SIZE

    def search_text(self) -> str | None:
        """The text searched for (its first `MAX_SEARCH_CHARS` characters); None: any."""
        return self.text[:MAX_SEARCH_CHARS] if self.text else None

    def like_pattern(self) -> str | None:
        """`text` as a LIKE pattern matching it literally (escaped with `LIKE_ESCAPE`)."""
        escaped = self.search_text()
        if escaped is None:
            return None
        for char in (LIKE_ESCAPE, "%", "_"):
            escaped = escaped.replace(char, LIKE_ESCAPE + char)
        return f"%{escaped}%"

    def bounded_limit(self) -> int:
        return max(1, min(self.limit, MAX_PAGE_SIZE))


@dataclass(frozen=True, slots=True)
class ListedConsultation:
    """One row of the list: no messages; the start of its request (`LISTED_REQUEST_CHARS`)."""

    id: str
    chat_key: str
    status: Status
    created_at: float
    last_activity_at: float
    request: str
    current_round: int
    max_rounds: int
    follow_ups: int

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.created_at, self.id)
