"""The keys a bot's data is stored under (`core.domain.telegram_keys`): scope 0 keeps the keys
stored before bots had scopes, scope n writes `tg<n>:`, and a key is read back to exactly the
scope that built it, whatever a stranger puts in a key."""

from __future__ import annotations

import re

import pytest

from core.domain import telegram_keys as keys
from core.domain.facts import memory_scope, person_of, telegram_person
from core.domain.quotas import QuotaConfig, limits_for


def test_scope_zero_keeps_todays_keys() -> None:
    """The deployment's bot builds exactly the keys stored before scopes existed."""
    assert keys.chat_key(-100123) == "tg:-100123"
    assert keys.chat_key(-100123, 7) == "tg:-100123:7"
    assert keys.person_key(42) == telegram_person(42) == "tg:42"
    assert keys.turn_id(5) == "tg:5"
    assert keys.file_user_key(42) == "tg-user:42"
    assert keys.file_chat_key("tg:-1") == "tg-chat:tg:-1"


def test_scope_n_writes_its_number_where_scope_zero_writes_tg() -> None:
    """Bot 2's keys are `tg2:` where the deployment's are `tg:`."""
    assert keys.chat_key(-100123, 7, scope=2) == "tg2:-100123:7"
    assert keys.person_key(42, 2) == telegram_person(42, 2) == "tg2:42"
    assert keys.turn_id(5, 2) == "tg2:5"
    assert keys.file_user_key(42, 2) == "tg2-user:42"
    assert keys.file_chat_key("tg2:-1", 2) == "tg2-chat:tg2:-1"


@pytest.mark.parametrize("scope", [0, 1, 2, 20, 2**63 - 1])
def test_every_key_is_read_back_to_the_scope_that_built_it(scope: int) -> None:
    """Chat, topic, person and group-owner keys all read back to their own scope."""
    owner = memory_scope(keys.person_key(7, scope), keys.chat_key(-5, scope=scope)).owner
    for key in (keys.chat_key(1, scope=scope), keys.chat_key(-5, 3, scope), owner):
        assert keys.scope_of(key) == scope
        assert key.startswith(keys.key_range(scope))
    assert person_of(owner) == keys.person_key(7, scope)


def test_no_scope_s_key_range_holds_another_scope_s_keys() -> None:
    """`tg2:` is not a prefix of bot 20's keys, nor `tg:` of bot 2's: a range is exact."""
    assert not keys.chat_key(1, scope=20).startswith(keys.key_range(2))
    assert not keys.chat_key(1, scope=2).startswith(keys.key_range(0))


@pytest.mark.parametrize(
    "key",
    [
        *("api:tg:1", "tg0:1", "tg02:1", "tg-1:1", "tg-user:5", "TG:1", "tg", "", "tg2"),
        *("tg٢:1", "tg" + "9" * 19 + ":1", "tg" + "9" * 20 + ":1", "\x00tg:1"),
    ],
)
def test_a_key_no_bot_built_has_no_scope(key: str) -> None:
    """Forged or foreign keys (leading zeros, a sign, other digits, too long) are no bot's."""
    assert keys.scope_of(key) is None
    assert not keys.is_telegram(key)


def test_person_of_keeps_other_keys_whole() -> None:
    """The API's and the terminal's owners are their own person, `@` or not."""
    assert person_of("api:ann@example.com") == "api:ann@example.com"
    assert person_of("tg0:1@tg0:2") == "tg0:1@tg0:2"


@pytest.mark.parametrize("scope", [-1, 2**63, True, 1.0, "2"])
def test_a_scope_outside_the_bots_ids_is_refused(scope: object) -> None:
    """A negative, oversized or non-integer scope builds no key."""
    with pytest.raises(ValueError, match="scope"):
        keys.chat_key(1, scope=scope)  # type: ignore[arg-type]


def test_the_person_pattern_matches_exactly_the_person_keys() -> None:
    """The pattern the console checks a person in a path with: any bot's, nothing else."""
    pattern = re.compile(keys.PERSON_PATTERN)
    assert all(pattern.fullmatch(k) for k in ("tg:42", "tg2:42", keys.person_key(9, 2**63 - 1)))
    for forged in ("tg0:42", "tg2:042", "tg2:-42", "tg:0", "tg2:", "tg22"):
        assert pattern.fullmatch(forged) is None


def test_unscoped_is_the_deployment_bots_form_of_a_telegram_key() -> None:
    """A Telegram user's key in any bot, as the deployment's bot writes it; others whole."""
    assert keys.unscoped("tg2:42") == keys.unscoped("tg:42") == "tg:42"
    assert keys.unscoped("tg20:-5:7") == "tg:-5:7"
    for other in ("api:tg2:42", "tg02:42", "tg0:42", "terminal:1"):
        assert keys.unscoped(other) == other


def test_a_telegram_id_the_deployment_exempts_is_exempt_in_every_bot() -> None:
    """QUOTA_EXEMPT_USER_IDS lists Telegram users: the same id in bot 2 is exempt too; an
    API user is exempt only as listed."""
    config = QuotaConfig(user_daily_tokens=10, exempt=frozenset({"tg:42", "api:ann"}))
    for person in ("tg:42", "tg2:42", "tg20:42", "api:ann"):
        assert limits_for(config, person, None).exempt, person
    for person in ("tg2:43", "api:tg:42", "tg02:42"):
        assert not limits_for(config, person, None).exempt, person
