"""Reading the judge's JSON out of whatever a model wrote around it.

Invariant: a verdict is taken only when it is really there. The object is found inside
code fences or prose and repaired with json_repair (a missing brace, single quotes, a
trailing comma), but nothing is invented or bent: a score that is missing, not a
number, or outside 0..1 is a parse failure (`ValueError` saying why), never a guess or
a clamped value.
"""

from __future__ import annotations

import math
import re
from typing import Any

import json_repair

from evaluation.results import Judgement

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)(?:```|\Z)", re.DOTALL)
WINNERS = ("first", "second", "tie")


def extract_object(text: str) -> dict[str, Any]:
    """The JSON object in `text`; ValueError when there is none."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced and "{" in fenced.group(1) else text
    start = body.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    end = body.rfind("}")
    candidate = body[start : end + 1] if end > start else body[start:]
    value = json_repair.loads(candidate)
    if not isinstance(value, dict):
        raise ValueError("no JSON object in the reply")
    return value


def parse_judgement(text: str, *, grounded: bool = False) -> Judgement:
    """A scored `Judgement` from the judge's reply; ValueError when it holds none. With
    `grounded` (a knowledge scenario) the reply must rate groundedness too."""
    data = extract_object(text)
    score = _fraction(data, "score")
    return Judgement(
        score=score,
        justification=_text(data.get("justification")),
        covered=_texts(data.get("covered")),
        missed=_texts(data.get("missed")),
        raw=text,
        groundedness=_fraction(data, "groundedness") if grounded else None,
        unsupported=_texts(data.get("unsupported")) if grounded else [],
    )


def _fraction(data: dict[str, Any], key: str) -> float:
    """The number under `key`, from 0 to 1; ValueError naming the key otherwise."""
    if key not in data or data[key] is None:
        raise ValueError(f'the JSON has no "{key}"')
    number = _number(data[key])
    if number is None:
        raise ValueError(f'"{key}" is not a number: {data[key]!r}')
    if not 0 <= number <= 1:
        raise ValueError(f'"{key}" {number:g} is outside 0..1')
    return number


def parse_winner(text: str) -> tuple[str, str]:
    """("first" | "second" | "tie", justification) from a pairwise reply; ValueError if none."""
    data = extract_object(text)
    winner = data.get("winner")
    if not isinstance(winner, str) or winner.strip().lower() not in WINNERS:
        raise ValueError(f'"winner" must be "first", "second" or "tie", not {winner!r}')
    return winner.strip().lower(), _text(data.get("justification"))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else "" if value is None else str(value)


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [_text(item) for item in value if _text(item)]
    return [_text(value)] if _text(value) else []
