"""The bounded context window: fixed prefix, omission note, recent messages."""

from __future__ import annotations

from core.context import MIN_KEPT_CHARS, approx_tokens, build_model_messages
from core.models import Message, Role
from core.prompts import PromptLibrary

SYSTEM = "SYS"


def note(count: int) -> str:
    return f"[{count} omitted]"


def cut(chars: int) -> str:
    return f"[{chars} chars cut]"


def user(text: str, author: str | None = None) -> Message:
    return Message(Role.USER, text, 0.0, author=author)


def assistant(text: str) -> Message:
    return Message(Role.ASSISTANT, text, 0.0)


def conversation(rounds: int, size: int = 10, open_turn: bool = True) -> list[Message]:
    """`rounds` answered rounds (u0 a0 u1 a1 ...) plus an open user turn."""
    history: list[Message] = []
    for i in range(rounds):
        history += [user(f"u{i}".ljust(size, ".")), assistant(f"a{i}".ljust(size, "."))]
    if open_turn:
        history.append(user("current".ljust(size, ".")))
    return history


def build(history: list[Message], budget: int, *, is_group: bool = False) -> list[dict[str, str]]:
    return build_model_messages(
        SYSTEM,
        history,
        is_group=is_group,
        budget_chars=budget,
        omission_note=note,
        excerpt_note=cut,
    )


def total_chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


def assert_alternates(messages: list[dict[str, str]]) -> None:
    assert messages[0]["role"] == "system"
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)


def test_under_budget_nothing_is_dropped() -> None:
    """A conversation that fits is sent whole, system first, with no omission note."""
    history = conversation(3)
    messages = build(history, budget=10_000)
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert [m["content"] for m in messages[1:]] == [m.text for m in history]
    assert not any("omitted" in m["content"] for m in messages)


def test_exactly_at_budget_nothing_is_dropped() -> None:
    """The budget is inclusive: content totalling exactly the budget is all kept."""
    history = conversation(3)
    size = len(SYSTEM) + sum(len(m.text) for m in history)
    assert len(build(history, budget=size)) == len(history) + 1


def test_just_over_budget_drops_the_oldest_middle_pair() -> None:
    """One character too many drops u1/a1 (after the prefix) and adds the note."""
    history = conversation(4)  # u0 a0 u1 a1 u2 a2 u3 a3 current
    size = len(SYSTEM) + sum(len(m.text) for m in history)
    messages = build(history, budget=size - 1)
    contents = [m["content"] for m in messages[1:]]
    assert contents[:2] == [history[0].text, history[1].text]
    assert contents[2] == note(2) + "\n\n" + history[4].text
    assert contents[3:] == [m.text for m in history[5:]]
    assert_alternates(messages)
    assert total_chars(messages) <= size - 1


def test_far_over_budget_keeps_prefix_and_last_turn() -> None:
    """With a tiny budget only the prefix and the current user message remain."""
    history = conversation(6)
    messages = build(history, budget=1)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == history[0].text
    assert messages[2]["content"] == history[1].text
    assert messages[3]["content"] == note(10) + "\n\n" + history[-1].text


def test_last_turn_kept_even_when_alone_over_budget() -> None:
    """A current message larger than the budget is still sent, as its beginning and end."""
    message = "START " + "x" * 900_000 + " END"
    history = [*conversation(3, open_turn=False), user(message)]
    messages = build(history, budget=24_000)
    assert messages[-1]["role"] == "user"
    omitted, head, note_line, tail = messages[-1]["content"].split("\n\n")
    assert omitted == note(4)  # the omission note comes first, as always
    assert message.startswith(head) and message.endswith(tail)
    assert note_line.endswith("chars cut]")
    assert total_chars(messages) <= 24_000


def test_a_long_message_is_kept_whole_below_the_floor() -> None:
    """Messages up to MIN_KEPT_CHARS are never shortened, however small the budget."""
    history = [*conversation(3, open_turn=False), user("x" * MIN_KEPT_CHARS)]
    messages = build(history, budget=100)
    assert messages[-1]["content"].endswith("x" * MIN_KEPT_CHARS)


def test_original_request_never_dropped_even_when_huge() -> None:
    """A huge original request stays first, as its beginning and end around a note saying how
    much was left out, and the whole request fits the budget."""
    request = "Помоги {{x}} " + "y" * 50_000 + " конец"
    history = [user(request), *conversation(5)[1:]]
    messages = build(history, budget=10_000)
    first = messages[1]
    assert first["role"] == "user"
    head, note_line, tail = first["content"].split("\n\n")
    assert request.startswith(head) and request.endswith(tail)
    assert note_line == cut(len(request) - len(head) - len(tail))
    assert total_chars(messages) <= 10_000
    assert_alternates(messages)


