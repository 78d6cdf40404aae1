"""`/admin/people`: the people who used the bot, their usage against their limits, and
the operator's actions on one person: a quota override (as /quota sets it), blocking
(`core.turns.blocks`) and deleting their memory (as /forget does).

Invariants: a person key in a path is `tg:` and a Telegram user id, or `api:` and an API
user id as the API accepts it; anything else is 404 before the store is asked. Every
change is written with its audit entry in one transaction (the store's), and POSTs
pass the gate's CSRF check first. An override changed here applies to this process's
next turn at once and to other workers' within `core.domain.quotas.OVERRIDE_CACHE_SECONDS`; a
block likewise within `core.turns.blocks.BLOCK_CACHE_SECONDS`, and the chosen interface language
that deleting memory takes with it within `core.turns.chosen_languages.LANGUAGE_CACHE_SECONDS`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlencode

from aiohttp import web

from admin.auth import SESSION_KEY, read_form
from admin.config import PREFIX
from admin.ports import AdminStore
from admin.render import bad_request, not_found, page
from core.domain.audit import AuditEntry
from core.domain.facts import MAX_FACTS
from core.domain.people import MAX_SEARCH_CHARS, PeopleQuery
from core.domain.quotas import (
    MAX_OVERRIDE_TOKENS,
    PersonLimits,
    QuotaConfig,
    QuotaOverride,
    limits_for,
)
from core.domain.telegram_keys import DEFAULT_SCOPE, PERSON_PATTERN, scope_of
from core.domain.tool_usage import UNKNOWN, ToolCalls, ToolCount, shown_tool
from core.domain.usage import ScopeKind, day_of, month_start
from core.turns.engine import Engine
from core.turns.plan_sales import PlanSales

PAGE = 50
PERSON = re.compile(PERSON_PATTERN + r"|api:[A-Za-z0-9_.:@-]{1,128}")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TOKENS = re.compile(r"[0-9]{1,10}")
_PRINTABLE = re.compile(r"[\x21-\x7e]*")


NO_SUCH_PERSON = "No such person."

BotEngines = Callable[[int], Awaitable[tuple[Engine, PlanSales | None] | None]]
"""The engine and plans of stored bot `scope`'s people; None when no such bot is stored."""


