"""The bounded context window: what it gives up first (the model's replies), what it keeps
(the original request, every user answer, the most recent exchange), and its bounds."""

from __future__ import annotations

from core.domain.consultation import Message, Role
from core.prompting.context import MIN_KEPT_CHARS, Omissions, approx_tokens, build_model_messages
from core.prompting.prompts import PromptLibrary

SYSTEM = "SYS"


def note(omitted: Omissions) -> str:
    return (
        f"[{omitted.replies} replies, {omitted.messages} messages omitted, {omitted.shortened} cut]"
    )


def system_with(omitted: Omissions) -> str:
    return SYSTEM + "\n\n" + note(omitted)


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
    ).messages


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


def numbered_rounds(rounds: int, *, user_chars: int, reply_chars: int = 3000) -> list[Message]:
    """`rounds` rounds ("answer i …", "reply i …") of the given sizes, then "current"."""
    history: list[Message] = []
    for i in range(rounds):
        history += [
            user(f"answer {i} ".ljust(user_chars, "u")),
            assistant(f"reply {i} ".ljust(reply_chars, "a")),
        ]
    return [*history, user("current")]


def texts(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_older_long_replies_are_shortened_first() -> None:
    """Just over the budget, an older long reply is cut to its beginning and end; the most
    recent reply and every user message stay whole."""
    history = [user("u0"), assistant("A" * 3000), user("u1"), assistant("B" * 3000), user("u2")]
    messages = build(history, budget=5000)
    assert [m["content"] for m in messages[3:]] == ["u1", "B" * 3000, "u2"]
    assert "chars cut]" in messages[2]["content"] and messages[2]["content"].startswith("AAA")
    assert messages[0]["content"] == system_with(Omissions(shortened=1))
    assert total_chars(messages) <= 5000


def test_all_long_replies_are_shortened_before_any_is_left_out() -> None:
    """When shortening older replies is not enough, the most recent one is shortened too,
    and nothing is left out."""
    history = [user("u0"), assistant("A" * 5000), user("u1"), assistant("B" * 5000), user("u2")]
    messages = build(history, budget=6000)
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert all("chars cut]" in messages[i]["content"] for i in (2, 4))
    assert messages[0]["content"] == system_with(Omissions(shortened=2))
    assert total_chars(messages) <= 6000


def test_older_replies_are_left_out_oldest_first_before_any_user_message() -> None:
    """Replies cut to the floor still too long: the oldest replies are left out (the user
    messages around them merged, in order), every user message and the latest reply stay."""
    history = numbered_rounds(6, user_chars=200)
    messages = build(history, budget=5000)
    sent = texts(messages)
    assert all(m.text in sent for m in history if m.role is Role.USER)
    assert [f"reply {i} " in sent for i in range(6)] == [False] * 3 + [True] * 3
    assert messages[0]["content"] == system_with(Omissions(replies=3, shortened=3))
    assert total_chars(messages) <= 5000
    assert_alternates(messages)


def test_ordinary_user_messages_stay_whole_while_a_reply_can_go() -> None:
    """User messages of ordinary length (3,000 characters) are not shortened to keep the
    model's older replies: those are left out first."""
    history = numbered_rounds(3, user_chars=3000)
    messages = build(history, budget=12_000)
    sent = texts(messages)
    assert all(m.text in sent for m in history if m.role is Role.USER)
    assert "reply 0 " not in sent and "reply 2 " in sent
    assert total_chars(messages) <= 12_000


def test_user_messages_are_left_out_last_oldest_first() -> None:
    """Only when every reply but the latest is gone and all messages are at the floor are
    older user messages left out, oldest first; the request and the latest exchange stay."""
    history = numbered_rounds(6, user_chars=3000)
    messages = build(history, budget=5000)
    sent = texts(messages)
    assert [f"answer {i} " in sent for i in range(6)] == [True, False, False, False, True, True]
    assert "reply 5 " in sent and "current" in sent
    assert messages[0]["content"] == system_with(Omissions(replies=5, messages=3, shortened=4))
    assert total_chars(messages) <= 5000
    assert_alternates(messages)


def test_far_over_budget_keeps_request_latest_exchange_and_last_message() -> None:
    """With a tiny budget only the original request, the latest reply and the current user
    message remain."""
    history = conversation(6)
    messages = build(history, budget=1)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in messages[1:]] == [
        history[0].text,
        history[-2].text,
        history[-1].text,
    ]
    assert messages[0]["content"] == system_with(Omissions(replies=5, messages=5))


def test_last_message_kept_even_when_alone_over_budget() -> None:
    """A current message larger than the budget is still sent, as its beginning and end;
    the rest of the conversation, small, is all there."""
    message = "START " + "x" * 900_000 + " END"
    history = [*conversation(3, open_turn=False), user(message)]
    messages = build(history, budget=24_000)
    assert [m["content"] for m in messages[1:-1]] == [m.text for m in history[:-1]]
    head, note_line, tail = messages[-1]["content"].split("\n\n")
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
    assert all(m.text in texts(messages) for m in history[1:])  # nothing else given up


def test_every_kept_message_shares_the_budget() -> None:
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
    assert messages[-2]["content"] == history[0].text + "\n\n" + history[-2].text
    assert messages[-1]["content"] == history[-1].text
    assert_alternates(messages)


def test_alternation_holds_for_every_budget_and_length() -> None:
    """For many lengths and budgets: alternation, the request first, the last user message,
    a note exactly when something was given up, and a larger budget never keeps fewer of
    the user's messages."""
    for rounds in range(0, 9):
        for open_turn in (True, False):
            history = conversation(rounds, size=7, open_turn=open_turn)
            if not history:
                continue
            full = len(SYSTEM) + sum(len(m.text) for m in history)
            users = [m.text for m in history if m.role is Role.USER]
            kept_before = 0
            for budget in range(0, full + 20, 3):
                messages = build(history, budget)
                assert_alternates(messages)
                assert messages[1]["content"].startswith(history[0].text)
                assert messages[-1]["content"].endswith(history[-1].text)
                sent = texts(messages[1:])
                kept = sum(text in sent for text in users)
                assert kept >= kept_before
                kept_before = kept
                given_up = sum(m.text not in sent for m in history)
                assert (messages[0]["content"] != SYSTEM) == bool(given_up)
                if budget >= full:
                    assert given_up == 0


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
    assert messages[0]["content"] == system_with(Omissions(replies=1, messages=2))
    assert messages[1:] == [
        {"role": "user", "content": "r"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "now"},
    ]


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
        omission_note=library.omission_note,
        excerpt_note=lambda n: library.render("excerpt_note", omitted_chars=n),
    ).messages
    assert (
        "8 earlier messages are left out (4 of your replies, 4 of the user's)"
        in (messages[0]["content"])
    )


def test_approx_tokens() -> None:
    """About four characters a token, rounded up; empty text is zero."""
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
