"""The model ids the endpoint offers: `consultation`, and `consultation-<role>` for each
persona, with an optional round count (`consultation-lawyer-3`, `consultation-3`).

Invariant: `choose` accepts exactly the ids `model_ids` lists, each with or without a round
count within the deployment's limit; anything else is no model (404).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

BASE = "consultation"
OWNER = "consultation-bot"
_ROUNDS = re.compile(r"(?:^|-)([0-9]{1,3})$")


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a model id chose: a persona (None: the deployment's default) and a round count
    (None: not said)."""

    id: str
    role: str | None
    rounds: int | None


def model_ids(roles: Collection[str]) -> list[str]:
    """The ids `GET /v1/models` lists: the default persona's, then one per persona."""
    return [BASE, *(f"{BASE}-{role}" for role in sorted(roles))]


def choose(model: str, roles: Collection[str], max_rounds: int) -> ModelChoice | None:
    """The choice `model` names; None when it names no model offered here."""
    if model == BASE:
        return ModelChoice(model, None, None)
    if not model.startswith(BASE + "-"):
        return None
    rest = model[len(BASE) + 1 :]
    if not rest:
        return None
    rounds: int | None = None
    found = _ROUNDS.search(rest)
    if found is not None:
        rounds = int(found[1])
        rest = rest[: found.start()]
        if not 1 <= rounds <= max_rounds:
            return None
    if not rest:
        return ModelChoice(model, None, rounds)
    return ModelChoice(model, rest, rounds) if rest in roles else None


def model_object(model_id: str, created: int) -> dict[str, object]:
    """One model as the OpenAI API lists it."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": OWNER}
