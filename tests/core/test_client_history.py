"""A consultation rebuilt from the conversation a chat app sends (`core.domain.client_history`)
and the round Markdown it reads back (`core.domain.round_markdown`): pure functions."""

from __future__ import annotations

from typing import TypedDict

import pytest

from core.domain.clarifying import Answer, ClarifyingRound, Question
from core.domain.client_history import HistoryInvalid, Next, Sent, rebuild
from core.domain.consultation import Role
from core.domain.round_markdown import (
    IN_OWN_WORDS,
    WITH_OPTIONS,
    is_round,
    read_round,
    round_body,
    round_markdown,
)

LAPTOP = ClarifyingRound(
    "Two things first.",
    (Question("Budget?", ("< 500", "500+")), Question("Which city?", ())),
)


def user(text: str) -> Sent:
    return Sent("user", text)


def assistant(text: str) -> Sent:
    return Sent("assistant", text)


def test_a_structured_round_reads_back_as_written() -> None:
    """The Markdown of a round with options ends with the labels line and reads back as
    the same questions and options, its text the round's own text."""
    text = round_markdown("ignored", LAPTOP)
    assert text.endswith(WITH_OPTIONS) and is_round(text)
    assert "1. Budget?\n   - 1a) < 500\n   - 1b) 500+\n2. Which city?" in text
    body, found = read_round(text + "\n")
    assert found == LAPTOP and body == LAPTOP.text


def test_a_prose_round_and_an_answer_are_told_apart_by_the_closing_line() -> None:
    """A prose round ends with the own-words line; an answer ends with neither line, and
    `round_body` leaves it as it is."""
    text = round_markdown("What is your budget?", None)
    assert text.endswith(IN_OWN_WORDS) and is_round(text)
    assert read_round(text) == ("What is your budget?", None)
    assert not is_round("Buy the ThinkPad.")
    assert round_body("Buy the ThinkPad.") == "Buy the ThinkPad."


def test_the_first_message_is_the_request_and_asks_round_one() -> None:
    """A conversation of one user message is a new consultation's first round."""
    state = rebuild([Sent("system", "Be terse."), user("Which laptop?")], **_settings())
    assert (state.request, state.next, state.rounds_done, state.history) == (
        "Which laptop?",
        Next.ROUND,
        0,
        (),
    )
    assert state.instructions == "Be terse." and state.prior_key is None


def test_answers_by_label_after_a_round_pick_its_options() -> None:
    """`1b 2c`-shaped leading labels after a round with options are its answers; the rest
    of the line follows them; the history's labels become question–answer lines."""
    round_ = round_markdown("", LAPTOP)
    state = rebuild([user("Which laptop?"), assistant(round_), user("1b Berlin")], **_settings())
    assert state.next is Next.ROUND and state.rounds_done == 1
    assert state.answers == (Answer(1, 2),) and state.text == "Berlin"
    assert state.history[1].questions == LAPTOP
    later = rebuild(
        [
            user("Which laptop?"),
            assistant(round_),
            user("1b Berlin"),
            assistant(round_markdown("Gaming?", None)),
            user("yes"),
        ],
        **_settings(),
    )
    assert later.history[2].text == "1. Budget? — 500+\nBerlin"
    assert later.answers == () and later.text == "yes"


def test_a_label_the_round_lacks_is_refused_naming_it() -> None:
    """A last message whose label names no option is `HistoryInvalid` saying which."""
    sent = [user("Which laptop?"), assistant(round_markdown("", LAPTOP)), user("1c")]
    with pytest.raises(HistoryInvalid, match="no option c"):
        rebuild(sent, **_settings())


def test_answer_asks_the_final_answer_now() -> None:
    """`/answer` after a round asks the final answer now; the reply after it is final and
    a question after that is a follow-up."""
    sent = [user("Which laptop?"), assistant(round_markdown("Budget?", None)), user(" /answer ")]
    assert rebuild(sent, **_settings()).next is Next.FINAL_NOW
    sent += [assistant("Buy the ThinkPad."), user("Why?")]
    state = rebuild(sent, **_settings())
    assert (state.next, state.complete, state.rounds_done) == (Next.FOLLOW_UP, True, 2)
    assert state.history[2].final_now


def test_the_round_limit_makes_the_last_reply_final_whatever_it_says() -> None:
    """At the round limit a reply is the final answer even if it ends like a round."""
    sent = [user("Q"), assistant(round_markdown("A?", None)), user("a")]
    sent += [assistant(round_markdown("B?", None)), user("more")]
    assert rebuild(sent, **_settings(rounds=2)).next is Next.FOLLOW_UP
    assert rebuild(sent, **_settings(rounds=3)).next is Next.ROUND


def test_past_the_follow_up_limit_a_new_consultation_starts() -> None:
    """Once the follow-ups are used, the next user message is a new consultation's request,
    and that consultation is rebuilt on its own."""
    sent = [user("Q"), assistant("Final."), user("f1"), assistant("A1"), user("New question")]
    state = rebuild(sent, **_settings(follow_ups=1))
    assert (state.request, state.next, state.history) == ("New question", Next.ROUND, ())
    sent += [assistant(round_markdown("Which?", None)), user("This one")]
    state = rebuild(sent, **_settings(follow_ups=1))
    assert state.request == "New question" and state.rounds_done == 1
    assert rebuild(sent[:3], **_settings(follow_ups=0)).request == "f1"


def test_keys_agree_exactly_while_the_histories_agree() -> None:
    """A turn's key depends on everything sent before it and on the seed: an edited
    earlier message or other settings change it; the same history gives the same keys."""
    sent = [user("Q"), assistant(round_markdown("A?", None)), user("a")]
    one, again = rebuild(sent, **_settings()), rebuild(list(sent), **_settings())
    assert one.key == again.key and one.prior_key == again.prior_key
    edited = rebuild([user("Q2"), *sent[1:]], **_settings())
    assert edited.key != one.key and edited.prior_key != one.prior_key
    assert rebuild(sent, **_settings(seed="other")).key != one.key
    first = rebuild(sent[:1], **_settings())
    assert one.prior_key == first.key


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ([assistant("hi")], "must be the user's"),
        ([user("Q"), assistant("A")], "last message must be the user's"),
        ([Sent("system", "only")], "must be the user's"),
    ],
)
def test_a_conversation_that_is_no_consultation_is_refused(sent: list[Sent], why: str) -> None:
    """No user message first, or an assistant message last, is `HistoryInvalid`."""
    with pytest.raises(HistoryInvalid, match=why):
        rebuild(sent, **_settings())


def test_consecutive_messages_of_one_role_are_one_turn() -> None:
    """Two user messages in a row are one request; the roles of the history alternate."""
    state = rebuild(
        [user("Q"), user("more"), assistant(round_markdown("A?", None)), user("a"), user("b")],
        **_settings(),
    )
    assert state.request == "Q\n\nmore" and state.message == "a\n\nb"
    assert [turn.role for turn in state.history] == [Role.USER, Role.ASSISTANT]


class _Settings(TypedDict):
    max_rounds: int
    followup_limit: int
    seed: str


def _settings(rounds: int = 3, follow_ups: int = 2, seed: str = "s") -> _Settings:
    return {"max_rounds": rounds, "followup_limit": follow_ups, "seed": seed}
