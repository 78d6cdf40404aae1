"""Client memory through the real engine: the real openai SDK against the fake model
server, a real SQLite store. Facts are extracted after a consultation completes (strict
`client_facts` schema, text when refused), reach the next consultation's system prompt
within their budget, stay within their scope, and nothing happens with memory off."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from core.domain.asking import UserMessage
from core.domain.facts import MemoryPreferences, MemoryScope, memory_scope
from core.domain.quotas import Limit, QuotaConfig, QuotaExceeded
from core.domain.usage import Payer
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer, response_format_of, schema_asked, text_of
from storage.sqlite.store import SqliteStore
from tests.service_harness import MakeEngine

HEADING = "What this person told you in earlier consultations"
PRIVATE = memory_scope("tg:7")
GROUP = memory_scope("tg:7", "tg:-100")


def system_of(body: dict[str, Any]) -> str:
    return text_of(body["messages"][0]["content"])


async def consult(
    service: Engine,
    chat_key: str,
    text: str,
    scope: MemoryScope | None,
    *,
    is_group: bool = False,
) -> str:
    """A one-round consultation started in `scope`; its id."""
    await service.settings.set_max_rounds(chat_key, 1)
    reply = await service.turns.ask(
        UserMessage(
            chat_key, text, memory=scope, is_group=is_group, author="Ann" if is_group else None
        )
    )
    assert reply.is_complete
    return reply.consultation_id


async def test_facts_are_asked_strictly_and_reach_the_next_consultation(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """The extraction is a strict json_schema `client_facts` request holding what the user
    said; its facts open the next consultation's system prompt, the answer not waiting."""
    service = engine(structured_questions="auto")
    model.enqueue("Final answer about the garden.")
    first = await consult(service, "tg:7", "I live in Riga and grow tomatoes.", PRIVATE)
    assert len(model.requests) == 1  # the answer did not wait for any extraction

    model.enqueue(json.dumps({"facts": ["Lives in Riga", "Grows tomatoes", "lives in riga"]}))
    update = await service.memories.remember(first)
    assert [f.text for f in update.facts] == ["Grows tomatoes", "Lives in Riga"]
    assert update.first_time

    extraction = model.requests[-1]
    assert response_format_of(extraction) == "client_facts"
    schema = extraction["response_format"]["json_schema"]
    assert schema["strict"] is True and schema["schema"]["required"] == ["facts"]
    assert "I live in Riga and grow tomatoes." in text_of(extraction["messages"][1]["content"])
    assert "Final answer about the garden." not in json.dumps(extraction)

    model.enqueue("Second answer.")
    second_id = await consult(service, "tg:7", "What should I plant next?", PRIVATE)
    system = system_of(model.requests[-1])
    assert HEADING in system
    assert system.index("- Grows tomatoes") < system.index("- Lives in Riga")  # newest first

    model.enqueue(json.dumps({"facts": ["Has a greenhouse"]}))
    second = await service.memories.remember(second_id)
    assert [f.text for f in second.facts] == ["Has a greenhouse"]
    assert not second.first_time  # the notice is due once


