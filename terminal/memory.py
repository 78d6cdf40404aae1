"""/memory at the terminal: what the bot remembers about the person at the terminal.

Invariants: the terminal's memory is its chat key's (`console:local` by default: one
person); `/memory delete N` deletes the N-th fact of the list as it is now, and a number
not in it deletes nothing; a completed consultation is remembered after its answer was
printed, and a failure to remember is one line, never a Python error text.
"""

from __future__ import annotations

import logging

from core.domain.errors import ModelError, StoreUnavailable
from core.domain.facts import MemoryScope, memory_scope
from core.domain.outcomes import Reply
from core.turns.engine import Engine

log = logging.getLogger(__name__)

USAGE = "[/memory: what I remember · /memory delete N · /memory off · /memory on]"


def terminal_scope(key: str) -> MemoryScope:
    return memory_scope(key)


async def memory_command(engine: Engine, key: str, argument: str) -> None:
    """Show the facts, delete one by its number, or turn memory off or on."""
    if not engine.memories.enabled:
        print("[memory is switched off (MEMORY_ENABLED=false)]")
        return
    scope = terminal_scope(key)
    words = argument.lower().split()
    if words in (["off"], ["on"]):
        await engine.memories.set_enabled(scope, words == ["on"])
        print(f"[memory {words[0]}]")
        return
    state = await engine.memories.state(scope)
    if len(words) == 2 and words[0] == "delete":
        number = int(words[1]) if words[1].isascii() and words[1].isdigit() else 0
        if not 1 <= number <= len(state.facts):
            print(f"[no fact number {words[1][:20]}: /memory lists them]")
            return
        await engine.memories.forget_fact(scope, state.facts[number - 1].id)
        print(f"[deleted: {state.facts[number - 1].text}]")
        return
    if words:
        print(USAGE)
        return
    if not state.preferences.enabled:
        print("[memory is off: /memory on to turn it on]")
    elif not state.facts:
        print("[I remember nothing about you yet]")
    else:
        print("\n".join(f"{n}. {f.text}" for n, f in enumerate(state.facts, start=1)))


async def remember_after(engine: Engine, reply: Reply) -> None:
    """Keep the facts of the consultation this reply completed (see the module)."""
    if not reply.completed_now or not engine.memories.enabled:
        return
    try:
        update = await engine.memories.remember(reply.consultation_id)
    except (ModelError, StoreUnavailable) as exc:
        log.warning("consultation %s not remembered: %s", reply.consultation_id, exc)
        return
    if update.first_time:
        print("[I noted lasting facts you told me: /memory shows and deletes them]")
