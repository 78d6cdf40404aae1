"""The HTTP API names the bot (`api.bots`): a request for a stored bot runs on that bot's
engine (its instruction or role, model, rounds and limits) and under that bot's keys
(`core.domain.api_keys`), so the same user, conversation and idempotency key under two
bots are two of each; a bot not stored, removed or disabled is refused before anything is
stored. Real server, real openai SDK on the fake model server, SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from api.openai_compat.routes import conversation_key
from core.domain.bots import NewBot, StoredBot, api_token_digest, parse_profile
from core.prompting.prompts import PromptLibrary
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi, api_settings, running_api
from tests.bot_harness import system_prompt
from tests.store_contract import StoreKind, count
from tests.waiting import until

INSTRUCTION = "You are the tax desk of Acme. Answer about taxes only."
JSON = {"Content-Type": "application/json"}
ADDRESS = "addr:127.0.0.1"
"""The client a request without a token counts for."""


@contextlib.asynccontextmanager
async def api_on(
    kind: StoreKind, database: str, model_server: FakeModelServer, **overrides: Any
) -> AsyncIterator[RunningApi]:
    """The API as production wires it, on a fresh database of `kind`."""
    values: dict[str, Any] = {"llm_models": "test-model,model-b", **overrides}
    if kind.name == "sqlite":
        settings = api_settings(Path(database), model_server.base_url, **values)
    else:
        settings = api_settings(
            Path("unused.sqlite3"), model_server.base_url, database_url=database, **values
        )
    async with running_api(settings) as api:
        yield api


async def add_bot(api: RunningApi, telegram_id: int, username: str, **profile: Any) -> StoredBot:
    """Store a bot as `bots add` does (the API never opens its token)."""
    new = NewBot(telegram_id, username, "sealed-token", "WXYZ", "", parse_profile(profile))
    return await api.store.bots.add_bot(new, at=time.time())


async def chat(
    api: RunningApi, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    response = await api.client.post(
        "/api/chat", data=json.dumps(body), headers={**JSON, **(headers or {})}
    )
    return response.status, await response.json()


async def completion(api: RunningApi, body: dict[str, Any]) -> tuple[int, Any]:
    response = await api.client.post("/v1/chat/completions", data=json.dumps(body), headers=JSON)
    return response.status, await response.json()


async def test_two_bots_keep_the_same_user_and_key_apart_each_on_its_own_settings(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """One userId and one Idempotency-Key sent to the deployment's bot, a bot with an
    instruction and model of its own (by id) and a lawyer bot (by @username) are three
    sessions, each model request carrying its bot's system prompt and model; a session
    is found only under its own bot."""
    async with api_on(kind, database, model_server) as api:
        taxes = await add_bot(api, 111, "tax_bot", instruction=INSTRUCTION, model="model-b")
        law = await add_bot(api, 222, "Law_Bot", role="lawyer")
        key = {"Idempotency-Key": "same-key"}
        sessions = {}
        for bot in (None, taxes.id, "@law_bot"):
            body: dict[str, Any] = {"message": "Can I deduct my car?", "userId": "u-1"}
            if bot is not None:
                body["bot"] = bot
            status, reply = await chat(api, body, key)
            assert status == 200, reply
            sessions[bot] = reply["sessionId"]
        assert len(set(sessions.values())) == 3
        assert len(model_server.requests) == 3  # the key replayed nothing across bots
        own, tax, lawyer = model_server.requests
        lawyer_text = PromptLibrary(api.settings.prompts_dir).role_text("lawyer")
        assert own["model"] == "test-model" and INSTRUCTION not in system_prompt(own)
        assert tax["model"] == "model-b" and INSTRUCTION in system_prompt(tax)
        assert lawyer["model"] == "test-model" and lawyer_text in system_prompt(lawyer)
        assert lawyer_text not in system_prompt(own)
        chat_keys = {
            None: f"api:{sessions[None]}",
            taxes.id: f"api{taxes.id}:{sessions[taxes.id]}",
            "@law_bot": f"api{law.id}:{sessions['@law_bot']}",
        }
        for chat_key in chat_keys.values():
            assert await kind.count(database, "consultations", chat_key=chat_key) == 1
        read = api.client.get
        tax_session = sessions[taxes.id]
        assert (await read(f"/api/sessions/{tax_session}?bot={taxes.id}")).status == 200
        for elsewhere in ("", "?bot=0", f"?bot={law.id}", "?bot=@law_bot"):
            response = await read(f"/api/sessions/{tax_session}{elsewhere}")
            assert response.status == 404, elsewhere
            assert (await response.json())["code"] == "SESSION_NOT_FOUND"
        # Another bot cannot continue it either: nothing is stored, the model is not called.
        status, refused = await chat(
            api, {"message": "and the bike?", "sessionId": tax_session, "bot": law.id}
        )
        assert (status, refused["code"]) == (404, "SESSION_NOT_FOUND")
        assert len(model_server.requests) == 3
        export = await read(f"/api/sessions/{tax_session}/export?format=md&bot={taxes.id}")
        assert export.status == 200 and "Can I deduct my car?" in await export.text()
        assert (await read(f"/api/sessions/{tax_session}/export?format=md")).status == 404
        assert (await api.client.delete(f"/api/sessions/{tax_session}")).status == 404
        deleted = await api.client.delete(f"/api/sessions/{tax_session}?bot=@TAX_BOT")
        assert deleted.status == 204
        assert await kind.count(database, "consultations", chat_key=chat_keys[taxes.id]) == 0
        assert await kind.count(database, "consultations", chat_key=chat_keys[None]) == 1


@pytest.mark.api_settings(user_daily_consultation_limit=1)
async def test_a_users_quota_under_one_bot_is_not_spent_under_another(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """USER_DAILY_CONSULTATION_LIMIT=1: the userId's one start under the deployment's bot
    leaves its start under a stored bot free; a second start under either is refused 429
    with nothing stored and the model not called."""
    other = await add_bot(api, 333, "other_bot")
    for bot in (0, other.id):
        status, reply = await chat(api, {"message": "Hello", "userId": "u-9", "bot": bot})
        assert status == 200, reply
    for bot in (0, other.id):
        status, refused = await chat(api, {"message": "Again", "userId": "u-9", "bot": bot})
        assert (status, refused["code"]) == (429, "QUOTA_EXCEEDED")
    assert len(model_server.requests) == 2


@pytest.mark.api_settings(user_daily_consultation_limit=1, quota_exempt_user_ids="api1:u-9")
async def test_quota_exempt_user_ids_names_a_stored_bots_api_user_as_api_n_user_id(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """QUOTA_EXEMPT_USER_IDS=api1:u-9 exempts `u-9` under stored bot 1 only: its starts
    there are not limited, its second start under the deployment's bot is refused 429."""
    first = await add_bot(api, 333, "exempting_bot")
    assert first.id == 1
    for _ in range(3):
        status, reply = await chat(api, {"message": "Hello", "userId": "u-9", "bot": first.id})
        assert status == 200, reply
    assert (await chat(api, {"message": "Hello", "userId": "u-9"}))[0] == 200
    status, refused = await chat(api, {"message": "Again", "userId": "u-9"})
    assert (status, refused["code"]) == (429, "QUOTA_EXCEEDED")
    assert len(model_server.requests) == 4


