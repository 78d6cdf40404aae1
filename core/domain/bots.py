"""Bots as data: the bots an operator added besides the deployment's own (TELEGRAM_BOT_TOKEN),
each with the settings that replace the deployment's defaults for it (`BotProfile`).

Invariants:
- a bot's scope is its id in the bots table (1, 2, …); scope 0 is the deployment's own
  bot, which has no row here;
- a profile is parsed strictly (`parse_profile`): an unknown key, a value of the wrong
  type or out of range is refused with one line naming the key, so what is stored always
  reads back as the same profile; what a profile does not set falls back to the
  deployment's settings;
- a bot's `plans` (the plans it sells in Telegram Stars) are parsed as strictly as PLANS
  (`core.domain.plans.parse_plans`); None falls back to the deployment's PLANS, an empty
  list sells nothing in that bot;
- a stored bot carries its token only encrypted (`token_cipher`) and its last four
  characters (`token_tail`, all that lists and pages ever show): these types never hold a
  plain token; nor a plain API token (`api_token_hash`, its SHA-256 only).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.domain.plans import Plan, parse_plans, plan_json

MAX_PROFILE_ROUNDS = 20
"""The most rounds a bot's profile may set (MAX_ROUNDS_LIMIT still bounds a chat's)."""
MAX_NAME_CHARS = 100
"""Longest role, model or label."""
MAX_INSTRUCTION_CHARS = 20_000
MAX_MODELS = 20
MAX_SETTINGS_CHARS = 64_000
"""The longest settings JSON a bot row may hold (an instruction and twenty models fit)."""
TAIL_CHARS = 4

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]*")
_LANGUAGE = re.compile(r"[a-z]{2,3}(_[A-Za-z]{2,4})?")
_LABEL_OK = re.compile(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029]*")

PROFILE_KEYS = ("role", "instruction", "rounds", "model", "models", "language", "plans", "limits")
"""The settings a bot may set, in the order lists show them."""
LIMIT_KEYS = ("daily_tokens", "monthly_tokens", "daily_consultations", "messages_per_minute")
"""The limits a bot may set in place of the deployment's (USER_DAILY_TOKEN_LIMIT,
USER_MONTHLY_TOKEN_LIMIT, USER_DAILY_CONSULTATION_LIMIT, USER_RATE_LIMIT_PER_MINUTE)."""
MAX_LIMIT = 10**12
SETTABLE = (*PROFILE_KEYS[:-1], *(f"limits.{key}" for key in LIMIT_KEYS), "label")
"""What `bots set` and the console change: a profile's settings, each limit, the label."""


API_TOKEN_KEY = "api_token"
"""What `bots set BOT api_token=…` gives a bot: an HTTP API token of its own (`api.bots`)."""
API_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~+/=-]{32,256}")
"""A bot's API token: 32 to 256 characters a bearer token may hold (`openssl rand -hex 32`
gives one), so its SHA-256 alone is safe to keep."""


def api_token_digest(token: str) -> str:
    """What is stored of a bot's API token, and what a request's bearer is looked up by:
    its SHA-256 in hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


class ProfileInvalid(ValueError):
    """A bot's settings refused: the message names the key and says what is allowed."""


@dataclass(frozen=True, slots=True)
class BotLimits:
    """A bot's limits per person (0: none), each None when the deployment's applies."""

    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    daily_consultations: int | None = None
    messages_per_minute: int | None = None

    def to_json(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in LIMIT_KEYS if getattr(self, key) is not None}


