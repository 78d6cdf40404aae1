"""The HTTP API's keys per bot (`core.domain.api_keys`): scope 0 keeps the keys stored
before the API named bots, bot n's start with its own range, and no range is a prefix of
another scope's keys."""

from __future__ import annotations

import pytest

from core.domain import api_keys, telegram_keys
from core.domain.api_keys import client_key, key_range, named_person, person_key, session_key


def test_the_deployments_bot_keeps_the_keys_stored_before_bots() -> None:
    """Scope 0's session, user and client keys are exactly the old ones."""
    assert session_key("3f0c") == session_key("3f0c", 0) == "api:3f0c"
    assert person_key("u-1") == "api:u-1"
    assert client_key("token:ab12") == "token:ab12"


def test_a_stored_bots_keys_start_with_its_own_range() -> None:
    """Bot 2's session, user and client keys start with `api2:`."""
    assert session_key("3f0c", 2) == "api2:3f0c"
    assert person_key("u-1", 2) == "api2:u-1"
    assert client_key("token:ab12", 2) == "api2:token:ab12"


@pytest.mark.parametrize("user", ["u-1", "2:u-1", "0:x", ":x", "api2:u-1"])
def test_no_scopes_range_is_a_prefix_of_another_scopes_keys(user: str) -> None:
    """Whatever a userId is, no key of one scope starts with another scope's range, nor
    with a Telegram range (which is how the stores find one bot's rows)."""
    scopes = (0, 2, 20, 200)
    for scope in scopes:
        key = person_key(user, scope)
        owners = [other for other in scopes if key.startswith(key_range(other))]
        assert owners == [scope], (user, scope)
        assert not any(key.startswith(telegram_keys.key_range(s)) for s in scopes)


@pytest.mark.parametrize("scope", [-1, 2**63, True, "2", 1.0])
def test_a_scope_that_names_no_bot_is_refused(scope: object) -> None:
    for build in (api_keys.key_range, lambda s: client_key("c", s)):
        with pytest.raises(ValueError, match="scope"):
            build(scope)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scope", "user"), [(0, "u-1"), (7, "team.a@example.com"), (7, "2:x"), (2**63 - 1, "u")]
)
def test_a_person_key_is_read_back_as_built(scope: int, user: str) -> None:
    """`named_person` takes exactly what `person_key` builds, of every scope."""
    assert named_person(person_key(user, scope)) == person_key(user, scope)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "api:",
        "api7:",
        "api0:u-1",
        "api07:u-1",
        "api-1:u-1",
        "api+7:u-1",
        "api 7:u-1",
        "api7 :u-1",
        "API7:u-1",
        "api7x:u-1",
        "api\u0663:u-1",
        "api9223372036854775808:u-1",
        "api99999999999999999999:u-1",
        "api7:two words",
        "api7:two!words",
        "api7:u-1\n",
        "api7:" + "u" * 65,
        "tg7:42",
        "7",
    ],
)
def test_anything_else_names_no_api_person(text: str) -> None:
    """Scope 0 written as a number, leading zeros, signs, spaces, another case, non-ASCII
    digits, a scope past MAX_SCOPE, a userId the API refuses, a Telegram key: no one."""
    assert named_person(text) is None
