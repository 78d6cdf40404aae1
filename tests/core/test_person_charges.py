"""Every model call a Telegram member causes is charged to them (the person), not only to
the chat, on both stores: a round, the final answer, a follow-up and a voice note's
transcription, as the console's people list and /usage read them.

The real bot runs (tests/bot_harness.py) on a SQLite file or a PostgreSQL database, with
the fake model and transcription servers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from core.domain.people import PeopleQuery
from core.domain.usage import ScopeKind, day_of, month_start
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from tests.bot_harness import ask_private, sent, started_bot, wait_sent
from tests.store_contract import StoreKind

USER = 501
PERSON = f"tg:{USER}"
VOICE = b"OggS\x00\x02" + bytes(200)


def spend(model_server: FakeModelServer, tokens: int, text: str) -> None:
    model_server.enqueue(text, usage={"prompt_tokens": tokens - 1, "completion_tokens": 1})


async def test_every_call_of_a_member_is_charged_to_them(
    kind: StoreKind,
    database: str,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """A round (10 tokens), the final answer (20), a follow-up (30), a voice note's
    transcription (50, as the service reports it) and the round it starts (40): the
    person's usage holds each call under its kind, and the people list shows all 150
    tokens today, as the chat's usage does."""
    where: dict[str, Any] = {"database_url": database} if kind.name == "postgres" else {}
    db_path = Path(database) if kind.name == "sqlite" else Path(database + ".unused")
    transcription_server.usage = {
        "type": "tokens", "input_tokens": 45, "output_tokens": 5, "total_tokens": 50
    }  # fmt: skip
    async with started_bot(
        db_path,
        bot_api,
        model_server,
        transcription_model="gpt-4o-mini-transcribe",
        transcription_base_url=transcription_server.base_url,
        **where,
    ) as bot:
        spend(model_server, 10, "Which load?")
        await ask_private(bot, USER, "Pick a database")
        spend(model_server, 20, "Use PostgreSQL.")
        await ask_private(bot, USER, "/answer")
        final = sent(bot, USER)[-1].result["message_id"]
        spend(model_server, 30, "Back it up nightly.")
        before = len(sent(bot, USER))
        await bot.send(USER, "And backups?", reply_to_message=final)
        await wait_sent(bot, USER, before + 1)
        spend(model_server, 40, "Which size?")
        # What was heard, then the answer.
        await ask_private(bot, USER, None, media=bot.api.voice(VOICE), parts=2)
        store = bot.runtime.store
        day = day_of(time.time())
        rows = await store.list_people(PeopleQuery(day, month_start(day)))
        person = await store.usage_of(ScopeKind.PERSON, PERSON, since_day=day, until_day=day)
        chat = await store.usage_of(ScopeKind.CHAT, PERSON, since_day=day, until_day=day)
    assert len(model_server.requests) == 4 and len(transcription_server.calls) == 1
    assert [(r.person, r.tokens_today) for r in rows] == [(PERSON, 150)]
    assert sum(t.prompt_tokens + t.completion_tokens for t in person) == 150
    assert sum(t.calls for t in person) == 5
    assert sum(t.prompt_tokens + t.completion_tokens for t in chat) == 150