@dataclass(frozen=True, slots=True)
class BotProfile:
    """What a bot sets in place of the deployment's defaults; None (or no models): falls
    back. `role` names a prompt of the library; `instruction` is a system prompt of its
    own (one or the other); `models` is the allow-list its chats choose from; `plans` the
    plans it sells (None: the deployment's PLANS; empty: none)."""

    role: str | None = None
    instruction: str | None = None
    rounds: int | None = None
    model: str | None = None
    models: tuple[str, ...] = ()
    language: str | None = None
    limits: BotLimits = field(default_factory=BotLimits)
    plans: tuple[Plan, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The keys it sets, as stored and as `parse_profile` reads them back."""
        data: dict[str, Any] = {}
        for key in PROFILE_KEYS:
            value = getattr(self, key)
            if key == "plans":
                if value is not None:  # an empty list sells nothing: it is set
                    data[key] = [plan_json(plan) for plan in value]
                continue
            if isinstance(value, BotLimits):
                value = value.to_json()
            if value is None or value in ((), {}):
                continue
            data[key] = list(value) if key == "models" else value
        return data

    def shown(self) -> str:
        """One line for a list: `key=value` for each key it sets, `defaults` for none."""
        parts = []
        for key, value in self.to_json().items():
            if key == "instruction":
                value = f"{len(value)} chars"
            elif key in ("models", "plans"):
                value = ",".join(v["id"] if key == "plans" else v for v in value) or "none"
            elif key == "limits":
                parts += [f"limits.{name}={number}" for name, number in value.items()]
                continue
            parts.append(f"{key}={value}")
        return " ".join(parts) or "defaults"


def parse_profile(data: Mapping[str, Any]) -> BotProfile:
    """The profile `data` describes; `ProfileInvalid` naming the first bad key."""
    if not isinstance(data, Mapping):
        raise ProfileInvalid("settings: a JSON object of role, instruction, rounds, ...")
    unknown = sorted(str(key)[:40] for key in data if key not in PROFILE_KEYS)
    if unknown:
        raise ProfileInvalid(
            f"unknown setting {unknown[0]!r}; a bot sets {', '.join(PROFILE_KEYS)}"
        )
    role = _name(data, "role")
    instruction = data.get("instruction")
    if instruction is not None:
        if not isinstance(instruction, str) or not instruction.strip():
            raise ProfileInvalid("instruction: a non-empty text")
        if len(instruction) > MAX_INSTRUCTION_CHARS:
            raise ProfileInvalid(f"instruction: at most {MAX_INSTRUCTION_CHARS} characters")
        if "\x00" in instruction:
            raise ProfileInvalid("instruction: no NUL character")
    if role is not None and instruction is not None:
        raise ProfileInvalid("role and instruction: set one or the other")
    rounds = data.get("rounds")
    whole = isinstance(rounds, int) and not isinstance(rounds, bool)
    if rounds is not None and (not whole or not 1 <= rounds <= MAX_PROFILE_ROUNDS):
        raise ProfileInvalid(f"rounds: a whole number from 1 to {MAX_PROFILE_ROUNDS}")
    models = data.get("models", ())
    if not isinstance(models, list | tuple) or len(models) > MAX_MODELS:
        raise ProfileInvalid(f"models: a list of up to {MAX_MODELS} model names")
    names = tuple(_model(m) for m in models)
    if len(set(names)) != len(names):
        raise ProfileInvalid("models: each model once")
    model = _name(data, "model")
    if model is not None and names and model not in names:
        raise ProfileInvalid(f"model: {model!r} is not among models ({', '.join(names)})")
    language = data.get("language")
    if language is not None and (
        not isinstance(language, str) or not _LANGUAGE.fullmatch(language)
    ):
        raise ProfileInvalid("language: a language code such as en, de or pt_BR")
    return BotProfile(
        role, instruction, rounds, model, names, language, _limits(data), _plans(data)
    )


def _plans(data: Mapping[str, Any]) -> tuple[Plan, ...] | None:
    """A bot's plans, as strictly as PLANS (language codes by their shape: the interface's
    languages are checked where a bot's settings are changed, `app.bots`)."""
    plans = data.get("plans")
    if plans is None:
        return None
    if not isinstance(plans, list):
        raise ProfileInvalid("plans: a JSON list of plans, as PLANS is written")
    try:
        return parse_plans(json.dumps(plans), None)
    except ValueError as exc:
        raise ProfileInvalid(f"plans: {exc}") from None


def _limits(data: Mapping[str, Any]) -> BotLimits:
    limits = data.get("limits", {})
    if not isinstance(limits, Mapping):
        raise ProfileInvalid(f"limits: an object of {', '.join(LIMIT_KEYS)}")
    for key, value in limits.items():
        if key not in LIMIT_KEYS:
            raise ProfileInvalid(
                f"unknown limit {str(key)[:40]!r}; a bot sets {', '.join(LIMIT_KEYS)}"
            )
        whole = isinstance(value, int) and not isinstance(value, bool)
        if not whole or not 0 <= value <= MAX_LIMIT:
            raise ProfileInvalid(f"limits.{key}: a whole number from 0 (none) to {MAX_LIMIT}")
    return BotLimits(**limits)


def profile_options(
    *,
    role: str | None = None,
    instruction: str | None = None,
    rounds: int | None = None,
    model: str | None = None,
    models: str | None = None,
    language: str | None = None,
) -> BotProfile:
    """The profile `bots add`'s options describe (`models`: comma-separated)."""
    data: dict[str, object] = {
        "role": role,
        "instruction": instruction,
        "rounds": rounds,
        "model": model,
        "language": language,
    }
    if models is not None:
        data["models"] = [m.strip() for m in models.split(",") if m.strip()]
    return parse_profile({k: v for k, v in data.items() if v is not None})


def changed_profile(profile: BotProfile, changes: Mapping[str, str]) -> BotProfile:
    """`profile` with `changes` (`key=value` as typed: an empty value unsets the key; a
    role replaces an instruction and the other way round)."""
    if changes.get("role") and changes.get("instruction"):
        raise ProfileInvalid("role and instruction: set one or the other")
    data = profile.to_json()
    limits = data.setdefault("limits", {})
    for key, value in changes.items():
        if key not in SETTABLE or key == "label":
            raise ProfileInvalid(f"unknown setting {key[:40]!r}; a bot sets {', '.join(SETTABLE)}")
        if key.startswith("limits."):
            name = key.removeprefix("limits.")
            if value == "":
                limits.pop(name, None)
            elif not value.isdigit() or len(value) > 13:
                raise ProfileInvalid(f"{key}: a whole number from 0 (none) to {MAX_LIMIT}")
            else:
                limits[name] = int(value)
            continue
        if value == "":
            data.pop(key, None)
            continue
        if key == "rounds":
            if not value.isdigit() or len(value) > 3:
                raise ProfileInvalid("rounds: a whole number")
            data[key] = int(value)
        elif key == "models":
            data[key] = [m.strip() for m in value.split(",") if m.strip()]
        elif key == "plans":
            if len(value) > MAX_SETTINGS_CHARS:
                raise ProfileInvalid(f"plans: at most {MAX_SETTINGS_CHARS} characters of JSON")
            try:
                data[key] = json.loads(value)
            except (ValueError, RecursionError):  # RecursionError: nested too deep
                raise ProfileInvalid("plans: not valid JSON (a list of plans, as PLANS)") from None
        else:
            data[key] = value
        if key in ("role", "instruction"):
            data.pop("instruction" if key == "role" else "role", None)
    models = data.get("models")
    if "model" not in changes and models and data.get("model") not in (None, *models):
        data.pop("model")  # the models changed without it: the bot's default goes
    return parse_profile(data)


def _name(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS or not _NAME.fullmatch(value):
        raise ProfileInvalid(
            f"{key}: a name of up to {MAX_NAME_CHARS} letters, digits and _ . : / @ + -"
        )
    return value


def _model(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS or not _NAME.fullmatch(value):
        raise ProfileInvalid(
            f"models: names of up to {MAX_NAME_CHARS} letters, digits and _ . : / @ + -"
        )
    return value


def check_label(label: str) -> str:
    """`label` if it is a printable one-line name of up to `MAX_NAME_CHARS`; else
    `ProfileInvalid`."""
    if len(label) > MAX_NAME_CHARS or not _LABEL_OK.fullmatch(label) or not label.isprintable():
        raise ProfileInvalid(f"label: up to {MAX_NAME_CHARS} printable characters on one line")
    return label


@dataclass(frozen=True, slots=True)
class NewBot:
    """A bot to store: who Telegram says it is, its token sealed, its settings."""

    telegram_id: int
    username: str
    token_cipher: str
    token_tail: str
    label: str = ""
    profile: BotProfile = field(default_factory=BotProfile)
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class StoredBot:
    """A bot of the bots table; `id` is its scope. `removed_at` set: removed (its row
    stays so a bot added again gets its scope back). `api_token_hash`: the SHA-256 (hex)
    of the HTTP API token that pins a request to this bot (`api.bots`), None: none."""

    id: int
    telegram_id: int
    username: str
    label: str
    token_cipher: str
    token_tail: str
    enabled: bool
    profile: BotProfile
    created_at: float
    updated_at: float
    removed_at: float | None = None
    api_token_hash: str | None = None

    @property
    def handle(self) -> str:
        """`@username`: how lists and messages name it."""
        return f"@{self.username}"


class BotExists(Exception):
    """Adding a bot whose Telegram bot is already stored (and not removed)."""

    def __init__(self, existing: StoredBot) -> None:
        super().__init__(f"{existing.handle} is already bot #{existing.id}")
        self.existing = existing


class BotRefused(Exception):
    """What an operator asked of the bots cannot be done; the message says why, in one line,
    and nothing was changed."""
