"""The terminal's /role: which expert answers, and choosing another one or an instruction
of one's own (the same rule as the bot's /role, `core.prompting.role_choice`)."""

from __future__ import annotations

from core.prompting.role_choice import role_choice
from core.turns.engine import Engine


async def role_command(engine: Engine, key: str, argument: str) -> str:
    """The line to print for `/role [ARGUMENT]`: the experts, or what was chosen."""
    roles = engine.settings.roles()
    if not argument.strip():
        status = await engine.turns.status(key)
        settings = await engine.settings.of(key)
        current = status.role if settings.system_prompt is None else None
        lines = [
            f"  {'*' if name == current else ' '} {name:<12} {info.title}"
            for name, info in roles.items()
        ]
        if settings.system_prompt is not None:
            lines.append(f"  * your instruction: “{settings.system_prompt[:60]}”")
        return (
            "[experts (* in use); /role NAME chooses one, /role followed by a sentence sets "
            "your own instruction; it applies from the next consultation]\n" + "\n".join(lines)
        )
    choice = role_choice(argument, roles)
    if choice is None:
        return f"[unknown expert “{argument.strip()[:40]}”: {', '.join(roles)}; nothing changed]"
    await engine.settings.set_role(key, choice.role, system_prompt=choice.system_prompt)
    return (
        f"[expert set to {choice.title}; it applies from the next consultation,"
        " /reset to start now]"
    )
