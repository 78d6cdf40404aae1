"""The evaluator's own prompts: Mustache files in evaluation/prompts, rendered strictly.

Values are substituted verbatim (no HTML escaping) and a tag without a value raises
`TemplateError` instead of rendering blank, so a renamed variable cannot quietly drop
a persona or a rubric from a prompt.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pystache
from pystache.common import PystacheError
from pystache.context import KeyNotFoundError

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


class TemplateError(Exception):
    """A template is missing or names a value the caller did not pass."""


@cache
def _source(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.mustache"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"evaluator prompt {name!r}: {exc}") from None


def render(name: str, **values: Any) -> str:
    """Render `evaluation/prompts/<name>.mustache` with exactly `values`; stripped."""
    renderer = pystache.Renderer(missing_tags="strict", escape=lambda s: s)
    try:
        text: str = renderer.render(_source(name), values)
    except KeyNotFoundError as exc:
        raise TemplateError(f"evaluator prompt {name!r}: no value for {exc.key!r}") from None
    except PystacheError as exc:
        raise TemplateError(f"evaluator prompt {name!r}: {exc}") from None
    return text.strip()
