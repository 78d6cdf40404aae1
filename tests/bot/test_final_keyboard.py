"""The buttons under a final answer: what they carry and how strictly it is read back."""

from __future__ import annotations

from bot.transport.keyboards import EXPORT, FOLLOW_UP, consultation_of, reply_keyboard
from bot.updates.buttons import MAX_DATA_BYTES
from core.domain.outcomes import Reply

CONSULTATION = "0123456789abcdef0123456789abcdef"


def final_reply(consultation_id: str = CONSULTATION) -> Reply:
    return Reply("answer", consultation_id, 3, 3, is_final=True, is_complete=True, model="m")


def test_a_final_answer_offers_a_follow_up_and_its_document() -> None:
    markup = reply_keyboard(final_reply(), "en")
    assert markup is not None
    buttons = [button for row in markup.inline_keyboard for button in row]
    assert [(b.text, b.callback_data) for b in buttons] == [
        ("Ask a follow-up", f"{FOLLOW_UP}:{CONSULTATION}"),
        ("Document", f"{EXPORT}:{CONSULTATION}"),
    ]
    assert all(len(str(b.callback_data).encode()) <= MAX_DATA_BYTES for b in buttons)


def test_without_follow_ups_only_the_document_is_offered_in_the_users_language() -> None:
    markup = reply_keyboard(final_reply(), "ru", follow_up=False)
    assert markup is not None
    assert [b.text for row in markup.inline_keyboard for b in row] == ["Документ"]


def test_a_dashed_id_is_carried_bare_and_another_shape_gets_no_buttons() -> None:
    dashed = "01234567-89ab-cdef-0123-456789abcdef"
    markup = reply_keyboard(final_reply(dashed), "en")
    assert markup is not None
    assert markup.inline_keyboard[0][0].callback_data == f"{FOLLOW_UP}:{CONSULTATION}"
    assert reply_keyboard(final_reply("session-7"), "en") is None


def test_only_a_bare_id_is_read_back() -> None:
    assert consultation_of(CONSULTATION) == CONSULTATION
    for forged in (
        "",
        CONSULTATION.upper(),
        CONSULTATION + "0",
        CONSULTATION[:-1],
        f"{CONSULTATION}\n",
        "../x",
    ):
        assert consultation_of(forged) is None, forged
