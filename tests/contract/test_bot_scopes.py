"""What both stores keep per bot (its scope: its Telegram keys, `core.domain.telegram_keys`,
and its HTTP API keys, `core.domain.api_keys`): the rows keyed by Telegram's own ids are
each bot's (update ids, round keyboards), `forget_bot` deletes everything one bot keeps,
through Telegram and the API, and nothing of another bot's or the terminal's, and the
operator's figures, in all and day by day, can be one bot's."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import pytest

from core.domain.audit import AuditEntry
from core.domain.consultation import ChatSettings, Usage
from core.domain.facts import MemoryPreferences
from core.domain.quotas import QuotaOverride, TokenHold
from core.domain.stats import period_of
from core.domain.tools import ToolUse
from core.domain.usage import Accounting, CallKind, Payer
from tests.store_contract import Rows, make

if TYPE_CHECKING:
    from app.stores import Store

AT = 1_795_694_400.0  # 2026-11-26 12:00 UTC
DAY = "2026-11-26"
MONTH = "2026-11-01"
TIME = ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:00")

OWNERS = {
    "tg:": 0,
    "tg2:": 2,
    "tg20:": 20,
    "api:": None,
    "api2:": None,
    "api20:": None,
    "terminal:": None,
}
"""Whose data a test keeps: the deployment's bot, bot 2 and bot 20 (whose keys start like
bot 2's) through Telegram, then the same three through the API, and the terminal; the
scope of each Telegram bot (whose rows keyed by Telegram's ids are kept too)."""
BOT_OF = {"tg:": 0, "tg2:": 2, "tg20:": 20, "api:": 0, "api2:": 2, "api20:": 20}
"""The bot each prefix's keys belong to (the terminal's are no bot's)."""


async def keep_everything(store: Store, prefix: str, scope: int | None) -> str:
    """Store one of everything a chat and a person keep under keys starting with `prefix`,
    and for a bot its rows keyed by Telegram's ids; the consultation's id."""
    chat, person = f"{prefix}100", f"{prefix}7"
    consultation = make(chat, at=AT, started_by=7)
    await store.create(consultation, starter=person)
    await store.save_chat_settings(chat, ChatSettings(max_rounds=5))
    await store.add_facts(person, person, ["Lives in Riga"], at=AT)
    await store.add_facts(f"{person}@{prefix}-5", person, ["Runs the group"], at=AT)
    await store.save_memory_preferences(person, MemoryPreferences(enabled=False))
    charge = Accounting().charge(
        Usage(10, 2),
        model="m",
        kind=CallKind.ROUND,
        chat=chat,
        payer=Payer(person),
        at=AT,
        tool_uses=(TIME,),
    )
    await store.add_usage([charge])
    await store.save_quota_override(QuotaOverride(person, 100), at=AT)
    hold = TokenHold(str(uuid.uuid4()), person, None, DAY, 10, AT + 900)
    await store.hold_tokens(hold, month=MONTH, now=AT, admit=lambda _: True)
    await store.save_language(person, "ru")
    await store.set_blocked(person, True, at=AT, audit=AuditEntry(AT, "op", "block", person))
    if scope is not None:
        assert await store.remember_update(5, bot=scope, at=AT)
        await store.swap_round_keyboard(-5, None, 9, bot=scope)
    return consultation.id


async def kept(rows: Rows, prefix: str, scope: int | None, consultation_id: str) -> list[int]:
    """How many rows of each kind `keep_everything` stored are there."""
    chat, person = f"{prefix}100", f"{prefix}7"
    counts = [
        await rows("consultations", chat_key=chat),
        await rows("messages", consultation_id=consultation_id),
        await rows("chat_settings", chat_key=chat),
        await rows("memory_facts", person=person),
        await rows("memory_preferences", person=person),
        await rows("usage_daily", scope_key=person),
        await rows("usage_daily", scope_key=chat),
        await rows("tool_usage_daily", scope_key=chat),
        await rows("consultation_starts", person=person),
        await rows("quota_overrides", person=person),
        await rows("quota_holds", person=person),
        await rows("person_languages", person=person),
        await rows("person_activity", person=person),
        await rows("blocked_people", person=person),
    ]
    if scope is not None:
        counts += [
            await rows("telegram_updates", bot=scope),
            await rows("round_keyboards", bot=scope),
        ]
    return counts


async def test_forget_bot_deletes_everything_of_that_bot_and_nothing_else(
    store: Store, rows: Rows
) -> None:
    """forget_bot(2) leaves no row of bot 2 in any table, its API users' and sessions'
    included, and every row of the deployment's bot, of bot 20 (`tg20:`, `api20:` keys)
    and of the terminal as it was."""
    ids = {prefix: await keep_everything(store, prefix, scope) for prefix, scope in OWNERS.items()}
    before = {prefix: await kept(rows, prefix, OWNERS[prefix], ids[prefix]) for prefix in OWNERS}
    assert all(count > 0 for counts in before.values() for count in counts)
    assert before["tg:"] == before["tg2:"] == before["tg20:"]

    assert await store.forget_bot(2) == 2  # its Telegram chat's and its API session
    for prefix, scope in OWNERS.items():
        after = await kept(rows, prefix, scope, ids[prefix])
        gone = BOT_OF.get(prefix) == 2
        assert after == ([0] * len(after) if gone else before[prefix]), prefix
    assert await store.forget_bot(2) == 0  # nothing left: forgetting again is harmless


async def test_a_bot_that_kept_nothing_is_forgotten_without_touching_others(
    store: Store, rows: Rows
) -> None:
    """forget_bot of a bot with no data deletes nothing at all."""
    await keep_everything(store, "tg:", 0)
    assert await store.forget_bot(3) == 0
    assert await rows("consultations") == 1 and await rows("telegram_updates") == 1


async def test_the_same_update_id_is_new_once_in_each_bot(store: Store) -> None:
    """Update 5 of the deployment's bot and update 5 of bot 2 are both new; a redelivery of
    either, even at the same moment as the other's, is not."""
    firsts = await asyncio.gather(
        store.remember_update(5, at=AT), store.remember_update(5, bot=2, at=AT)
    )
    assert firsts == [True, True]
    assert not await store.remember_update(5, at=AT + 1)
    assert not await store.remember_update(5, bot=2, at=AT + 1)
    assert await store.remember_update(5, bot=3, at=AT + 1)


async def test_each_bot_keeps_its_own_round_keyboard_of_the_same_chat(store: Store) -> None:
    """The same chat id in two bots has two keyboards; forgetting one bot's chat keeps the
    other's."""
    assert await store.swap_round_keyboard(-5, None, 10) is None
    assert await store.swap_round_keyboard(-5, None, 20, bot=2) is None
    assert await store.swap_round_keyboard(-5, None, 11) == 10
    assert await store.forget_round_keyboards(-5, bot=2) == 1
    assert await store.swap_round_keyboard(-5, None, 21, bot=2) is None
    assert await store.swap_round_keyboard(-5, None, 12) == 11


async def test_the_figures_of_one_bot_count_its_consultations_and_people_only(
    store: Store,
) -> None:
    """stats(scope=2) counts bot 2's starts, people and usage, through Telegram and the API
    (`tg2:`, `api2:`), never bot 20's; stats() counts everyone; a consultation's starter is
    a person of its own bot (`tg2:7`, not `tg:7`)."""
    for prefix, scope in OWNERS.items():
        await keep_everything(store, prefix, scope)
    await store.create(make("tg2:101", at=AT, started_by=8))  # a person with no usage
    period = period_of(AT, 1)
    everyone = await store.stats(period)
    second = await store.stats(period, scope=2)
    first = await store.stats(period, scope=0)
    assert (everyone.started, second.started, first.started) == (8, 3, 2)
    assert (second.people, first.people) == (3, 2)  # tg2:7, tg2:8, api2:7; tg:7, api:7
    assert everyone.people == 8  # those, tg20:7, api20:7 and terminal:7
    assert second.prompt_tokens == first.prompt_tokens == 20
    assert everyone.prompt_tokens == 70
    assert [t.calls for t in second.tools] == [2]
    assert (await store.stats(period, scope=4)).started == 0


async def test_the_days_of_one_bot_count_its_consultations_and_tokens_only(
    store: Store,
) -> None:
    """daily_stats(scope=2) counts on each day bot 2's starts and tokens (Telegram's and
    the API's) and nothing of bot 20's or the terminal's; daily_stats() counts everyone."""
    for prefix, scope in OWNERS.items():
        await keep_everything(store, prefix, scope)
    period = period_of(AT, 3)
    everyone = await store.daily_stats(period)
    second = await store.daily_stats(period, scope=2)
    nobody = await store.daily_stats(period, scope=4)
    assert [d.day for d in second] == [d.day for d in everyone] == [d.day for d in nobody]
    assert [d.started for d in everyone] == [0, 0, 7]
    assert [d.started for d in second] == [0, 0, 2]
    assert [d.prompt_tokens for d in second] == [0, 0, 20]
    assert [d.prompt_tokens for d in everyone] == [0, 0, 70]
    assert [d.started + d.prompt_tokens for d in nobody] == [0, 0, 0]


async def test_a_scope_that_names_no_bot_forgets_and_counts_nothing(
    store: Store, rows: Rows
) -> None:
    """forget_bot and stats refuse a negative, oversized or non-integer scope before any
    statement runs: nothing is deleted."""
    await keep_everything(store, "tg:", 0)
    for wrong in (-1, 2**63, True, "2"):
        with pytest.raises(ValueError, match="scope"):
            await store.forget_bot(wrong)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="scope"):
            await store.stats(period_of(AT, 1), scope=wrong)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="scope"):
            await store.daily_stats(period_of(AT, 1), scope=wrong)  # type: ignore[arg-type]
    assert await rows("consultations") == 1 and await rows("telegram_updates") == 1
