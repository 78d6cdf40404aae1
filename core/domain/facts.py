"""Client memory: durable facts a person stated about themselves, kept between consultations.

Invariants:
- facts belong to an owner (`MemoryScope.owner`): a person in private (`tg:<user id>`,
  `api:<userId>`, the terminal's chat key), or a person within one group
  (`tg:<user id>@tg:<group id>`; a bot of scope n writes `tg<n>:`,
  `core.domain.telegram_keys`); a consultation uses the facts of the owner it was
  started by, so a private fact never reaches a group and a group's never leaves it;
- the preferences (memory on or off, whether the one-time notice was given) are the
  person's, whatever the group: /memory off in any chat turns it off everywhere;
- an owner holds at most `MAX_FACTS` facts (the newest), each one line of at most
  `MAX_FACT_CHARS` characters, no two equal ignoring case and spacing;
- reading a model's reply is bounded whatever it holds: at most `MAX_FACTS` facts are
  read, each cut before it is cleaned.
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.domain import telegram_keys
from core.domain.json_answer import strip_fences
from core.domain.tokens import estimate_tokens

MAX_FACTS = 20
"""Facts kept per owner; adding more drops the oldest."""
MAX_FACT_CHARS = 300
MAX_FACT_ID = 2**63 - 1
"""Fact ids are 64-bit: an id past it names no fact (and is never sent to a database)."""
SCHEMA_NAME = "client_facts"
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {"type": "string"},
            "description": "durable facts the user stated about themselves, short, third person",
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
_NONE_WORDS = frozenset({"none", "нет", "-", "—", "n/a", "nothing"})
_BULLETS = "-*•–— \t"


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory a consultation uses: `person` holds the preferences, `owner` the facts."""

    person: str
    owner: str


@dataclass(frozen=True, slots=True)
class Fact:
    id: int
    text: str
    created_at: float


@dataclass(frozen=True, slots=True)
class MemoryPreferences:
    """A person's choice (`enabled`) and whether they were told how to see their facts."""

    enabled: bool = True
    notice_given: bool = False


@dataclass(frozen=True, slots=True)
class MemoryState:
    """What the store holds for one owner and its person: facts newest first."""

    facts: tuple[Fact, ...] = ()
    preferences: MemoryPreferences = MemoryPreferences()


@dataclass(frozen=True, slots=True)
class MemoryUpdate:
    """What a finished consultation left in memory: the facts it added (newest first),
    and `first_time` when the person is to be told now, once, how to see and delete them."""

    facts: tuple[Fact, ...] = ()
    first_time: bool = False


def memory_scope(person: str, group: str | None = None) -> MemoryScope:
    """The scope of `person` in private (`group` None) or within the group `group` (its
    chat key without a topic: facts span the group's topics)."""
    return MemoryScope(person, person if group is None else f"{person}@{group}")


ANONYMOUS_ADMIN_ID = 1087968824
"""The Telegram account a group's anonymous admins write as (GroupAnonymousBot): no person."""


def telegram_person(user_id: int, scope: int = 0) -> str:
    """A Telegram user of the bot of `scope` as a person key (`tg:<id>`, `tg<n>:<id>`)."""
    return telegram_keys.person_key(user_id, scope)


def person_of(owner: str) -> str:
    """The person of a fact owner: a Telegram group owner's part before `@` (any bot's
    scope); others (the API's `api:<userId>`, which may hold `@`, the terminal's key) are
    their own person."""
    if telegram_keys.is_telegram(owner):
        return owner.split("@", 1)[0]
    return owner


def fact_key(text: str) -> str:
    """Two facts are the same when equal ignoring case and spacing."""
    return " ".join(text.casefold().split())


def clean_fact(value: Any) -> str:
    """A fact on one line of single spaces within `MAX_FACT_CHARS`; "" for no text."""
    if not isinstance(value, str):
        return ""
    text = " ".join(value[: MAX_FACT_CHARS * 4].split()).strip(_BULLETS)
    if text.casefold() in _NONE_WORDS:
        return ""
    return text[:MAX_FACT_CHARS].rstrip()


def distinct_facts(values: Iterable[Any], *, known: Iterable[str] = ()) -> list[str]:
    """Clean facts from `values` in order, without repeats of each other or of `known`,
    at most `MAX_FACTS` (the rest is never looked at)."""
    seen = {fact_key(text) for text in known}
    found: list[str] = []
    for value in values:
        text = clean_fact(value)
        key = fact_key(text)
        if text and key not in seen:
            seen.add(key)
            found.append(text)
            if len(found) == MAX_FACTS:
                break
    return found


def parse_facts(text: str) -> list[str] | None:
    """The facts of a structured reply (`{"facts": [...]}`, or a bare list); None when the
    reply holds nothing shaped like that. Broken JSON is repaired (json-repair)."""
    body = strip_fences(text)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        from json_repair import repair_json  # only for broken JSON: not held by every process

        try:
            value = repair_json(body, return_objects=True)
        except Exception:  # json-repair's own failure on hostile text: nothing to read
            return None
    if isinstance(value, dict):
        value = value.get("facts")
    if not isinstance(value, list):
        return None
    return distinct_facts(value)


def facts_from_lines(text: str) -> list[str]:
    """The facts of a reply in text: one a line (bullets and numbers dropped)."""
    lines = (_unnumbered(line) for line in strip_fences(text).splitlines())
    return distinct_facts(lines)


def _unnumbered(line: str) -> str:
    stripped = line.strip().lstrip(_BULLETS)
    head, dot, rest = stripped.partition(".")
    if dot and head.isdigit() and len(head) <= 3:
        return rest
    return stripped


def within_budget(facts: Sequence[str], max_tokens: int) -> list[str]:
    """The facts (newest first) that fit `max_tokens`, whole ones only, newest kept."""
    kept: list[str] = []
    used = 0
    for text in facts:
        cost = estimate_tokens(text) + 2  # the "- " and the line break
        if used + cost > max_tokens:
            break
        kept.append(text)
        used += cost
    return kept


def facts_value(facts: Sequence[str]) -> str | None:
    """The stored form of a consultation's facts (its `memory_facts` column)."""
    return json.dumps(list(facts), ensure_ascii=False) if facts else None


def facts_from_value(value: str | None) -> tuple[str, ...]:
    """Stored facts; () for none or a malformed value (never raises)."""
    if not value:
        return ()
    try:
        loaded = json.loads(value)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(loaded, list):
        return ()
    return tuple(item for item in loaded[:MAX_FACTS] if isinstance(item, str))