class PeoplePages:
    def __init__(
        self,
        store: AdminStore,
        engine: Engine,
        clock: Callable[[], float],
        *,
        sales: PlanSales | None = None,
        engines: BotEngines | None = None,
    ) -> None:
        """`sales`: the plans sold (a person's page shows their plan); None: none sold;
        `engines`: a stored bot's engine and plans, for its people (None: the deployment's)."""
        self._store = store
        self._engine = engine
        self._clock = clock
        self._sales = sales
        self._engines = engines

    async def _engine_of(self, person: str) -> tuple[Engine, PlanSales | None, bool]:
        """The engine and plans a person's limits and plan come from: their bot's, and
        whether that is their own bot's (False: a stored bot not found here)."""
        scope = scope_of(person)
        if scope is None or scope == DEFAULT_SCOPE:
            return self._engine, self._sales, True
        found = None if self._engines is None else await self._engines(scope)
        if found is None:
            return self._engine, self._sales, False
        return found[0], found[1], True

    async def list(self, request: web.Request) -> web.StreamResponse:
        search = request.query.get("q", "")
        after_text = request.query.get("after", "")
        if len(search) > MAX_SEARCH_CHARS or not _PRINTABLE.fullmatch(search):
            return bad_request(request, "Search for a part of a person's key (letters, digits, :).")
        after = _after(after_text)
        if after_text and after is None:
            return bad_request(request, "That page does not exist.")
        today = day_of(self._clock())
        query = PeopleQuery(today, month_start(today), search, after, PAGE + 1)
        rows = await self._store.list_people(query)
        more = len(rows) > PAGE
        rows = rows[:PAGE]
        people = []
        configs: dict[int | None, QuotaConfig] = {}  # one read of the bots a page
        for row in rows:
            scope = scope_of(row.person)
            if scope not in configs:
                configs[scope] = (await self._engine_of(row.person))[0].quotas.config
            limits = limits_for(configs[scope], row.person, row.override)
            people.append((row, limits, person_link(row.person)))
        next_page = ""
        if more:
            last = rows[-1]
            next_page = "?" + urlencode({"q": search, "after": f"{last.last_day}~{last.person}"})
        return page(request, "people.html", people=people, search=search, next_page=next_page)

    async def show(self, request: web.Request) -> web.StreamResponse:
        person = _person(request)
        if person is None:
            return not_found(request, NO_SUCH_PERSON)
        engine, sales, own_bot = await self._engine_of(person)
        quota = await engine.quotas.of_person(person)
        usage = await engine.figures.usage(ScopeKind.PERSON, person)
        today = day_of(self._clock())
        by_model = await self._store.usage_of(
            ScopeKind.PERSON, person, since_day=month_start(today), until_day=today
        )
        facts = await self._store.person_facts(person, limit=MAX_FACTS)
        blocked = await self._store.is_blocked(person)
        holding = None if sales is None else await sales.holding(person)
        return page(
            request,
            "person.html",
            person=person,
            path=_path(person),
            quota=quota,
            usage=usage,
            by_model=by_model,
            tools=tool_rows(usage.tools),
            facts=facts,
            blocked=blocked,
            max_tokens=MAX_OVERRIDE_TOKENS,
            limits=limits_text(quota.limits),
            holding=holding,
            # A stored bot's person read by the deployment's plans (their bot not found).
            other_bot=not own_bot,
            stored_bot=scope_of(person) not in (None, DEFAULT_SCOPE),
        )

    async def set_quota(self, request: web.Request) -> web.StreamResponse:
        person = _person(request)
        if person is None:
            return not_found(request, NO_SUCH_PERSON)
        form = await read_form(request)
        choice = form.get("limit", "")
        override: QuotaOverride | None
        if choice == "default":
            override, detail = None, "default limits"
        elif choice == "exempt":
            override, detail = QuotaOverride(person, None), "exempt"
        elif choice == "tokens":
            tokens = form.get("tokens", "").strip()
            if not _TOKENS.fullmatch(tokens) or not 0 < int(tokens) <= MAX_OVERRIDE_TOKENS:
                return bad_request(
                    request,
                    f"A daily token limit is a whole number from 1 to {MAX_OVERRIDE_TOKENS:,}.",
                )
            override, detail = QuotaOverride(person, int(tokens)), f"daily tokens {int(tokens)}"
        else:
            return bad_request(request, "Choose a daily limit, exempt, or the default limits.")
        now = self._clock()
        audit = AuditEntry(now, request[SESSION_KEY].actor, "set_quota", person, detail)
        await self._store.set_person_override(person, override, at=now, audit=audit)
        self._engine.quotas.refresh(person)
        raise web.HTTPSeeOther(f"{PREFIX}/people/{_path(person)}")

    async def block(self, request: web.Request) -> web.StreamResponse:
        person = _person(request)
        if person is None:
            return not_found(request, NO_SUCH_PERSON)
        form = await read_form(request)
        choice = form.get("blocked")
        if choice not in ("yes", "no"):
            return bad_request(request, "Choose to block or to unblock.")
        blocked = choice == "yes"
        now = self._clock()
        action = "block" if blocked else "unblock"
        audit = AuditEntry(now, request[SESSION_KEY].actor, action, person)
        await self._store.set_blocked(person, blocked, at=now, audit=audit)
        self._engine.blocks.refresh(person)
        raise web.HTTPSeeOther(f"{PREFIX}/people/{_path(person)}")

    async def forget_memory(self, request: web.Request) -> web.StreamResponse:
        person = _person(request)
        if person is None:
            return not_found(request, NO_SUCH_PERSON)
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, "Deleting needs the confirmation box ticked.")
        audit = AuditEntry(self._clock(), request[SESSION_KEY].actor, "forget_memory", person)
        try:
            await self._store.forget_person_memory(person, audit)
        finally:  # their chosen language went too (even a failed write may have committed)
            self._engine.languages.refresh(person)
        raise web.HTTPSeeOther(f"{PREFIX}/people/{_path(person)}")


def tool_rows(tools: ToolCalls) -> list[tuple[str, ToolCount, ToolCount]]:
    """This month's tools (each with today's count, zero when none), as the person page
    lists them: the tool as a person reads it, today, this month."""
    today = {count.tool: count for count in tools.today}
    return [
        (
            "tools no toolbox offered" if count.tool == UNKNOWN else shown_tool(count.tool),
            today.get(count.tool, ToolCount(count.tool, 0)),
            count,
        )
        for count in tools.month
    ]


def person_link(person: str) -> str | None:
    """The console page of `person`, or None for a key that has none (the terminal
    console's `console:local`, charged like a person but no Telegram or API user)."""
    return f"{PREFIX}/people/{_path(person)}" if PERSON.fullmatch(person) else None


def limits_text(limits: PersonLimits) -> str:
    """A person's limits in words: each limit, or that there is none of that kind."""
    if limits.exempt:
        return "exempt" if limits.overridden else "exempt (settings)"
    if not limits.any:
        return "none"
    return ", ".join(
        (
            f"{limits.daily_tokens:,} tokens a day"
            if limits.daily_tokens
            else "no daily token limit",
            f"{limits.monthly_tokens:,} tokens a month"
            if limits.monthly_tokens
            else "no monthly token limit",
            f"{limits.daily_consultations:,} consultations a day"
            if limits.daily_consultations
            else "no daily consultation limit",
        )
    )


def _person(request: web.Request) -> str | None:
    person = request.match_info["person"]
    return person if PERSON.fullmatch(person) else None


def _path(person: str) -> str:
    return quote(person, safe="")


def _after(text: str) -> tuple[str, str] | None:
    day, _, person = text.partition("~")
    if _DAY.fullmatch(day) and PERSON.fullmatch(person):
        return day, person
    return None
