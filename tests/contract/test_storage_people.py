"""The store's people for the console (`list_people`, `person_facts`) and the operator's
actions on a person (`set_person_override`, `set_blocked`, `forget_person_memory`), on
SQLite and PostgreSQL: pages in order without repeats, search as plain text, each change
logged in its own transaction and nothing logged when nothing changed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.audit import AuditEntry
from core.models import Usage
from core.people import PeopleQuery
from core.quotas import QuotaOverride
from core.usage import CallKind, Charge

if TYPE_CHECKING:
    from app.stores import Store

TODAY = "2026-11-26"
MONTH = "2026-11-01"


def charge(person: str, day: str, tokens: int) -> Charge:
    return Charge(day, f"chat-{person}", "m", CallKind.ROUND, Usage(tokens, 1), 0.0, True, person)


def entry(action: str, target: str) -> AuditEntry:
    return AuditEntry(1.0, "op", action, target)


async def actions(store: Store) -> list[tuple[str, str]]:
    return [(e.action, e.target) for e in await store.audit_log(before_id=None, limit=50)]


async def test_people_are_listed_newest_activity_first_with_their_totals(store: Store) -> None:
    await store.add_usage(
        [
            charge("tg:1", "2026-10-30", 50),  # last month: not in the month's total
            charge("tg:1", "2026-11-20", 100),
            charge("tg:2", TODAY, 10),
            charge("tg:2", TODAY, 5),
            charge("tg:3", "2026-11-25", 7),
            charge("tg:%_", TODAY, 1),
        ]
    )
    await store.save_quota_override(QuotaOverride("tg:3", None), at=1.0)
    query = PeopleQuery(TODAY, MONTH)
    rows = await store.list_people(query)
    assert [r.person for r in rows] == ["tg:%_", "tg:2", "tg:3", "tg:1"]
    two = rows[1]
    assert (two.last_day, two.tokens_today, two.tokens_month, two.override) == (
        TODAY, 17, 17, None,
    )  # fmt: skip
    assert rows[2].override == QuotaOverride("tg:3", None)
    assert (rows[3].tokens_today, rows[3].tokens_month) == (0, 101)
    paged, after = [], None
    while page := await store.list_people(PeopleQuery(TODAY, MONTH, after=after, limit=1)):
        paged += [r.person for r in page]
        after = (page[-1].last_day, page[-1].person)
    assert paged == [r.person for r in rows]
    searched = await store.list_people(PeopleQuery(TODAY, MONTH, search="%_"))
    assert [r.person for r in searched] == ["tg:%_"]  # wildcards are plain text
    assert await store.list_people(PeopleQuery(TODAY, MONTH, search="nobody")) == []


async def test_each_action_is_logged_with_it_and_no_change_logs_nothing(store: Store) -> None:
    person = "tg:5"
    assert await store.set_person_override(person, None, at=1.0, audit=entry("q", person)) is False
    override = QuotaOverride(person, 300)
    assert await store.set_person_override(person, override, at=1.0, audit=entry("q", person))
    assert await store.load_quota_override(person) == override
    assert await store.set_person_override(person, None, at=2.0, audit=entry("q0", person))
    assert await store.load_quota_override(person) is None
    assert await store.set_blocked(person, True, at=1.0, audit=entry("block", person))
    assert not await store.set_blocked(person, True, at=1.0, audit=entry("block", person))
    assert await store.is_blocked(person) and not await store.is_blocked("tg:6")
    assert await store.set_blocked(person, False, at=1.0, audit=entry("unblock", person))
    assert not await store.set_blocked(person, False, at=1.0, audit=entry("unblock", person))
    assert not await store.is_blocked(person)
    await store.add_facts(person, person, ["likes tea"], at=1.0)
    await store.add_facts("tg:-100", person, ["in a group"], at=2.0)
    await store.add_facts("tg:7", "tg:7", ["someone else"], at=3.0)
    assert [f.text for f in await store.person_facts(person, limit=10)] == [
        "in a group",
        "likes tea",
    ]
    assert len(await store.person_facts(person, limit=1)) == 1
    assert await store.forget_person_memory(person, entry("forget", person)) == 2
    assert await store.person_facts(person, limit=10) == []
    assert len(await store.person_facts("tg:7", limit=10)) == 1
    assert await actions(store) == [
        ("forget", person),
        ("unblock", person),
        ("block", person),
        ("q0", person),
        ("q", person),
    ]