async def test_a_users_memory_under_one_bot_is_not_read_or_forgotten_under_another(
    api: RunningApi,
) -> None:
    """Facts kept for `u-1` of bot n are read and forgotten with `?bot=n` only; the
    deployment's bot's `u-1` keeps its own."""
    other = await add_bot(api, 444, "memo_bot")
    await api.store.add_facts("api:u-1", "api:u-1", ["Own bot's fact"], at=1.0)
    await api.store.add_facts(f"api{other.id}:u-1", f"api{other.id}:u-1", ["Bot fact"], at=1.0)

    async def texts(query: str) -> list[str]:
        response = await api.client.get(f"/api/users/u-1/memory{query}")
        assert response.status == 200
        return [fact["text"] for fact in (await response.json())["facts"]]

    assert await texts("") == ["Own bot's fact"]
    assert await texts(f"?bot={other.id}") == ["Bot fact"]
    assert await texts("?bot=@memo_bot") == ["Bot fact"]
    assert (await api.client.delete(f"/api/users/u-1/memory?bot={other.id}")).status == 204
    assert await texts(f"?bot={other.id}") == []
    assert await texts("") == ["Own bot's fact"]


async def refused_bot(api: RunningApi, bot: Any) -> tuple[int, Any]:
    return await chat(api, {"message": "Hello", "userId": "u-1", "bot": bot})


