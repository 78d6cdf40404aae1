"""Reference material in the context window (the knowledge-base excerpts): it counts
against the budget, follows the system prompt, gives way after the model's replies are
shortened and before anything the user wrote, last item first, and the window says how
many items it kept."""

from __future__ import annotations

from core.domain.consultation import Message
from core.prompting.context import ContextWindow, Omissions, Reference, build_model_messages
from tests.core.test_context import SYSTEM, assistant, conversation, cut, note, user

ITEM_CHARS = 500


def render(n: int) -> str:
    """The part holding the first `n` items: each `ITEM_CHARS` long, named by its number."""
    return "\n".join(f"<{i}>".ljust(ITEM_CHARS, "r") for i in range(1, n + 1))


THREE = Reference(3, render)


def window(
    history: list[Message], budget: int, reference: Reference | None = THREE
) -> ContextWindow:
    return build_model_messages(
        SYSTEM,
        history,
        is_group=False,
        budget_chars=budget,
        omission_note=note,
        excerpt_note=cut,
        reference=reference,
    )


def size_of(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


def test_a_conversation_that_fits_keeps_every_item_after_the_system_prompt() -> None:
    """Items and conversation within the budget: all items, after the system prompt,
    the conversation untouched."""
    history = conversation(2)
    fitted = window(history, budget=10_000)
    assert fitted.references == 3
    assert fitted.messages[0]["content"] == SYSTEM + "\n\n" + render(3)
    assert [m["content"] for m in fitted.messages[1:]] == [m.text for m in history]


def test_the_items_count_against_the_budget() -> None:
    """A conversation that fits alone but not with every item gives up items: the system
    message's length is counted with them."""
    history = [user("q".ljust(300, "."))]
    budget = len(SYSTEM) + 2 + len(render(2)) + 300
    fitted = window(history, budget)
    assert fitted.references == 2
    assert size_of(fitted.messages) <= budget
    assert fitted.messages[1]["content"] == history[0].text


def test_the_models_replies_are_shortened_before_an_item_goes() -> None:
    """Shortening the model's long replies makes room: every item stays, the user's
    messages are whole, the replies are cut."""
    history = [
        user("u0".ljust(200, ".")),
        assistant("a0".ljust(3000, ".")),
        user("u1".ljust(200, ".")),
        assistant("a1".ljust(3000, ".")),
        user("u2".ljust(200, ".")),
    ]
    budget = len(SYSTEM) + 2 + len(render(3)) + 600 + 2 * 1200 + 200
    fitted = window(history, budget)
    assert fitted.references == 3
    users = [m["content"] for m in fitted.messages if m["role"] == "user"]
    assert users == [m.text for m in history if m.role.value == "user"]
    replies = [m["content"] for m in fitted.messages if m["role"] == "assistant"]
    assert all("chars cut]" in reply for reply in replies)


def test_items_give_way_last_first_before_anything_the_user_wrote() -> None:
    """Replies already at their shortest, the last items go, one at a time, while every
    user message and the model's replies (shortened) stay: the user's own words are kept
    over the excerpts."""
    history = [
        user("u0".ljust(1500, ".")),
        assistant("a0".ljust(3000, ".")),
        user("u1".ljust(1500, ".")),
        assistant("a1".ljust(3000, ".")),
        user("u2".ljust(1500, ".")),
    ]
    without_items = window(history, 10_000, reference=None).messages
    replies_cut = 2 * 1000  # the model's two replies at their shortest (MIN_KEPT_CHARS)
    base = len(SYSTEM) + 4500 + replies_cut + 2 + len(note(Omissions(shortened=2)))
    fitted = window(history, base + len(render(1)) + 2 + 10)
    assert fitted.references == 1
    assert fitted.messages[0]["content"].startswith(SYSTEM + "\n\n" + render(1) + "\n\n")
    users = [m["content"] for m in fitted.messages if m["role"] == "user"]
    assert users == [m["content"] for m in without_items if m["role"] == "user"]
    assert users == ["u0".ljust(1500, "."), "u1".ljust(1500, "."), "u2".ljust(1500, ".")]


def test_with_every_item_gone_the_window_is_the_one_without_reference() -> None:
    """A conversation that does not fit even without items keeps none, and gives up what
    it gives up without a reference at all, exactly."""
    history = conversation(4, size=2000)
    budget = 6000
    fitted = window(history, budget)
    assert fitted.references == 0
    assert fitted.messages == window(history, budget, reference=None).messages


def test_no_history_sends_the_system_prompt_with_every_item() -> None:
    fitted = window([], budget=10)
    assert fitted.messages == [{"role": "system", "content": SYSTEM + "\n\n" + render(3)}]
    assert fitted.references == 3
