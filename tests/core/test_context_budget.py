"""How exactly the context window uses its budget: a plan that fits to the character is
taken (its omission note counted), a shortened message is cut no further than needed, the
note counts exactly what was given up, and past every plan each message is bounded."""

from __future__ import annotations

import re

from core.domain.consultation import Message, Role
from core.prompting.context import MIN_KEPT_CHARS, Omissions, build_model_messages
from core.prompting.prompts import PromptLibrary
from tests.core.test_context import (
    SYSTEM,
    assistant,
    build,
    conversation,
    note,
    system_with,
    texts,
    total_chars,
    user,
)

SEP = "\n\n"
LIBRARY = PromptLibrary()


def build_real(history: list[Message], budget: int) -> list[dict[str, str]]:
    """`build` with the prompt library's omission and excerpt notes."""
    return build_model_messages(
        SYSTEM,
        history,
        is_group=False,
        budget_chars=budget,
        omission_note=LIBRARY.omission_note,
        excerpt_note=lambda n: LIBRARY.render("excerpt_note", omitted_chars=n),
    ).messages


def test_a_plan_that_fits_to_the_character_with_its_note_is_taken() -> None:
    """Leaving out the oldest reply makes the rest fit exactly, note and merged separator
    included: nothing more is given up; one character less and a second reply goes."""
    history = conversation(4, size=60)  # u0 a0 u1 a1 u2 a2 u3 a3 current
    t = [m.text for m in history]
    expected = [
        {"role": "system", "content": system_with(Omissions(replies=1))},
        {"role": "user", "content": t[0] + SEP + t[2]},
        *({"role": m.role.value, "content": m.text} for m in history[3:]),
    ]
    budget = total_chars(expected)
    assert build(history, budget) == expected
    tighter = build(history, budget - 1)
    assert tighter[0]["content"] == system_with(Omissions(replies=2))
    assert total_chars(tighter) <= budget - 1


def test_with_the_real_note_a_plan_that_fits_to_the_character_is_taken() -> None:
    """The same with the real note, which grows when it also reports shortened messages:
    the plan leaving out the oldest reply fits exactly and nothing is cut."""
    history = conversation(4, size=400)
    t = [m.text for m in history]
    note_text = LIBRARY.omission_note(Omissions(replies=1))
    expected = [
        {"role": "system", "content": SYSTEM + SEP + note_text},
        {"role": "user", "content": t[0] + SEP + t[2]},
        *({"role": m.role.value, "content": m.text} for m in history[3:]),
    ]
    assert build_real(history, total_chars(expected)) == expected


def test_the_note_counts_the_user_messages_left_out_when_the_rest_fits_whole() -> None:
    """Short messages, a budget that only holds the request, the last three answers and the
    latest exchange: the two oldest answers are left out and the note says so."""
    history = conversation(6)  # u0 a0 … u5 a5 current
    t = [m.text for m in history]
    expected = [
        {"role": "system", "content": system_with(Omissions(replies=5, messages=2))},
        {"role": "user", "content": SEP.join([t[0], t[6], t[8], t[10]])},
        {"role": "assistant", "content": t[11]},
        {"role": "user", "content": t[12]},
    ]
    assert build(history, total_chars(expected)) == expected


def test_past_every_plan_each_message_is_cut_to_the_floor_and_the_note_says_how_many() -> None:
    """A budget no plan fits: every kept message longer than MIN_KEPT_CHARS is cut to it (the
    request stays bounded), one of exactly MIN_KEPT_CHARS is sent whole, and the note counts
    the cut ones only."""
    floor_sized = "b" * MIN_KEPT_CHARS
    history = [user("r" * 50_000), assistant(floor_sized), user("n" * 50_000)]
    messages = build(history, budget=100)
    assert messages[0]["content"] == system_with(Omissions(shortened=2))
    assert messages[2]["content"] == floor_sized
    for message, source in zip(messages[1::2], ("r", "n"), strict=True):
        assert len(message["content"]) == MIN_KEPT_CHARS
        assert message["content"].startswith(source) and "chars cut]" in message["content"]


def older_reply_budget(share: int) -> int:
    """The budget at which the first plan cuts the older reply of `long_replies()` to `share`
    characters (the note and the rest kept whole)."""
    rest = 2 + 2 + 3000 + 2  # u0, u1, the latest reply, u2
    return len(SYSTEM) + len(SEP) + len(note(Omissions(shortened=1))) + rest + share