def test_every_kept_turn_shares_the_budget() -> None:
    """Several huge turns are shortened to one common size, so the request stays bounded."""
    history = [user("a" * 300_000), assistant("b" * 30_000), user("c" * 5_000)]
    messages = build(history, budget=24_000)
    sizes = [len(m["content"]) for m in messages[1:]]
    assert total_chars(messages) <= 24_000
    assert sizes[2] == 5_000  # within its share: untouched
    assert max(sizes[:2]) - min(sizes[:2]) <= len(cut(300_000))


def test_history_ending_with_assistant_keeps_the_last_pair() -> None:
    """When the last message is a reply, the last user turn and the reply are kept."""
    history = conversation(5, open_turn=False)
    messages = build(history, budget=1)
    assert messages[-2]["content"] == note(6) + "\n\n" + history[-2].text
    assert messages[-1]["content"] == history[-1].text
    assert_alternates(messages)


def test_alternation_holds_for_every_budget_and_length() -> None:
    """For many lengths and budgets: alternation, prefix, last turn and note hold."""
    for rounds in range(0, 9):
        for open_turn in (True, False):
            history = conversation(rounds, size=7, open_turn=open_turn)
            if not history:
                continue
            full = len(SYSTEM) + sum(len(m.text) for m in history)
            for budget in range(0, full + 20, 3):
                messages = build(history, budget)
                assert_alternates(messages)
                assert messages[1]["content"] == history[0].text
                last_user = next(m.text for m in reversed(history) if m.role is Role.USER)
                assert any(m["content"].endswith(last_user) for m in messages)
                dropped = len(history) - (len(messages) - 1)
                notes = [m for m in messages if m["content"].startswith("[")]
                if dropped:
                    assert len(notes) == 1
                    assert notes[0]["role"] == "user"
                    assert notes[0] is messages[3]
                    assert notes[0]["content"].startswith(note(dropped))
                else:
                    assert not notes
                if budget >= full:
                    assert dropped == 0


def test_fewest_pairs_dropped_to_fit() -> None:
    """Dropping stops as soon as the rest, note included, fits the budget."""
    history = conversation(6, size=10)
    full = len(SYSTEM) + sum(len(m.text) for m in history)
    budget = full - 20 + len(note(2)) + 2  # room for everything but one pair, plus the note
    messages = build(history, budget)
    assert len(messages) == len(history) + 1 - 2
    assert total_chars(messages) <= budget


def test_consecutive_user_messages_are_merged() -> None:
    """Two user messages in a row (e.g. a failed round resent) become one message."""
    history = [user("first"), assistant("q?"), user("answer"), user("and more")]
    messages = build(history, budget=10_000)
    assert messages[-1] == {"role": "user", "content": "answer\n\nand more"}
    assert_alternates(messages)


def test_merged_messages_count_in_the_omission_note() -> None:
    """The note counts the stored messages left out, not the merged chat messages."""
    history = [user("r"), assistant("a"), user("m1"), user("m2"), assistant("b"), user("now")]
    messages = build(history, budget=1)
    assert messages[3]["content"] == note(3) + "\n\nnow"


def test_group_messages_carry_author_names() -> None:
    """In groups each user message is prefixed with its author; replies are not."""
    history = [
        user("We need a plan", author="Anna"),
        assistant("Who trains?"),
        user("Me", author="Boris"),
        user("Me too", author=None),
        user("And me", author="Вера"),
    ]
    messages = build(history, budget=10_000, is_group=True)
    assert messages[1]["content"] == "Anna: We need a plan"
    assert messages[2]["content"] == "Who trains?"
    assert messages[3]["content"] == "Boris: Me\n\nMe too\n\nВера: And me"


def test_private_chat_has_no_author_prefix() -> None:
    """Outside groups the author is not shown even when stored."""
    messages = build([user("hello", author="Anna")], budget=10_000)
    assert messages[1]["content"] == "hello"


def test_empty_history_and_leading_assistant() -> None:
    """No history gives the system message alone; a reply before any request is not sent."""
    assert build([], budget=10) == [{"role": "system", "content": SYSTEM}]
    messages = build([assistant("hi"), user("q")], budget=10_000)
    assert [m["role"] for m in messages] == ["system", "user"]


def test_note_from_the_prompt_library() -> None:
    """The real omission-note template plugs in as the note callable."""
    library = PromptLibrary()
    messages = build_model_messages(
        SYSTEM,
        conversation(5),
        is_group=False,
        budget_chars=1,
        omission_note=lambda n: library.render("omission_note", omitted=n),
        excerpt_note=lambda n: library.render("excerpt_note", omitted_chars=n),
    )
    assert "8 earlier messages" in messages[3]["content"]


def test_approx_tokens() -> None:
    """About four characters a token, rounded up; empty text is zero."""
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
