"""What both stores keep of the bots an operator added (`m031_bots`, `BotRegistry`): a bot
stored once per Telegram bot, read back as it was given, changed and removed by id; a
removed bot's row and id kept, and given back when it is added again; an add that finds
the bot stored changes nothing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from core.domain.bots import BotExists, BotProfile, NewBot
from tests.store_contract import Rows

if TYPE_CHECKING:
    from app.stores import Store

AT = 1_795_694_400.0


def new_bot(telegram_id: int = 777, username: str = "shop_bot", **fields: object) -> NewBot:
    return NewBot(
        telegram_id=telegram_id,
        username=username,
        token_cipher=f"sealed-{telegram_id}",
        token_tail="wxyz",
        **fields,  # type: ignore[arg-type]
    )


async def test_an_added_bot_reads_back_as_given(store: Store) -> None:
    """A bot is stored with an id, its settings, label and sealed token, enabled."""
    profile = BotProfile(role="lawyer", rounds=4, models=("a", "b"), model="b", language="de")
    added = await store.bots.add_bot(new_bot(label="Shop", profile=profile), at=AT)
    assert added.id >= 1
    assert (added.telegram_id, added.username, added.label) == (777, "shop_bot", "Shop")
    assert (added.token_cipher, added.token_tail, added.enabled) == ("sealed-777", "wxyz", True)
    assert added.profile == profile
    assert (added.created_at, added.updated_at, added.removed_at) == (AT, AT, None)
    assert await store.bots.bots() == [added]
    assert await store.bots.count_bots() == 1


async def test_the_same_telegram_bot_is_stored_once(store: Store, rows: Rows) -> None:
    """Adding a Telegram bot already stored raises BotExists naming it and stores nothing."""
    first = await store.bots.add_bot(new_bot(), at=AT)
    with pytest.raises(BotExists) as refused:
        await store.bots.add_bot(new_bot(username="renamed", label="other"), at=AT + 1)
    assert refused.value.existing == first
    assert await rows("bots") == 1
    assert await store.bots.bots() == [first]


async def test_concurrent_adds_of_one_bot_store_it_once(store: Store, rows: Rows) -> None:
    """Two adds of one Telegram bot at once: one is stored, the other refused."""
    outcomes = await asyncio.gather(
        store.bots.add_bot(new_bot(), at=AT),
        store.bots.add_bot(new_bot(), at=AT),
        return_exceptions=True,
    )
    assert sum(isinstance(o, BotExists) for o in outcomes) == 1
    assert await rows("bots") == 1


async def test_bots_are_listed_by_id_and_changed_by_id(store: Store) -> None:
    """A change touches only what it names, on that bot, and moves its updated_at."""
    one = await store.bots.add_bot(new_bot(1, "one_bot"), at=AT)
    two = await store.bots.add_bot(new_bot(2, "two_bot"), at=AT)
    assert [b.id for b in await store.bots.bots()] == [one.id, two.id]
    assert two.id > one.id
    changed = await store.bots.update_bot(two.id, at=AT + 5, enabled=False)
    assert changed is not None
    assert (changed.enabled, changed.profile, changed.updated_at) == (False, BotProfile(), AT + 5)
    relabelled = await store.bots.update_bot(
        two.id, at=AT + 6, label="Two", profile=BotProfile(rounds=2)
    )
    assert relabelled is not None
    assert (relabelled.enabled, relabelled.label, relabelled.profile.rounds) == (False, "Two", 2)
    assert (await store.bots.bots())[0] == one
    assert await store.bots.update_bot(9999, at=AT, enabled=True) is None


async def test_a_removed_bot_keeps_its_row_and_gets_its_id_back(store: Store, rows: Rows) -> None:
    """Removing hides and disables a bot; adding the same Telegram bot again revives its id."""
    kept = await store.bots.add_bot(new_bot(label="Old", profile=BotProfile(rounds=3)), at=AT)
    other = await store.bots.add_bot(new_bot(2, "two_bot"), at=AT)
    assert await store.bots.remove_bot(kept.id, at=AT + 1)
    assert not await store.bots.remove_bot(kept.id, at=AT + 2)
    assert not await store.bots.remove_bot(9999, at=AT + 2)
    assert await store.bots.bots() == [other]
    assert await store.bots.count_bots() == 1
    removed = (await store.bots.bots(removed=True))[0]
    assert (removed.id, removed.enabled, removed.removed_at) == (kept.id, False, AT + 1)
    assert await store.bots.update_bot(kept.id, at=AT + 2, enabled=True) is None
    again = await store.bots.add_bot(new_bot(username="shop2_bot"), at=AT + 3)
    assert (again.id, again.username, again.label, again.profile) == (
        kept.id, "shop2_bot", "", BotProfile(),
    )  # fmt: skip
    assert (again.enabled, again.removed_at, again.created_at) == (True, None, AT + 3)
    assert await rows("bots") == 2


async def test_settings_edited_behind_the_store_read_as_defaults(
    store: Store, kind: object, database: str
) -> None:
    """A settings value that no longer parses lists the bot with the defaults, not a failure."""
    from tests.store_contract import StoreKind

    assert isinstance(kind, StoreKind)
    added = await store.bots.add_bot(new_bot(profile=BotProfile(rounds=3)), at=AT)
    await kind.execute(database, "UPDATE bots SET settings = $1", '{"rounds": "many", "x": 1}')
    assert (await store.bots.bots())[0].profile == BotProfile()
    assert added.profile.rounds == 3


async def test_a_bots_api_token_is_kept_as_its_digest_once_and_revoked_on_removal(
    store: Store, rows: Rows
) -> None:
    """A bot's API token digest reads back with the bot; another bot cannot take the same
    one (BotExists naming its holder, nothing changed); None takes it away; a removed bot
    takes none, loses its own, and comes back without one when added again."""
    first = await store.bots.add_bot(new_bot(), at=AT)
    second = await store.bots.add_bot(new_bot(888, "desk_bot"), at=AT)
    assert first.api_token_hash is None
    given = await store.bots.set_bot_api_token(first.id, "a" * 64, at=AT + 1)
    assert given is not None and given.api_token_hash == "a" * 64
    assert given.updated_at == AT + 1
    with pytest.raises(BotExists) as taken:
        await store.bots.set_bot_api_token(second.id, "a" * 64, at=AT + 2)
    assert taken.value.existing.id == first.id
    assert [bot.api_token_hash for bot in await store.bots.bots()] == ["a" * 64, None]
    assert await rows("bots", api_token_hash="a" * 64) == 1
    again = await store.bots.set_bot_api_token(first.id, "a" * 64, at=AT + 3)
    assert again is not None and again.api_token_hash == "a" * 64  # its own: no conflict
    cleared = await store.bots.set_bot_api_token(first.id, None, at=AT + 4)
    assert cleared is not None and cleared.api_token_hash is None
    assert await store.bots.set_bot_api_token(second.id, "a" * 64, at=AT + 5) is not None
    assert await store.bots.remove_bot(second.id, at=AT + 6)
    assert await store.bots.set_bot_api_token(second.id, "b" * 64, at=AT + 7) is None
    (removed,) = [bot for bot in await store.bots.bots(removed=True) if bot.id == second.id]
    assert removed.api_token_hash is None
    back = await store.bots.add_bot(new_bot(888, "desk_bot"), at=AT + 8)
    assert (back.id, back.api_token_hash) == (second.id, None)
    assert await store.bots.set_bot_api_token(999, "c" * 64, at=AT + 9) is None
