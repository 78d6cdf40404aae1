"""The people who used the bot, as the operator's console lists them.

Invariants: a person is anyone charged for a model call (the usage table's person
scope); the list is newest activity first (the last UTC day charged), then by key, and
pages by that order (`PeopleQuery.after`), so a page never repeats or skips a person
charged before it was read. Searching matches a part of the key, taken as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.domain.quotas import QuotaOverride

MAX_SEARCH_CHARS = 100


@dataclass(frozen=True, slots=True)
class PeopleQuery:
    """`search`: a part of the key ("" for all); `after`: the (last day, key) of the
    previous page's last person, None for the first page."""

    today: str
    month_start: str
    search: str = ""
    after: tuple[str, str] | None = None
    limit: int = 50


@dataclass(frozen=True, slots=True)
class PersonRow:
    """One person on the list: when they were last charged, their tokens today and this
    month, the consultations they started today, and an admin's override if any."""

    person: str
    last_day: str
    tokens_today: int
    tokens_month: int
    consultations_today: int
    override: QuotaOverride | None