def long_replies() -> list[Message]:
    return [user("u0"), assistant("A" * 3000), user("u1"), assistant("B" * 3000), user("u2")]


def test_an_older_reply_is_cut_down_to_the_floor_before_the_latest_is_touched() -> None:
    """At the budget that leaves the older reply exactly MIN_KEPT_CHARS, that reply is cut to
    exactly that and the latest reply stays whole, filling the budget to the character."""
    budget = older_reply_budget(MIN_KEPT_CHARS)
    messages = build(long_replies(), budget)
    assert len(messages[2]["content"]) == MIN_KEPT_CHARS
    assert messages[4]["content"] == "B" * 3000
    assert messages[0]["content"] == system_with(Omissions(shortened=1))
    assert total_chars(messages) == budget


def test_a_shortened_reply_is_cut_no_further_than_the_budget_needs() -> None:
    """For several budgets the older reply is cut to exactly what is left (the request fills
    the budget), with the real note and excerpt templates too."""
    for share in (1000, 1234, 1951, 2000):  # 1,000 or more cut: a note as long as for 3,000
        budget = older_reply_budget(share)
        messages = build(long_replies(), budget)
        assert total_chars(messages) == budget, share
        assert messages[4]["content"] == "B" * 3000

    for budget in (4300, 4500, 5000):  # the older reply cut to 1,011, 1,211, 1,711
        messages = build_real(long_replies(), budget)
        assert total_chars(messages) == budget, budget
        assert messages[4]["content"] == "B" * 3000


def test_a_message_within_the_common_share_keeps_its_size_and_the_longer_takes_the_rest() -> None:
    """Both replies shortenable, room for 3,000 (then 3,001) characters of them: the
    1,500-character reply is its fair share and stays whole (not counted as shortened);
    the 3,000-character one gets all the rest."""
    history = [user("u0"), assistant("A" * 1500), user("u1"), assistant("B" * 3000), user("u2")]
    base = len(SYSTEM) + len(SEP) + len(note(Omissions(shortened=1))) + 6
    for room, latest in ((3000, 1500), (3001, 1501)):
        messages = build(history, base + room)
        assert messages[0]["content"] == system_with(Omissions(shortened=1))
        assert messages[2]["content"] == "A" * 1500
        assert len(messages[4]["content"]) == latest
        assert messages[4]["content"].startswith("BBB") and "chars cut]" in messages[4]["content"]


NOTE_COUNTS = re.compile(r"\[(\d+) replies, (\d+) messages omitted, (\d+) cut\]")


def mixed_history() -> list[Message]:
    """Replies and answers of assorted sizes, each starting with a unique tag."""
    history: list[Message] = []
    for i, (answer, reply) in enumerate([(40, 2600), (1500, 900), (30, 1800), (2200, 1200)]):
        history += [user(f"<u{i}>".ljust(answer, "u")), assistant(f"<a{i}>".ljust(reply, "a"))]
    return [*history, user("<now>".ljust(500, "n"))]


def test_for_every_budget_the_note_counts_what_was_given_up() -> None:
    """Over a sweep of budgets: the request fits the budget whenever anything can, and the
    note's counts equal the replies and answers missing and the messages shortened."""
    history = mixed_history()
    smallest = total_chars(build(history, 1))
    full = len(SYSTEM) + sum(len(m.text) for m in history)
    for budget in range(smallest, full + 1, 7):
        messages = build(history, budget)
        assert total_chars(messages) <= budget, budget
        sent = texts(messages[1:])
        missing = [m for m in history if m.text[:5] not in sent]
        found = NOTE_COUNTS.search(messages[0]["content"])
        counts = tuple(int(n) for n in found.groups()) if found else (0, 0, 0)
        assert counts == (
            sum(m.role is Role.ASSISTANT for m in missing),
            sum(m.role is Role.USER for m in missing),
            sent.count("chars cut]"),
        ), budget


def test_with_the_real_note_every_budget_that_can_be_met_is_met() -> None:
    """The real omission note differs in length with what it reports (left out, shortened,
    both): over a sweep of budgets, the request never exceeds one that can be met."""
    for history in (conversation(4), mixed_history()):
        smallest = total_chars(build_real(history, 1))
        full = len(SYSTEM) + sum(len(m.text) for m in history)
        for budget in range(smallest, full + 1, 3):
            assert total_chars(build_real(history, budget)) <= budget, budget