@pytest.mark.parametrize("which", ["unknown id", "unknown name", "disabled", "removed"])
async def test_a_bot_not_served_is_refused_with_nothing_stored(
    kind: StoreKind, database: str, model_server: FakeModelServer, which: str
) -> None:
    """A bot never stored, disabled or removed is 404 BOT_NOT_FOUND on the chat routes,
    the session and memory routes and the OpenAI-compatible one: no session is stored and
    the model is never called."""
    async with api_on(kind, database, model_server) as api:
        stored = await add_bot(api, 555, "gone_bot")
        if which == "disabled":
            await api.store.bots.update_bot(stored.id, at=time.time(), enabled=False)
        elif which == "removed":
            await api.store.bots.remove_bot(stored.id, at=time.time())
        ref: Any = {"unknown id": stored.id + 7, "unknown name": "@nobody_bot"}.get(
            which, stored.id
        )
        for path in ("/api/chat", "/api/chat/stream"):
            response = await api.client.post(
                path, data=json.dumps({"message": "Hello", "bot": ref}), headers=JSON
            )
            body = await response.json()
            assert (response.status, body["code"]) == (404, "BOT_NOT_FOUND"), path
            assert "sealed-token" not in json.dumps(body)
        query = ref if isinstance(ref, str) else str(ref)
        for method, path in (
            ("GET", f"/api/sessions/{uuid.uuid4()}?bot={query}"),
            ("DELETE", f"/api/sessions/{uuid.uuid4()}?bot={query}"),
            ("GET", f"/api/sessions/{uuid.uuid4()}/export?bot={query}"),
            ("GET", f"/api/users/u-1/memory?bot={query}"),
            ("DELETE", f"/api/users/u-1/memory?bot={query}"),
        ):
            response = await api.client.request(method, path.replace("@", "%40"))
            assert response.status == 404, path
            assert (await response.json())["code"] == "BOT_NOT_FOUND", path
        status, error = await completion(
            api,
            {
                "model": "consultation",
                "messages": [{"role": "user", "content": "Hello"}],
                "metadata": {"bot": str(ref)},
            },
        )
        assert status == 404 and error["error"]["code"] == "bot_not_found"
        assert model_server.requests == []
        assert await kind.count(database, "consultations") == 0


@pytest.mark.parametrize(
    "bot",
    [-1, "-1", "01", "", "@", "@a b", "@" + "a" * 65, "bot7", True, 1.5, [1], {"id": 1},
     2**63, str(2**63), "٣", "1 "],
)  # fmt: skip
async def test_a_bot_named_in_no_form_it_takes_is_a_validation_error(
    api: RunningApi, model_server: FakeModelServer, bot: Any
) -> None:
    """A negative, zero-padded, blank, spaced, non-ASCII, past-64-bit or non-scalar `bot`
    is 400 VALIDATION_ERROR before anything is read or stored."""
    status, body = await refused_bot(api, bot)
    assert (status, body["code"]) == (400, "VALIDATION_ERROR"), body
    assert model_server.requests == []
    assert await count(api.settings.db_path, "SELECT COUNT(*) FROM consultations") == 0


@pytest.mark.parametrize("query", ["bot=abc", "bot=01", "bot=1&bot=2", "bot=-3", "bot=%40"])
async def test_a_session_route_refuses_a_bot_query_in_no_form_it_takes(
    api: RunningApi, query: str
) -> None:
    """`?bot=` on the session and memory routes is read as strictly as the field."""
    for path in (f"/api/sessions/{uuid.uuid4()}", "/api/users/u-1/memory"):
        response = await api.client.get(f"{path}?{query}")
        assert response.status == 400, (path, query)
        assert (await response.json())["code"] == "VALIDATION_ERROR"


