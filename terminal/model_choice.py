"""The terminal's /model: the chat's model among LLM_MODELS, and choosing another (the
same rule as the bot's /model: only a name LLM_MODELS lists is taken)."""

from __future__ import annotations

from core.domain.errors import UnknownModel
from core.turns.engine import Engine


async def model_command(engine: Engine, key: str, argument: str) -> str:
    """The line to print for `/model [NAME]`: the models, or what was chosen."""
    name = argument.strip()
    if not name:
        chosen = await engine.settings.chat_model(key)
        lines = [
            f"  {'*' if model == chosen.model else ' '} {model}"
            for model in engine.settings.models()
        ]
        if chosen.removed is not None:
            lines.insert(0, f"  (“{chosen.removed[:40]}” is no longer available)")
        return (
            "[models (* in use); /model NAME chooses one; it applies from the next answer]\n"
            + "\n".join(lines)
        )
    try:
        await engine.settings.set_model(key, name)
    except UnknownModel:
        known = ", ".join(engine.settings.models())
        return f"[unknown model “{name[:40]}”: {known}; nothing changed]"
    return f"[model set to {name}; it applies from the next answer]"