async def test_a_refused_schema_falls_back_to_one_fact_a_line_for_good(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """A server refusing both forms of the schema (json_schema, then json_object with it)
    is asked in text (one fact a line), and so are later extractions, without another
    refusal."""
    service = engine(structured_questions="auto")
    model.enqueue("Answer one.")
    first = await consult(service, "tg:7", "I am a nurse working nights.", PRIVATE)
    model.enqueue(format_error="openai")
    model.enqueue(format_error="openai")
    model.enqueue("- Works as a nurse\n- Works night shifts\n")
    update = await service.memories.remember(first)
    assert [f.text for f in update.facts] == ["Works night shifts", "Works as a nurse"]
    refused, refused_again, in_text = model.requests[-3:]
    assert response_format_of(refused) == "client_facts"
    assert schema_asked(refused_again) == "client_facts"
    assert response_format_of(refused_again) == "json_object"
    assert response_format_of(in_text) is None
    assert "one per line" in system_of(in_text)

    model.enqueue("Answer two.")
    second = await consult(service, "tg:7", "Another question.", PRIVATE)
    asked = len(model.requests)
    model.enqueue("none")
    assert (await service.memories.remember(second)).facts == ()
    assert len(model.requests) == asked + 1
    assert response_format_of(model.requests[-1]) is None


async def test_prose_instead_of_json_is_read_in_text_next_time(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """An endpoint answering prose where JSON was asked is asked again in text at once."""
    service = engine(structured_questions="auto")
    model.enqueue("Answer.")
    first = await consult(service, "tg:7", "I have two kids.", PRIVATE)
    model.enqueue("Sure! Here are the facts you asked for.")
    model.enqueue("Has two children")
    update = await service.memories.remember(first)
    assert [f.text for f in update.facts] == ["Has two children"]
    assert response_format_of(model.requests[-1]) is None


async def test_private_facts_never_reach_a_group_and_group_facts_stay_there(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """Facts kept in private are not sent in the person's group consultation, and the
    group's facts are sent only in that group's consultations started by that member."""
    service = engine()
    model.enqueue("Answer.")
    private = await consult(service, "tg:7", "I am allergic to nuts.", PRIVATE)
    model.enqueue("Allergic to nuts")
    await service.memories.remember(private)

    model.enqueue("Group answer.")
    group = await consult(service, "tg:-100", "We plan a team dinner.", GROUP, is_group=True)
    assert "nuts" not in system_of(model.requests[-1]).lower()
    model.enqueue("Leads the sales team")
    await service.memories.remember(group)

    model.enqueue("Private answer.")
    await consult(service, "tg:7", "Dinner ideas?", PRIVATE)
    system = system_of(model.requests[-1])
    assert "Allergic to nuts" in system and "sales team" not in system

    model.enqueue("Other group answer.")
    other = memory_scope("tg:7", "tg:-200")
    await consult(service, "tg:-200", "Hello group.", other, is_group=True)
    assert HEADING not in system_of(model.requests[-1])

    model.enqueue("Same group answer.")
    await consult(service, "tg:-100", "Next dinner?", GROUP, is_group=True)
    assert "Leads the sales team" in system_of(model.requests[-1])


async def test_facts_are_cut_to_their_token_budget_newest_first(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Only the newest facts that fit MEMORY_MAX_TOKENS are sent."""
    service = engine(memory_max_tokens=30)
    await store.add_facts(
        "tg:7", "tg:7", [f"Old fact number {n} " + "x" * 40 for n in range(5)], at=1.0
    )
    await store.add_facts("tg:7", "tg:7", ["Newest fact"], at=2.0)
    model.enqueue("Answer.")
    await consult(service, "tg:7", "Question.", PRIVATE)
    system = system_of(model.requests[-1])
    assert "Newest fact" in system
    assert system.count("Old fact number") == 1
    assert "Old fact number 4" in system  # the newest of the old ones


async def test_memory_off_for_the_person_makes_no_call_and_sends_nothing(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """With the person's memory off: no facts in the prompt, no extraction call."""
    service = engine()
    await store.add_facts("tg:7", "tg:7", ["Lives in Riga"], at=1.0)
    await service.memories.set_enabled(PRIVATE, False)
    model.enqueue("Answer.")
    consultation = await consult(service, "tg:7", "Question.", PRIVATE)
    assert HEADING not in system_of(model.requests[-1])
    assert (await service.memories.remember(consultation)).facts == ()
    assert len(model.requests) == 1
    assert (await store.load_memory("tg:7", "tg:7")).preferences == MemoryPreferences(False)


async def test_a_person_over_their_token_limit_gets_no_extraction_call(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Remembering is optional work paid with the person's tokens: once the final answer
    used up their daily limit, no extraction is sent and nothing is kept; it is not
    counted as a refusal (the person asked for nothing)."""
    refused: list[Limit] = []
    service = engine(quotas=QuotaConfig(user_daily_tokens=5), on_quota=refused.append)
    model.enqueue("Answer that crosses the limit.")
    await service.settings.set_max_rounds("tg:7", 1)
    reply = await service.turns.ask(
        UserMessage("tg:7", "I live in Riga.", memory=PRIVATE, payer=Payer("tg:7"))
    )
    assert reply.is_complete
    consultation = reply.consultation_id
    assert (await service.memories.remember(consultation)).facts == ()
    assert len(model.requests) == 1
    assert (await store.load_memory("tg:7", "tg:7")).facts == ()
    assert refused == []


async def test_an_extraction_under_way_holds_the_persons_tokens(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """An extraction is admitted like a follow-up and holds its call's reservation (its
    input and max_tokens) while it runs: a consultation the person starts meanwhile is
    refused when the reservation reaches their limit, without a model call; once the
    extraction settled what it really spent, the person is answered again."""
    service = engine(quotas=QuotaConfig(user_daily_tokens=600))
    payer = Payer("tg:7")
    model.enqueue("Answer.", usage={"prompt_tokens": 40, "completion_tokens": 10})
    await service.settings.set_max_rounds("tg:7", 1)
    first = await service.turns.ask(
        UserMessage("tg:7", "I live in Riga.", memory=PRIVATE, payer=payer)
    )
    extracting = asyncio.Event()
    model.enqueue(
        "Lives in Riga", usage={"prompt_tokens": 60, "completion_tokens": 10}, hold=extracting
    )
    remembering = asyncio.create_task(service.memories.remember(first.consultation_id))
    await model.wait_requests(2)
    with pytest.raises(QuotaExceeded):
        await service.turns.ask(UserMessage("tg:8", "Another question", payer=payer))
    extracting.set()
    assert [f.text for f in (await remembering).facts] == ["Lives in Riga"]
    model.enqueue("Second answer.")
    assert (
        await service.turns.ask(UserMessage("tg:8", "Another question", payer=payer))
    ).text == "Second answer."
    assert len(model.requests) == 3


async def test_memory_disabled_for_the_deployment_makes_no_call(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """MEMORY_ENABLED=false: no facts sent, no extraction call, nothing stored."""
    service = engine(memory_enabled=False)
    await store.add_facts("tg:7", "tg:7", ["Lives in Riga"], at=1.0)
    model.enqueue("Answer.")
    consultation = await consult(service, "tg:7", "Question.", PRIVATE)
    assert HEADING not in system_of(model.requests[-1])
    assert (await service.memories.remember(consultation)).facts == ()
    assert len(model.requests) == 1


async def test_without_a_scope_there_is_no_memory(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A consultation started without a memory scope (an API session without userId)
    neither reads nor keeps facts."""
    model.enqueue("Answer.")
    consultation = await consult(service, "tg:7", "I live in Riga.", None)
    assert (await service.memories.remember(consultation)).facts == ()
    assert len(model.requests) == 1


async def test_an_unfinished_consultation_is_not_remembered(
    service: Engine, model: FakeModelServer
) -> None:
    """Extraction runs only for a completed consultation."""
    model.enqueue("A question for you?")
    reply = await service.turns.ask(UserMessage("tg:7", "I live in Riga.", memory=PRIVATE))
    assert not reply.is_complete
    assert (await service.memories.remember(reply.consultation_id)).facts == ()
    assert len(model.requests) == 1


async def test_in_a_group_only_the_starters_words_are_read(
    service: Engine, model: FakeModelServer
) -> None:
    """Another member's words in a group consultation are not sent to the extraction."""
    await service.settings.set_max_rounds("tg:-100", 2)
    model.enqueue("Who is coming?")
    await service.turns.ask(
        UserMessage("tg:-100", "I organise the trip.", memory=GROUP, is_group=True, author="Ann")
    )
    model.enqueue("Final plan.")
    reply = await service.turns.ask(
        UserMessage("tg:-100", "I am vegan and live in Oslo.", is_group=True, author="Bob")
    )
    assert reply.is_complete
    model.enqueue("Organises trips")
    await service.memories.remember(reply.consultation_id)
    sent = text_of(model.requests[-1]["messages"][1]["content"])
    assert "I organise the trip." in sent and "Oslo" not in sent


async def test_a_consultation_forgotten_during_its_extraction_leaves_no_facts(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """/forget while the model reads the consultation: what it answers is not kept."""
    service = engine(structured_questions="auto")
    model.enqueue("Final answer about the garden.")
    first = await consult(service, "tg:7", "I live in Riga and grow tomatoes.", PRIVATE)
    release = asyncio.Event()
    model.enqueue(json.dumps({"facts": ["Lives in Riga"]}), hold=release)
    remembering = asyncio.ensure_future(service.memories.remember(first))
    await model.wait_requests(2)

    await service.lifecycle.forget("tg:7")
    await service.memories.forget("tg:7")
    release.set()
    update = await remembering
    assert not update.facts
    assert not (await service.memories.state(PRIVATE)).facts


async def test_a_follow_up_sees_the_facts_its_consultation_started_with(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    service = engine(structured_questions="auto", memory_enabled=True)
    await store.add_facts("tg:7", "tg:7", ["Lives in Riga"], at=1.0)
    model.enqueue("Plant them in May.")
    await consult(service, "tg:7", "When do I plant tomatoes?", PRIVATE)
    model.enqueue("Cover them at night.")
    reply = await service.turns.follow_up("tg:7", "And if it frosts?")
    assert reply.follow_up == 1
    system = system_of(model.requests[-1])
    assert "follow-up" in system and HEADING in system and "- Lives in Riga" in system