async def test_the_openai_endpoint_runs_a_conversation_on_the_bot_metadata_names(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """The same conversation from the same client and `user` with and without
    `metadata.bot` is two consultations; the bot's is sent with its instruction, model and
    rounds."""
    async with api_on(kind, database, model_server) as api:
        taxes = await add_bot(
            api, 666, "desk_bot", instruction=INSTRUCTION, model="model-b", rounds=4
        )
        ask: dict[str, Any] = {
            "model": "consultation",
            "messages": [{"role": "user", "content": "Do I owe VAT?"}],
            "user": "u-1",
        }
        status, own = await completion(api, ask)
        assert status == 200, own
        status, desk = await completion(api, {**ask, "metadata": {"bot": "@desk_bot"}})
        assert status == 200, desk
        mine, theirs = model_server.requests
        assert mine["model"] == "test-model" and INSTRUCTION not in system_prompt(mine)
        assert theirs["model"] == "model-b" and INSTRUCTION in system_prompt(theirs)
        assert await kind.count(database, "consultations") == 2
        own_key = conversation_key(ADDRESS, "u-1", "Do I owe VAT?")
        bot_key = conversation_key(ADDRESS, "u-1", "Do I owe VAT?", taxes.id)
        assert bot_key.startswith(f"api{taxes.id}:oai-") and own_key.startswith("api:oai-")
        assert await kind.count(database, "consultations", chat_key=own_key, max_rounds=3) == 1
        assert await kind.count(database, "consultations", chat_key=bot_key, max_rounds=4) == 1


async def test_metrics_count_each_bots_rounds_under_its_bot_label(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`/metrics` counts the rounds the API answered per bot: "0" for the deployment's own,
    the stored bot's id for it."""
    other = await add_bot(api, 777, "counted_bot")
    assert (await chat(api, {"message": "One"}))[0] == 200
    for _ in range(2):
        assert (await chat(api, {"message": "Two", "bot": other.id}))[0] == 200
    text = await (await api.client.get("/metrics")).text()
    assert 'consult_rounds_answered_total{bot="0",final="true",source="api"} 1.0' in text
    series = f'consult_rounds_answered_total{{bot="{other.id}",final="true",source="api"}} 2.0'
    assert series in text
    assert 'bot="@counted_bot"' not in text and "counted_bot" not in text


OPERATOR = "the-operators-api-token-0123456789abcdef"
DESK_TOKEN = "desk-bot-api-token-0123456789abcdefghij"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_bots_api_token_reaches_its_bot_and_no_other(
    kind: StoreKind,
    database: str,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request bearing bot 1's own API token runs on bot 1 without naming it; naming
    another bot (the deployment's, a stored one, one that does not exist) is 403 with
    nothing stored; another bot's session is out of its reach; its stats are bot 1's
    only, without sales; the token is in no response and no log line."""
    caplog.set_level(logging.DEBUG)
    async with api_on(kind, database, model_server, api_token=OPERATOR) as api:
        desk = await add_bot(api, 111, "desk_bot", instruction=INSTRUCTION, model="model-b")
        other = await add_bot(api, 222, "other_bot")
        await api.store.bots.set_bot_api_token(
            desk.id, api_token_digest(DESK_TOKEN), at=time.time()
        )
        own_status, own = await chat(api, {"message": "Operator's question"}, bearer(OPERATOR))
        assert own_status == 200, own
        status, mine = await chat(api, {"message": "Do I owe VAT?"}, bearer(DESK_TOKEN))
        assert status == 200, mine
        request = model_server.requests[-1]
        assert request["model"] == "model-b" and INSTRUCTION in system_prompt(request)
        assert (
            await kind.count(
                database, "consultations", chat_key=f"api{desk.id}:{mine['sessionId']}"
            )
            == 1
        )
        bodies = [json.dumps(mine)]
        for bot in (0, other.id, "@other_bot", "@nobody_bot", 999):
            status, refused = await chat(api, {"message": "Hi", "bot": bot}, bearer(DESK_TOKEN))
            assert (status, refused["code"]) == (403, "FORBIDDEN"), bot
            bodies.append(json.dumps(refused))
        assert len(model_server.requests) == 2
        assert await kind.count(database, "consultations") == 2
        status, named = await chat(api, {"message": "Hi", "bot": desk.id}, bearer(DESK_TOKEN))
        assert status == 200, named

        get = api.client.get
        theirs = await get(f"/api/sessions/{own['sessionId']}", headers=bearer(DESK_TOKEN))
        assert theirs.status == 404  # the deployment's session is not bot 1's
        sneaking = await get(f"/api/sessions/{own['sessionId']}?bot=0", headers=bearer(DESK_TOKEN))
        assert sneaking.status == 403
        reading = await get(f"/api/sessions/{mine['sessionId']}", headers=bearer(DESK_TOKEN))
        assert reading.status == 200
        memory = await get("/api/users/u-1/memory?bot=0", headers=bearer(DESK_TOKEN))
        assert memory.status == 403
        completion_response = await api.client.post(
            "/v1/chat/completions",
            data=json.dumps(
                {
                    "model": "consultation",
                    "messages": [{"role": "user", "content": "Hi"}],
                    "metadata": {"bot": str(other.id)},
                }
            ),
            headers={**JSON, **bearer(DESK_TOKEN)},
        )
        assert completion_response.status == 403
        assert (await completion_response.json())["error"]["type"] == "permission_error"

        stats = await (await get("/api/stats", headers=bearer(DESK_TOKEN))).json()
        assert stats["today"]["started"] == 2 and "sales" not in stats
        everyone = await (await get("/api/stats", headers=bearer(OPERATOR))).json()
        assert everyone["today"]["started"] == 3
        assert (await get("/api/stats?bot=0", headers=bearer(DESK_TOKEN))).status == 403
        for wrong in ("desk-bot-api-token-wrong", DESK_TOKEN.upper(), ""):
            response = await get("/api/stats", headers=bearer(wrong))
            assert response.status == 401, wrong
            bodies.append(await response.text())
        assert all(DESK_TOKEN not in body and OPERATOR not in body for body in bodies)
        await api.store.bots.update_bot(desk.id, at=time.time(), enabled=False)
    assert DESK_TOKEN not in caplog.text and OPERATOR not in caplog.text


@pytest.mark.api_settings(api_token=OPERATOR)
@pytest.mark.parametrize("how", ["disabled", "token taken away"])
async def test_a_bots_api_token_opens_nothing_once_disabled_or_taken_away(
    api: RunningApi, model_server: FakeModelServer, how: str
) -> None:
    """Once bot 1 is disabled, or its token taken away, its token opens nothing: 401 (the
    API reads the bots table again within 5 s), and nothing is stored."""
    desk = await add_bot(api, 111, "desk_bot")
    await api.store.bots.set_bot_api_token(desk.id, api_token_digest(DESK_TOKEN), at=time.time())
    status, _ = await chat(api, {"message": "Hi"}, bearer(DESK_TOKEN))
    assert status == 200
    if how == "disabled":
        await api.store.bots.update_bot(desk.id, at=time.time(), enabled=False)
    else:
        await api.store.bots.set_bot_api_token(desk.id, None, at=time.time())

    async def refused() -> bool:
        response = await api.client.get("/api/stats", headers=bearer(DESK_TOKEN))
        return response.status == 401

    await until(refused, "the token refused", seconds=10)
    status, body = await chat(api, {"message": "Hi"}, bearer(DESK_TOKEN))
    assert (status, body["code"]) == (401, "UNAUTHORIZED")
    assert len(model_server.requests) == 1


async def test_a_bots_session_chooses_among_the_bots_own_models(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`model` on a bot's session is checked against that bot's `models`: another is 400
    naming the bot's, nothing stored; one of them is sent to the model."""
    picky = await add_bot(api, 888, "picky_bot", models=["model-b", "model-c"])
    status, refused = await chat(api, {"message": "Hi", "bot": picky.id, "model": "test-model"})
    assert (status, refused["code"]) == (400, "VALIDATION_ERROR")
    assert "model-b, model-c" in refused["error"] and model_server.requests == []
    status, reply = await chat(api, {"message": "Hi", "bot": picky.id, "model": "model-c"})
    assert status == 200, reply
    assert model_server.requests[-1]["model"] == "model-c"
    status, reply = await chat(api, {"message": "Hi", "bot": picky.id})
    assert status == 200 and model_server.requests[-1]["model"] == "model-b"


@pytest.mark.api_settings(api_rate_limit_per_minute=0)  # it polls
async def test_a_bot_disabled_while_served_is_refused_within_seconds(api: RunningApi) -> None:
    """A bot served a moment ago and then disabled is BOT_NOT_FOUND within 5 s (the API
    reads the bots table again); enabled again, it is served again."""
    stored = await add_bot(api, 999, "flaky_bot")
    path = f"/api/sessions/{uuid.uuid4()}?bot={stored.id}"

    async def code() -> str:
        return str((await (await api.client.get(path)).json())["code"])

    assert await code() == "SESSION_NOT_FOUND"  # served: the session is what is missing
    await api.store.bots.update_bot(stored.id, at=time.time(), enabled=False)

    async def refused() -> bool:
        return await code() == "BOT_NOT_FOUND"

    await until(refused, "the disabled bot refused", seconds=10)
    await api.store.bots.update_bot(stored.id, at=time.time(), enabled=True)

    async def served_again() -> bool:
        return await code() == "SESSION_NOT_FOUND"

    await until(served_again, "the enabled bot served", seconds=10)
