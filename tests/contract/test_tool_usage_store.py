"""What both stores count of the tools a reply called (`Charge.tools`, `tool_usage_daily`,
m030): added to the person's, the chat's and the client key's days in the transaction that
stores the reply (never for a superseded one), read per tool for a day and its month in one
read, summed over the chats for the operator's figures, moved with a re-keyed chat and
deleted by forgetting the chat or the person. A model inventing names adds to one row."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

import pytest

from core.domain.audit import AuditEntry
from core.domain.consultation import Message, Role, Status, Usage
from core.domain.errors import TurnSuperseded
from core.domain.stats import period_of
from core.domain.tool_usage import UNKNOWN, ToolCalls, ToolCount
from core.domain.tools import ToolFailure, ToolUse
from core.domain.usage import Accounting, CallKind, Charge, Payer, ScopeKind
from tests.store_contract import Rows, make

if TYPE_CHECKING:
    from app.stores import Store

DAY = "2026-11-26"
AT = 1_795_694_400.0  # 2026-11-26 12:00 UTC
TIME = ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:00")
SEARCH = ToolUse("docs__search", "docs", "search", '{"q": "hours"}', "open at 9")
HUNG = ToolUse(
    "docs__search", "docs", "search", "{}", error="timed out", failure=ToolFailure.TIMEOUT
)
FETCH = ToolUse("web__fetch", "web", "fetch", "{}", "<html>")


def invented(n: int) -> ToolUse:
    return ToolUse(
        f"made_up_{n}", "", f"made_up_{n}", "{}", error="no such tool",
        failure=ToolFailure.UNKNOWN_TOOL,
    )  # fmt: skip


def charge(
    *uses: ToolUse,
    chat: str = "chat:1",
    day: str = DAY,
    person: str | None = "tg:7",
    client: str | None = None,
) -> Charge:
    built = Accounting().charge(
        Usage(10, 2),
        model="m",
        kind=CallKind.ROUND,
        chat=chat,
        payer=Payer(person, client),
        at=AT,
        tool_uses=uses,
    )
    return dataclasses.replace(built, day=day)


async def answer(store: Store, chat: str, the_charge: Charge, *, expected: int = 0) -> str:
    """A new consultation of `chat` whose first round is stored with `the_charge`; its id."""
    consultation = make(chat)
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Which city?", 1001.0),
        expected_round=expected,
        current_round=expected + 1,
        status=Status.ACTIVE,
        last_activity_at=1001.0,
        charge=the_charge,
    )
    return consultation.id


async def test_a_replys_tool_calls_count_per_tool_for_its_person_chat_and_client(
    store: Store,
) -> None:
    """A reply that called two tools twice (one of them failing once) and one once counts
    so for each of its scopes, today and this month; a day earlier in the month counts in
    the month only, the month before not at all; other people see none."""
    turn = charge(TIME, SEARCH, TIME, HUNG, FETCH, chat="api:s1", person="api:u1", client="key-a")
    await answer(store, "api:s1", turn)
    await store.add_usage(
        [
            charge(TIME, chat="api:s1", person="api:u1", client="key-a", day="2026-11-02"),
            charge(TIME, chat="api:s1", person="api:u1", client="key-a", day="2026-10-31"),
        ]
    )
    today = (
        ToolCount("docs__search", 2, 1),
        ToolCount("time__get_current_time", 2, 0),
        ToolCount("web__fetch", 1, 0),
    )
    month = (
        ToolCount("docs__search", 2, 1),
        ToolCount("time__get_current_time", 3, 0),
        ToolCount("web__fetch", 1, 0),
    )
    for scope, key in [
        (ScopeKind.PERSON, "api:u1"),
        (ScopeKind.CHAT, "api:s1"),
        (ScopeKind.CLIENT, "key-a"),
    ]:
        assert await store.tool_calls_of(scope, key, day=DAY) == ToolCalls(today, month)
    later = await store.tool_calls_of(ScopeKind.PERSON, "api:u1", day="2026-11-27")
    assert later == ToolCalls((), month)
    assert await store.tool_calls_of(ScopeKind.PERSON, "tg:7", day=DAY) == ToolCalls()


async def test_invented_tool_names_count_as_one_unknown_row(store: Store, rows: Rows) -> None:
    """A model that names five hundred tools no toolbox offered (and one name outside
    OpenAI's rule) adds to one "unknown" row per scope, never a row per name."""
    uses = [invented(n) for n in range(500)]
    uses.append(ToolUse("x" * 65, "", "", "{}", error="no such tool", failure=None))
    await answer(store, "chat:1", charge(*uses, TIME))
    found = await store.tool_calls_of(ScopeKind.PERSON, "tg:7", day=DAY)
    assert found.today == (ToolCount(TIME.name, 1, 0), ToolCount(UNKNOWN, 501, 501))
    assert await rows("tool_usage_daily") == 4  # person and chat: unknown and the clock


async def test_a_superseded_reply_counts_no_tool_calls_and_a_follow_up_counts_once(
    store: Store,
) -> None:
    """The tool calls go with the reply's compare-and-set, as its tokens do."""
    consultation_id = await answer(store, "chat:1", charge(TIME))
    with pytest.raises(TurnSuperseded):
        await store.record_reply(
            consultation_id,
            Message(Role.ASSISTANT, "again", 1002.0),
            expected_round=0,
            current_round=1,
            status=Status.ACTIVE,
            last_activity_at=1002.0,
            charge=charge(TIME, SEARCH),
        )
    await store.set_status(consultation_id, Status.COMPLETE, at=1003.0)
    answered = Message(Role.ASSISTANT, "Noon.", 1011.0)
    follow_up = dataclasses.replace(charge(HUNG), kind=CallKind.FOLLOW_UP)
    await store.record_follow_up(
        consultation_id, answered, expected_follow_ups=0, last_activity_at=1011.0, charge=follow_up
    )
    with pytest.raises(TurnSuperseded):
        await store.record_follow_up(
            consultation_id,
            answered,
            expected_follow_ups=0,
            last_activity_at=1012.0,
            charge=follow_up,
        )
    found = await store.tool_calls_of(ScopeKind.CHAT, "chat:1", day=DAY)
    assert found.today == (ToolCount("docs__search", 1, 1), ToolCount(TIME.name, 1, 0))


async def test_tool_calls_of_many_replies_stored_at_once_each_count(store: Store) -> None:
    """Twenty chats' replies by one person stored at once (one batch where the store
    batches) and charges added meanwhile: the person's counts are their exact sum."""

    await asyncio.gather(
        *(answer(store, f"chat:{n}", charge(TIME, HUNG, chat=f"chat:{n}")) for n in range(20)),
        *(store.add_usage([charge(TIME), charge(SEARCH)]) for _ in range(5)),
    )
    found = await store.tool_calls_of(ScopeKind.PERSON, "tg:7", day=DAY)
    assert found.today == (ToolCount("docs__search", 25, 20), ToolCount(TIME.name, 25, 0))
    chat = await store.tool_calls_of(ScopeKind.CHAT, "chat:3", day=DAY)
    assert chat.today == (ToolCount("docs__search", 1, 1), ToolCount(TIME.name, 1, 0))


async def test_the_figures_count_every_chats_tool_calls_once(store: Store) -> None:
    """The operator's figures sum the chats' rows over the period: each call once, however
    many scopes it counted for."""
    await answer(store, "chat:1", charge(TIME, HUNG, client="key-a"))
    await answer(store, "chat:2", charge(TIME, chat="chat:2", person="tg:8"))
    await store.add_usage([charge(FETCH, chat="chat:3", day="2026-11-20")])
    period = period_of(AT, 1)
    stats = await store.stats(period)
    assert stats.tools == (ToolCount("docs__search", 1, 1), ToolCount(TIME.name, 2, 0))
    week = await store.stats(period_of(AT, 7))
    assert ToolCount("web__fetch", 1, 0) in week.tools


async def test_forgetting_deletes_the_persons_or_the_chats_tool_calls_only(
    store: Store, rows: Rows
) -> None:
    """Forgetting a person (/forget, the console) deletes their tool calls and no one
    else's, nor the chat's; forgetting a chat deletes the chat's; re-keying a chat moves
    its counts, added to the new key's of the same day and tool."""
    await answer(store, "chat:1", charge(TIME, SEARCH))
    await answer(store, "chat:2", charge(TIME, chat="chat:2", person="tg:8"))
    await store.forget_memory("tg:7")
    assert await store.tool_calls_of(ScopeKind.PERSON, "tg:7", day=DAY) == ToolCalls()
    assert (await store.tool_calls_of(ScopeKind.PERSON, "tg:8", day=DAY)).today
    assert (await store.tool_calls_of(ScopeKind.CHAT, "chat:1", day=DAY)).today

    audit = AuditEntry(AT, "admin", "forget_memory", "tg:8")
    await store.forget_person_memory("tg:8", audit)
    assert await rows("tool_usage_daily", scope_kind="person") == 0

    await store.move_chat("chat:1", "chat:2")
    moved = await store.tool_calls_of(ScopeKind.CHAT, "chat:2", day=DAY)
    assert moved.today == (ToolCount("docs__search", 1, 0), ToolCount(TIME.name, 2, 0))
    assert await store.tool_calls_of(ScopeKind.CHAT, "chat:1", day=DAY) == ToolCalls()

    await store.forget_chat("chat:2")
    assert await rows("tool_usage_daily") == 0
