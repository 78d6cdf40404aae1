"""Turns with attachments through the service, end to end: a real SQLite file, the real
openai SDK and the fake model server. Images reach the model in their own round only; a
text-only model's refusal of them still answers the round; the original request's
document stays in the model's context through the final round, which names it instead
of repeating it."""

from __future__ import annotations

import pytest

from core.domain.asking import UserMessage
from core.domain.attachments import DocumentText, Image, MessageInput, document_block
from core.domain.consultation import Role, Status
from core.domain.errors import ModelError
from core.domain.outcomes import Notice
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer, image_parts, text_of
from storage.sqlite.store import SqliteStore
from tests.core.test_service import KEY, messages_of, stored, system_of

PHOTO = Image("image/jpeg", b"\xff\xd8\xff-a-leaf-with-brown-spots")
LEAF = MessageInput(words="What is wrong with my ficus?", images=(PHOTO,))


def user_images(model: FakeModelServer, index: int) -> list[list[dict[str, object]]]:
    """The image parts of each user message of request `index`."""
    return [image_parts(m) for m in messages_of(model, index) if m["role"] == "user"]


async def test_images_go_to_the_model_in_their_round_only(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Round 1 sends the photo as an image part of the last user message; round 2 sends
    round 1 as the stored text, its [photo] placeholder in place of the image."""
    first = await service.turns.ask(UserMessage(KEY, LEAF.stored_text, images=LEAF.images))
    await service.turns.ask(UserMessage(KEY, "It stands by the window."))

    assert user_images(model, 0) == [
        [{"type": "image_url", "image_url": {"url": PHOTO.data_url()}}]
    ]
    assert text_of(messages_of(model, 0)[1]["content"]) == "[photo]\n\nWhat is wrong with my ficus?"
    assert user_images(model, 1) == [[], []]
    assert messages_of(model, 1)[1]["content"] == "[photo]\n\nWhat is wrong with my ficus?"
    assert Notice.IMAGES_NOT_SEEN not in first.notices
    assert (await stored(store, first.consultation_id))[0] == (Role.USER, LEAF.stored_text)


async def test_an_api_session_sends_round_ones_images(
    service: Engine, model: FakeModelServer
) -> None:
    """start_session answers round 1 with its images; the open turn is stored once."""
    reply = await service.sessions.start_session(LEAF.stored_text, max_rounds=2, images=LEAF.images)

    assert user_images(model, 0) == [
        [{"type": "image_url", "image_url": {"url": PHOTO.data_url()}}]
    ]
    session = await service.sessions.get_session(reply.consultation_id)
    assert [m.text for m in session.messages if m.role is Role.USER] == [LEAF.stored_text]


@pytest.mark.parametrize("server", ["openai", "llama.cpp", "groq"])
async def test_a_text_only_model_answers_without_the_images_and_the_reply_says_so(
    service: Engine, model: FakeModelServer, store: SqliteStore, server: str
) -> None:
    """The model refuses the image parts: the same round is asked again without them, with
    a note that the user sent a photo it cannot see; the reply carries IMAGES_NOT_SEEN,
    and the round is consumed once, with one stored reply."""
    model.reject_images = server

    reply = await service.turns.ask(UserMessage(KEY, LEAF.stored_text, images=LEAF.images))

    assert len(model.requests) == 2
    assert user_images(model, 1) == [[]]
    assert "cannot see images" in system_of(model, 1)
    assert "cannot see images" not in system_of(model, 0)
    assert messages_of(model, 1)[1]["content"] == LEAF.stored_text
    assert reply.text == f"Reply to: {LEAF.stored_text}"
    assert Notice.IMAGES_NOT_SEEN in reply.notices and Notice.STARTED in reply.notices
    assert reply.round == 1
    assert await stored(store, reply.consultation_id) == [
        (Role.USER, LEAF.stored_text),
        (Role.ASSISTANT, reply.text),
    ]
    after = await service.turns.ask(UserMessage(KEY, "Brown spots on the edges."))
    assert after.round == 2 and Notice.IMAGES_NOT_SEEN not in after.notices
    assert "cannot see images" not in system_of(model)
    assert [m["role"] for m in messages_of(model)] == ["system", "user", "assistant", "user"]


async def test_a_refusal_for_another_reason_still_fails_the_round(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Only a refusal of the images is answered without them: another failure leaves the
    message as the open turn, as any model failure does."""
    model.enqueue("upstream exploded", status=503)

    with pytest.raises(ModelError, match="503"):
        await service.turns.ask(UserMessage(KEY, LEAF.stored_text, images=LEAF.images))

    assert len(model.requests) == 1
    active = await store.load_active(KEY)
    assert active is not None and [m.role for m in active.messages] == [Role.USER]


def lease(chars: int) -> DocumentText:
    clauses = (f"Clause {n}: the tenant pays on the first of the month." for n in range(10_000))
    return DocumentText("lease.pdf", "\n".join(clauses)[:chars])


async def test_the_final_round_names_the_document_which_stays_in_the_context(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """The final reminder quotes the request's own words and names its document without
    repeating it; the document is whole in the first user message of every round, though
    it is longer than the whole history budget."""
    document = lease(26_000)
    request = MessageInput(words="Is this lease fair to me?", documents=(document,))
    await service.settings.set_max_rounds(KEY, 3)

    await service.turns.ask(UserMessage(KEY, request.stored_text))
    await service.turns.ask(UserMessage(KEY, "I rent in Berlin."))
    final = await service.turns.ask(UserMessage(KEY, "Two rooms, since 2019."))

    assert final.is_final
    reminder = system_of(model, 2)
    assert "\n> Is this lease fair to me?\n" in reminder
    assert '> [document "lease.pdf" attached]' in reminder
    assert "Clause 1:" not in reminder
    block = document_block(document)
    for index in range(3):
        assert messages_of(model, index)[1]["content"].count(block) == 1
    sent = "\n".join(str(m["content"]) for m in messages_of(model, 2))
    assert "I rent in Berlin." in sent and "Two rooms, since 2019." in sent
    consultation = await store.get(final.consultation_id)
    assert consultation is not None and consultation.status is Status.COMPLETE


async def test_in_a_long_consultation_typed_answers_outlast_later_documents(
    service: Engine, model: FakeModelServer
) -> None:
    """Long replies and a 20,000-character document sent in round 2 overflow the history:
    the later document is shown by name while every answer the user typed is sent, and
    the request's own document is still whole."""
    await service.settings.set_max_rounds(KEY, 5)
    request = MessageInput(words="Is this lease fair to me?", documents=(lease(12_000),))
    letter = MessageInput(
        words="The landlord's letter:",
        documents=(DocumentText("letter.txt", "Dear tenant, the rent rises. " * 700),),
    )
    typed = ["I rent in Berlin.", "Two rooms, since 2019.", "I pay 900 euros."]
    for n in range(4):
        model.enqueue(" ".join(f"Question {n}.{k}: how much is item {k}?" for k in range(60)))

    await service.turns.ask(UserMessage(KEY, request.stored_text))
    await service.turns.ask(UserMessage(KEY, letter.stored_text))
    for words in typed:
        await service.turns.ask(UserMessage(KEY, words))

    sent = "\n".join(str(m["content"]) for m in messages_of(model))
    assert all(words in sent for words in typed)
    assert "The landlord's letter:" in sent
    assert '[document "letter.txt" attached]' in sent
    assert "Dear tenant" not in sent
    assert document_block(request.documents[0]) in messages_of(model)[1]["content"]
    assert "shown by name only" in system_of(model)
