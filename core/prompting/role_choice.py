"""What a typed /role argument chooses: a persona by its key, or the chat's own
instruction for the expert.

Invariant: a persona's key (any case, surrounding spaces ignored) chooses it; text of
three words or more is an instruction, kept to `MAX_INSTRUCTION_CHARS`; anything else
chooses nothing, so a typo never becomes an instruction. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.prompting.prompts import RoleInfo

MAX_INSTRUCTION_CHARS = 2000
TITLE_CHARS = 60
"""How much of an instruction names it where the chat's expert is shown."""


@dataclass(frozen=True, slots=True)
class RoleChoice:
    """A persona (`role`) or an instruction (`system_prompt`), and how to name it."""

    role: str | None
    system_prompt: str | None
    title: str


def role_choice(raw: str, roles: Mapping[str, RoleInfo]) -> RoleChoice | None:
    """The choice `raw` makes among `roles`; None when it names none and is no sentence."""
    key = raw.strip().lower()
    if key in roles:
        return RoleChoice(key, None, roles[key].title)
    text = raw.strip()
    if len(text.split()) >= 3:
        return RoleChoice(None, text[:MAX_INSTRUCTION_CHARS], "“" + text[:TITLE_CHARS] + "”")
    return None
