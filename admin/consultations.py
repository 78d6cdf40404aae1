"""`/admin/consultations`: the filtered list, one consultation's transcript, deleting one.

Invariants: every query parameter is checked before the store is asked (a bad date,
status, cursor or an oversized value is 400, never an error page from the store); a
page is one keyset read of at most `PAGE_SIZE` + 1 rows (the extra row says whether a
next page exists); an id that names no consultation is 404 whatever it holds; deleting
is a POST with the session's CSRF token and an explicit confirmation, done with its
audit entry in one transaction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from aiohttp import web

from admin.auth import SESSION_KEY, read_form
from admin.config import PREFIX
from admin.people import person_link
from admin.ports import AdminStore
from admin.render import bad_request, not_found, page
from admin.transcript import view_of
from core.domain.audit import AuditEntry
from core.domain.consultation import Consultation, Status
from core.domain.facts import ANONYMOUS_ADMIN_ID, person_of, telegram_person
from core.domain.listing import MAX_SEARCH_CHARS, PAGE_SIZE, ConsultationQuery, Cursor
from core.domain.telegram_keys import scope_of
from core.domain.usage import ScopeKind, day_of
from core.turns.lifecycle import Lifecycle

MAX_ID_CHARS = 64
MAX_CHAT_CHARS = 200


NO_SUCH_CONSULTATION = "No such consultation."


class BadQuery(ValueError):
    """A query parameter that cannot be read; its message names it."""


@dataclass(frozen=True, slots=True)
class Filters:
    """The list's filters as the form shows them (text), and as a store query."""

    since: str = ""
    until: str = ""
    status: str = ""
    chat: str = ""
    q: str = ""
    person: str = ""

    def query(self, before: Cursor | None) -> ConsultationQuery:
        return ConsultationQuery(
            since=_day_start(self.since, "since"),
            until=_day_after(self.until, "until"),
            status=Status(self.status) if self.status else None,
            chat_key=self.chat or None,
            text=self.q or None,
            person=self.person or None,
            before=before,
            limit=PAGE_SIZE + 1,
        )

    def link(self, **extra: str) -> str:
        values = {k: v for k, v in self.values().items() if v} | extra
        return f"{PREFIX}/consultations" + (f"?{urlencode(values)}" if values else "")

    def values(self) -> dict[str, str]:
        return {
            "since": self.since,
            "until": self.until,
            "status": self.status,
            "chat": self.chat,
            "q": self.q,
            "person": self.person,
        }


def filters_of(request: web.Request) -> tuple[Filters, Cursor | None]:
    """The filters and the page's cursor in the query string; `BadQuery` for a bad one."""
    get = request.query.get
    status = get("status", "")
    if status and status not in {s.value for s in Status}:
        raise BadQuery("status: not a status")
    chat = get("chat", "").strip()
    if len(chat) > MAX_CHAT_CHARS:
        raise BadQuery("chat: too long")
    q = get("q", "").strip()
    if len(q) > MAX_SEARCH_CHARS:
        raise BadQuery(f"q: longer than {MAX_SEARCH_CHARS} characters")
    person = get("person", "").strip()
    if len(person) > MAX_CHAT_CHARS:
        raise BadQuery("person: too long")
    filters = Filters(get("since", "").strip(), get("until", "").strip(), status, chat, q, person)
    filters.query(None)  # checks the dates
    return filters, _cursor(get("after", ""))


def _cursor(value: str) -> Cursor | None:
    if not value:
        return None
    at, _, ident = value.partition("_")
    try:
        created = float(at)
    except ValueError:
        raise BadQuery("after: not a position in the list") from None
    if not math.isfinite(created) or not ident or len(ident) > MAX_ID_CHARS:
        raise BadQuery("after: not a position in the list")
    return Cursor(created, ident)


def _day(value: str, name: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise BadQuery(f"{name}: a date is written YYYY-MM-DD") from None


def _day_start(value: str, name: str) -> float | None:
    day = _day(value, name)
    return None if day is None else day.timestamp()


def _day_after(value: str, name: str) -> float | None:
    day = _day(value, name)
    return None if day is None else (day + timedelta(days=1)).timestamp()


def asked_by(consultation: Consultation) -> str | None:
    """The person who asked: as recorded when it started (`Consultation.person`); for a
    row stored without one, the owner of the memory it started with, else the Telegram
    user who started it; None when the store does not say (an API session without a
    userId, an anonymous group admin: their account is every group's, so no person)."""
    if consultation.person is not None:
        return consultation.person
    if consultation.memory_owner is not None:
        return person_of(consultation.memory_owner)
    if consultation.started_by not in (None, ANONYMOUS_ADMIN_ID):
        return telegram_person(consultation.started_by, scope_of(consultation.chat_key) or 0)
    return None


class ConsultationPages:
    def __init__(self, store: AdminStore, lifecycle: Lifecycle, clock: Callable[[], float]) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._clock = clock

    async def list(self, request: web.Request) -> web.StreamResponse:
        try:
            filters, before = filters_of(request)
        except BadQuery as exc:
            return bad_request(request, str(exc))
        rows = await self._store.list_consultations(filters.query(before))
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        next_link = None
        if more:
            last = rows[-1].cursor
            next_link = filters.link(after=f"{last.created_at!r}_{last.id}")
        return page(
            request,
            "consultations.html",
            rows=rows,
            filters=filters,
            statuses=[s.value for s in Status],
            next_link=next_link,
            first_link=filters.link() if before is not None else None,
        )

    async def show(self, request: web.Request) -> web.StreamResponse:
        consultation_id = request.match_info["consultation_id"]
        found = None
        if len(consultation_id) <= MAX_ID_CHARS:
            found = await self._store.get(consultation_id)
        if found is None:
            return not_found(request, NO_SUCH_CONSULTATION)
        since, until = day_of(found.created_at), day_of(found.last_activity_at)
        chat_usage = await self._store.usage_of(
            ScopeKind.CHAT, found.chat_key, since_day=since, until_day=until
        )
        asker = asked_by(found)
        return page(
            request,
            "consultation.html",
            c=found,
            asker=asker,
            asker_link=None if asker is None else person_link(asker),
            asker_list=None if asker is None else Filters(person=asker).link(),
            view=view_of(found),
            chat_usage=chat_usage,
            usage_days=(since, until),
        )

    async def delete(self, request: web.Request) -> web.StreamResponse:
        consultation_id = request.match_info["consultation_id"]
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, "Deleting needs the confirmation box ticked.")
        session = request[SESSION_KEY]
        found = None
        if len(consultation_id) <= MAX_ID_CHARS:
            found = await self._store.get(consultation_id)
        if found is None:
            return not_found(request, NO_SUCH_CONSULTATION)
        audit = AuditEntry(
            self._clock(),
            session.actor,
            "delete_consultation",
            consultation_id,
            detail=f"chat {found.chat_key}, {found.status.value}",
        )
        if not await self._lifecycle.delete_consultation(consultation_id, audit):
            return not_found(request, NO_SUCH_CONSULTATION)
        raise web.HTTPSeeOther(f"{PREFIX}/consultations")
