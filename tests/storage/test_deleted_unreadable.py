"""Deleted means unreadable: after `/forget`, the API's deletions, an operator's deletion
and the retention purge, the SQLite file and its WAL hold the deleted words nowhere, not
in the rows, free pages, the WAL's old frames or the request search index (real SQLite
files, the real bot against the fake Bot API, the real API server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from api.memory import api_scope
from core.domain.audit import AuditEntry
from core.domain.consultation import Consultation, Message, Role, Status
from core.domain.listing import ConsultationQuery
from fakes.model_server import FakeModelServer
from storage.sqlite import erasure
from storage.sqlite import store as store_module
from storage.sqlite.erasure import index_erases_itself, merge_step
from storage.sqlite.store import SqliteStore
from tests.api_harness import RunningApi
from tests.bot.test_bot_forget import confirmation, pressed
from tests.bot_harness import RunningBot, ask_private
from tests.store_contract import make

USER = 5377
OTHER = 5378
KEPT = "Keepworthy"
MARKER = "Vexquorbilt"
"""Unique in every file: a word of no language and none of the bot's or model's texts."""
REQUEST_MARKER = "Ŧŉƺǂ"
"""Characters nothing else stores: each of their trigrams, searched for in the request
index, leaves its last two characters whole in the file (terms share prefixes only)."""


def residue(db: Path, text: str = MARKER) -> dict[str, int]:
    """How often `text` (as stored, or case-folded as the search index keeps it) occurs in
    the database file and in its WAL, by file name."""
    found: dict[str, int] = {}
    for path in (db, db.with_name(db.name + "-wal")):
        data = path.read_bytes() if path.exists() else b""
        found[path.name] = sum(
            data.count(form.encode()) for form in {text, text.casefold(), text.upper()}
        )
    return found


def index_residue(db: Path, text: str = REQUEST_MARKER) -> dict[str, int]:
    """How often the tail (last two characters) of one of `text`'s trigrams occurs in
    the file or its WAL: what the request search index keeps of it."""
    tails = {text[i + 1 : i + 3] for i in range(len(text) - 2)}
    found: dict[str, int] = {}
    for tail in tails:
        for name, count in residue(db, tail).items():
            found[name] = found.get(name, 0) + count
    return found


def clean(db: Path) -> dict[str, int]:
    return dict.fromkeys(residue(db), 0)


def checkpoint(db: Path) -> None:
    """Copy the WAL into the file, as SQLite's automatic checkpoint does every 1,000 pages
    (the WAL keeps its frames): the words are then in both."""
    with contextlib.closing(sqlite3.connect(db)) as other:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0


@pytest.mark.parametrize("checkpointed", [False, True], ids=["in-wal", "checkpointed"])
async def test_forget_leaves_the_words_nowhere_in_the_file_or_its_wal(
    bot: RunningBot, model_server: FakeModelServer, tmp_path: Path, checkpointed: bool
) -> None:
    db = tmp_path / "bot.sqlite3"
    model_server.enqueue("Which budget do you have?")
    await ask_private(bot, OTHER, f"Help me choose a tent, {KEPT}")
    model_server.enqueue("Which budget do you have?")
    await ask_private(bot, USER, f"Help me choose a laptop, {MARKER} {REQUEST_MARKER} here")
    model_server.enqueue("Which budget do you have?")
    await ask_private(bot, OTHER + 1, f"Help me choose a phone, {KEPT}")
    person = f"tg:{USER}"
    await bot.runtime.store.add_facts(person, person, [f"Is called {MARKER}"], at=1.0)
    await bot.runtime.store.add_facts(f"tg:{OTHER}", f"tg:{OTHER}", [f"Likes {KEPT}"], at=1.0)
    assert residue(db)[db.name + "-wal"] > 0 and index_residue(db)[db.name + "-wal"] > 0
    if checkpointed:
        checkpoint(db)
        assert residue(db)[db.name] > 0 and index_residue(db)[db.name] > 0

    buttons, message_id = await confirmation(bot, USER)
    assert await pressed(bot, USER, USER, buttons["Delete everything"], message_id) == "Deleted."

    assert residue(db) == clean(db)
    assert index_residue(db) == clean(db)
    assert sum(residue(db, KEPT).values()) > 0  # the others' words, in the same pages, stay


async def post_chat(api: RunningApi, message: str) -> str:
    response = await api.client.post(
        "/api/chat",
        data=json.dumps({"message": message, "maxRounds": 3}),
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 200, await response.text()
    return str((await response.json())["sessionId"])


@pytest.mark.parametrize("checkpointed", [False, True], ids=["in-wal", "checkpointed"])
async def test_the_apis_deletions_leave_the_words_nowhere_in_the_file_or_its_wal(
    api: RunningApi, tmp_path: Path, checkpointed: bool
) -> None:
    """`DELETE /api/sessions/{id}` and `DELETE /api/users/{userId}/memory`."""
    db = tmp_path / "api.sqlite3"
    await post_chat(api, f"Help me plan a garden, {KEPT}")
    session = await post_chat(api, f"Help me plan a trip, {MARKER} {REQUEST_MARKER}")
    await post_chat(api, f"Help me plan a party, {KEPT}")
    scope = api_scope("u-7")
    await api.store.add_facts(scope.owner, scope.person, [f"Is called {MARKER}"], at=1.0)
    await api.store.add_facts("api:u-8", "api:u-8", [f"Likes {KEPT}"], at=1.0)
    if checkpointed:
        checkpoint(db)
        assert residue(db)[db.name] > 0 and index_residue(db)[db.name] > 0

    assert (await api.client.delete(f"/api/sessions/{session}")).status == 204
    assert residue(db) != clean(db)  # the fact is still kept
    assert index_residue(db) == clean(db)
    assert (await api.client.delete("/api/users/u-7/memory")).status == 204

    assert residue(db) == clean(db)
    assert sum(residue(db, KEPT).values()) > 0


def consultation(chat_key: str, at: float, request: str) -> Consultation:
    """An ACTIVE consultation whose request and both messages hold `request`."""
    said = [Message(Role.USER, request, at), Message(Role.USER, f"More: {request}", at)]
    return dataclasses.replace(make(chat_key, at=at), initial_request=request, messages=said)


Deletion = Callable[[SqliteStore, str], Awaitable[object]]


async def operator_deletes(store: SqliteStore, consultation_id: str) -> object:
    return await store.delete_consultation(consultation_id, AuditEntry(9.0, "op", "delete", "x"))


async def retention_purges(store: SqliteStore, consultation_id: str) -> object:
    found = await store.get(consultation_id)
    assert found is not None
    await store.set_status(consultation_id, Status.COMPLETE, at=found.last_activity_at)
    return await store.purge(older_than=found.last_activity_at + 1)


async def operator_forgets_memory(store: SqliteStore, _: str) -> object:
    return await store.forget_person_memory("tg:1", AuditEntry(9.0, "op", "forget", "tg:1"))


async def person_deletes_the_fact(store: SqliteStore, _: str) -> object:
    facts = (await store.load_memory("tg:1", "tg:1")).facts
    return [await store.delete_fact("tg:1", fact.id) for fact in facts]


@pytest.mark.parametrize(
    "delete",
    [operator_deletes, retention_purges, operator_forgets_memory, person_deletes_the_fact],
)
async def test_every_deletion_of_the_store_leaves_the_words_nowhere(
    store: SqliteStore, db_path: Path, delete: Deletion
) -> None:
    """The console's deletions (a consultation, a person's memory), the retention purge and
    one fact deleted from `/memory`, on a file already checkpointed."""
    words = f"{MARKER} {REQUEST_MARKER}"
    memory_only = delete in (operator_forgets_memory, person_deletes_the_fact)
    kept = [consultation(f"chat:{n}", 500.0 + n, f"Plan {KEPT}") for n in (1, 3)]
    gone = consultation("chat:2", 501.5, f"Plan {words}")
    for each in (kept[0], gone, kept[1]):
        await store.create(each)
    await store.add_facts("tg:1", "tg:1", [f"Is called {MARKER}", f"Was {MARKER}"], at=1.0)
    await store.add_facts("tg:2", "tg:2", [f"Likes {KEPT}"], at=1.0)
    checkpoint(db_path)

    await delete(store, gone.id)
    if memory_only:  # the consultation stays: only the facts are gone
        assert residue(db_path, f"Is called {MARKER}") == clean(db_path)
        assert residue(db_path, f"Was {MARKER}") == clean(db_path)
    else:
        assert await store.get(gone.id) is None
        assert index_residue(db_path) == clean(db_path)
        await store.forget_memory("tg:1")
        assert residue(db_path) == clean(db_path)
    assert sum(residue(db_path, KEPT).values()) > 0


def test_the_search_index_erases_itself_from_sqlite_3_42_on() -> None:
    """Before 3.42 FTS5 has no `secure-delete`: each deletion merges the index instead."""
    assert not index_erases_itself((3, 41, 2))
    assert index_erases_itself((3, 42, 0)) and index_erases_itself((3, 46, 1))


async def test_other_chats_writing_between_the_merge_steps_leave_no_trace_behind(
    store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below SQLite 3.42 a forget merges the index in steps (of 2 pages here) until none is
    left to do: consultations created meanwhile are found afterwards, and the forgotten
    request's trigrams are gone all the same."""
    steps = 0

    def counted(db: sqlite3.Connection) -> bool:
        nonlocal steps
        steps += 1
        return merge_step(db)

    monkeypatch.setattr(erasure, "MERGE_PAGES_PER_STEP", 2)
    monkeypatch.setattr(store_module, "merge_step", counted)
    for n in range(60):
        filler = " ".join(f"w{n}q{k}" for k in range(60))
        await store.create(consultation(f"chat:{n}", 500.0 + n, f"Plan {KEPT} {n} {filler}"))
    await store.create(consultation("chat:gone", 600.0, f"Plan {MARKER} {REQUEST_MARKER}"))
    checkpoint(db_path)

    newcomers = [consultation(f"new:{n}", 700.0 + n, f"Trip {n} {KEPT}") for n in range(20)]
    await asyncio.gather(store.forget_chat("chat:gone"), *map(store.create, newcomers))

    assert residue(db_path) == clean(db_path) and index_residue(db_path) == clean(db_path)
    found = await store.list_consultations(ConsultationQuery(text=f"Trip 7 {KEPT}"))
    assert [c.id for c in found] == [newcomers[7].id]
    assert steps > 1 or index_erases_itself()
