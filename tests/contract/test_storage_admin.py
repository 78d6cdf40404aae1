"""The store contract of the operator's console, on SQLite and PostgreSQL
(`tests.store_contract.STORE_KINDS`): the consultation list pages by keyset and filters,
console sessions expire and end, and every action is written with its audit entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.domain.audit import MAX_FIELD_CHARS, AuditEntry
from core.domain.consultation import Message, Role, Status
from core.domain.listing import ConsultationQuery, Cursor
from tests.store_contract import StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store


async def _seed(store: Store, count: int, *, chat: str = "tg:1", at: float = 1000.0) -> list[str]:
    ids = []
    for n in range(count):
        c = make(f"{chat}:{n}", at=at + n, status=Status.COMPLETE if n % 2 else Status.ACTIVE)
        c.initial_request = f"request {n}"
        c.messages = [Message(Role.USER, c.initial_request, at + n)]
        await store.create(c)
        ids.append(c.id)
    return ids


async def test_the_list_pages_newest_first_without_gaps_or_repeats(store: Store) -> None:
    """Keyset pages of 3 over 8 consultations give each once, newest first."""
    ids = await _seed(store, 8)
    seen: list[str] = []
    before: Cursor | None = None
    while True:
        page = await store.list_consultations(ConsultationQuery(before=before, limit=3))
        if not page:
            break
        seen.extend(row.id for row in page)
        before = page[-1].cursor
    assert seen == list(reversed(ids))


async def test_consultations_started_in_the_same_second_page_by_id(store: Store) -> None:
    """Rows with one start time are ordered by id, so no page boundary loses one."""
    for n in range(5):
        await store.create(make(f"tg:{n}", at=500.0))
    first = await store.list_consultations(ConsultationQuery(limit=2))
    rest = await store.list_consultations(ConsultationQuery(before=first[-1].cursor, limit=10))
    ids = [row.id for row in first + rest]
    assert len(set(ids)) == 5
    assert ids == sorted(ids, reverse=True)


async def test_the_list_filters_by_dates_status_chat_and_request_text(store: Store) -> None:
    """Each filter narrows the list; the text matches case aside, `%` and `_` literally."""
    await _seed(store, 6)
    special = make("tg:special", at=2000.0)
    special.initial_request = "Is 100% of A_B Safe?"
    await store.create(special)
    listed = store.list_consultations
    assert len(await listed(ConsultationQuery(since=1002.0, until=1004.0))) == 2
    assert {r.status for r in await listed(ConsultationQuery(status=Status.COMPLETE))} == {
        Status.COMPLETE
    }
    assert [r.chat_key for r in await listed(ConsultationQuery(chat_key="tg:1:3"))] == ["tg:1:3"]
    assert [r.request for r in await listed(ConsultationQuery(text="REQUEST 4"))] == ["request 4"]
    assert [r.id for r in await listed(ConsultationQuery(text="100% of a_b"))] == [special.id]
    assert await listed(ConsultationQuery(text="1_0")) == []
    assert await listed(ConsultationQuery(text="%")) != []  # a literal % is in one request
    assert len(await listed(ConsultationQuery(text="%%"))) == 0


async def test_injection_looking_filters_are_plain_values(store: Store) -> None:
    """A chat key or text carrying SQL is a value that matches nothing."""
    await _seed(store, 2)
    evil = "x' OR '1'='1"
    assert await store.list_consultations(ConsultationQuery(chat_key=evil)) == []
    assert await store.list_consultations(ConsultationQuery(text=evil)) == []
    assert len(await store.list_consultations(ConsultationQuery())) == 2


async def test_a_listed_row_keeps_the_start_of_a_long_request(store: Store) -> None:
    c = make("tg:9")
    c.initial_request = "x" * 5000
    await store.create(c)
    (row,) = await store.list_consultations(ConsultationQuery())
    assert 0 < len(row.request) < 5000


async def test_deleting_a_consultation_takes_its_messages_and_writes_the_audit_entry(
    store: Store, kind: StoreKind, database: str
) -> None:
    """The consultation and its messages go; one audit entry says so; others stay."""
    keep, gone = make("tg:1"), make("tg:2")
    await store.create(keep)
    await store.create(gone)
    entry = AuditEntry(5000.0, "session ab12", "delete_consultation", gone.id)
    assert await store.delete_consultation(gone.id, entry)
    assert await store.get(gone.id) is None
    assert await store.get(keep.id) is not None
    assert await kind.count(database, "messages", consultation_id=gone.id) == 0
    (logged,) = await store.audit_log(before_id=None, limit=10)
    assert (logged.actor, logged.action, logged.target, logged.at) == (
        "session ab12",
        "delete_consultation",
        gone.id,
        5000.0,
    )
    assert not await store.delete_consultation(gone.id, entry)
    assert len(await store.audit_log(before_id=None, limit=10)) == 1


async def test_a_console_session_lives_until_it_ends_and_expired_ones_are_dropped(
    store: Store, kind: StoreKind, database: str
) -> None:
    await store.add_admin_session(
        "old", expires_at=100.0, audit=AuditEntry(50.0, "s old", "sign_in")
    )
    await store.add_admin_session("a", expires_at=900.0, audit=AuditEntry(200.0, "s a", "sign_in"))
    assert await store.admin_session_expiry("a") == 900.0
    assert await store.admin_session_expiry("old") is None  # dropped: expired by 200
    assert await kind.count(database, "admin_sessions") == 1
    assert await store.end_admin_session("a", AuditEntry(300.0, "s a", "sign_out"))
    assert await store.admin_session_expiry("a") is None
    assert not await store.end_admin_session("a", AuditEntry(301.0, "s a", "sign_out"))
    actions = [e.action for e in await store.audit_log(before_id=None, limit=10)]
    assert actions == ["sign_out", "sign_in", "sign_in"]


async def test_the_audit_log_pages_newest_first_and_bounds_its_fields(store: Store) -> None:
    for n in range(5):
        await store.add_audit(AuditEntry(float(n), "s", f"action {n}", "t\x00" + "x" * 2000))
    first = await store.audit_log(before_id=None, limit=2)
    rest = await store.audit_log(before_id=first[-1].id, limit=10)
    assert [e.action for e in first + rest] == [f"action {n}" for n in (4, 3, 2, 1, 0)]
    assert all(len(e.target) == MAX_FIELD_CHARS and "\x00" not in e.target for e in rest)
