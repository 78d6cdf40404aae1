"""The keys the HTTP API's data is stored under, built for one bot's scope.

Invariants:
- a scope is a bot as in `core.domain.telegram_keys`: 0 the deployment's own, n the bots
  table's bot n. Scope 0 keeps the keys stored before the API named bots (`api:`), so no
  stored key is ever rewritten; scope n writes `api<n>:` where scope 0 writes `api:`;
- every key of one scope starts with `key_range(scope)` and no key of another scope does
  (`api2:` is not a prefix of `api20:` nor of any `api:` key): the same session, user,
  conversation or client under two bots is two keys, so two consultations, two memories
  and two quotas;
- an API client (`token:…`, `addr:…`) is scope 0's as it is, and bot n's behind its range,
  so an idempotency key or a client's usage under one bot never answers for another;
- `named_person` reads back exactly the person keys `person_key` builds: `api:<userId>`
  (scope 0) or `api<n>:<userId>` with n written without leading zeros up to `MAX_SCOPE`,
  and a userId as the API takes one (`api.schemas.USER_ID_PATTERN`, at most 64 chars);
  anything else (`api0:`, `api02:`, an empty or foreign userId) names no one.
Pure: no I/O.
"""

from __future__ import annotations

import re

from core.domain.telegram_keys import DEFAULT_SCOPE, MAX_SCOPE, check_scope

_PERSON = re.compile(r"api([1-9][0-9]{0,18})?:[A-Za-z0-9_.:@-]{1,64}")


def key_range(scope: int = DEFAULT_SCOPE) -> str:
    """What every API key of the scope starts with: `api:` for the deployment's bot,
    `api<n>:` for bot n."""
    return "api:" if check_scope(scope) == DEFAULT_SCOPE else f"api{scope}:"


def session_key(session_id: str, scope: int = DEFAULT_SCOPE) -> str:
    """The chat key of an API session (`api:<session id>`)."""
    return key_range(scope) + session_id


def person_key(user_id: str, scope: int = DEFAULT_SCOPE) -> str:
    """An API user as quotas, memory and the console name people (`api:<userId>`)."""
    return key_range(scope) + user_id


def client_key(client: str, scope: int = DEFAULT_SCOPE) -> str:
    """Who a request counts for under the bot of `scope`: the client itself for the
    deployment's bot, `api<n>:<client>` for bot n."""
    return client if check_scope(scope) == DEFAULT_SCOPE else key_range(scope) + client


def named_person(text: str) -> str | None:
    """The API person key `text` is, exactly as `person_key` builds it (`api:alice`,
    `api7:alice`); None for anything else (see the module's invariants)."""
    found = _PERSON.fullmatch(text)
    if found is None:
        return None
    digits = found.group(1)
    if digits is not None and int(digits) > MAX_SCOPE:
        return None
    return text
