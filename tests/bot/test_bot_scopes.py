"""Two bots on one store keep the same Telegram ids apart: the deployment's own bot (scope
0) and bot 2 (scope 2), each a real PTB Application long-polling its own fake Bot API,
both around one engine and one store (SQLite, then PostgreSQL). The same user writing to
both in private is the same chat id and user id in both; everything kept of them is kept
twice, once per bot."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from app.runtime import open_runtime
from bot.app import build_application
from bot.updates.cluster_state import IN_MEMORY
from core.domain.bots import NewBot
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import RunningBot, ask_private, bot_settings, press, sent, system_prompt
from tests.store_contract import StoreKind
from tests.waiting import until

USER = 501
SECOND = 2
"""The second bot's scope (the bots table's id 2)."""
NOTICE = "I noted a few lasting facts"
HEADING = "What this person told you in earlier consultations"


@contextlib.asynccontextmanager
async def two_bots(
    kind: StoreKind, database: str, model_server: FakeModelServer, **overrides: Any
) -> AsyncIterator[tuple[RunningBot, RunningBot]]:
    """The deployment's bot and bot 2, each polling its own fake Bot API, on one runtime."""
    async with contextlib.AsyncExitStack() as stack:
        apis = []
        for _ in range(2):
            api = FakeBotApi()
            await api.start()
            stack.push_async_callback(api.stop)
            apis.append(api)
        if kind.name == "sqlite":
            settings = bot_settings(Path(database), apis[0], model_server, **overrides)
        else:
            settings = bot_settings(
                Path("unused.sqlite3"), apis[0], model_server, database_url=database, **overrides
            )
        runtime = await stack.enter_async_context(open_runtime(settings))
        shared = dataclasses.replace(IN_MEMORY, round_keyboards=runtime.store)
        running = []
        for api, scope in zip(apis, (0, SECOND), strict=True):
            config = dataclasses.replace(
                settings.bot_config(), api_base_url=api.base_url, scope=scope
            )
            bots = runtime.store.bots.bots if scope == 0 else None  # as `app.serve_bot`
            application = build_application(config, runtime.engine, shared=shared, bots=bots)
            await stack.enter_async_context(application)
            await application.start()
            stack.push_async_callback(application.stop)
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
            stack.push_async_callback(application.updater.stop)
            running.append(RunningBot(application, runtime, api, model_server))
        yield running[0], running[1]


async def test_the_same_person_in_two_bots_keeps_two_of_everything(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """Bot 2's /rounds, /language, consultation, memory, quota count and usage are its own:
    the same user id and chat id in the deployment's bot sees none of them."""
    async with two_bots(kind, database, model_server, memory_enabled=True) as (first, second):
        store = first.runtime.store
        assert await ask_private(second, USER, "/rounds 1") == ["Rounds per consultation: 1."]
        await ask_private(second, USER, "/language", language_code="en")
        menu = sent(second, USER)[-1]
        await press(second, USER, "lang:ru", menu.result["message_id"])  # type: ignore[index]
        model_server.enqueue("Plant them in May.")
        model_server.enqueue("Lives in Riga")
        answer, notice = await ask_private(second, USER, "I live in Riga: tomatoes?", parts=2)
        assert answer.startswith("Plant them in May.") and "Итоговый ответ" in answer
        assert NOTICE not in notice  # told in Russian, the language chosen in bot 2

        async def noted() -> bool:
            return len((await store.load_memory("tg2:501", "tg2:501")).facts) == 1

        await until(noted, "bot 2 noted the fact")

        [usage] = await ask_private(first, USER, "/usage")
        assert "Today: 0 tokens in, 0 out" in usage  # English, and nothing used here yet
        [reply] = await ask_private(first, USER, "Plan my trip")
        assert reply.endswith("Round 1 of 3")  # the deployment's rounds, not bot 2's
        assert HEADING not in system_prompt(model_server.requests[-1])
        assert (await store.load_memory("tg:501", "tg:501")).facts == ()
        assert await first.runtime.engine.languages.of("tg:501") is None
        assert await first.runtime.engine.languages.of("tg2:501") == "ru"
        for person in ("tg:501", "tg2:501"):
            assert await kind.count(database, "consultation_starts", person=person) == 1
            assert await kind.count(database, "usage_daily", scope_key=person) > 0
        assert await kind.count(database, "consultations", chat_key="tg:501") == 1
        assert await kind.count(database, "consultations", chat_key="tg2:501") == 1


async def test_the_same_update_id_in_two_bots_is_two_turns(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """Both fakes number their updates alike, so each bot's first update has the same id:
    both are answered, each stored as its own bot's turn."""
    async with two_bots(kind, database, model_server) as (first, second):
        [one] = await ask_private(first, USER, "First bot, hello")
        [two] = await ask_private(second, USER, "Second bot, hello")
        assert one.startswith("Reply to: First bot") and two.startswith("Reply to: Second bot")
        [update_id] = first.api.pushed_at
        assert list(second.api.pushed_at) == [update_id]
        assert await kind.count(database, "messages", turn_id=f"tg:{update_id}") == 1
        assert await kind.count(database, "messages", turn_id=f"tg2:{update_id}") == 1


async def test_forgetting_bot_two_leaves_the_deployments_bot_untouched(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """forget_bot(2) ends bot 2's consultation and drops its /rounds; the deployment's bot
    goes on with its round 2 as if nothing happened."""
    async with two_bots(kind, database, model_server) as (first, second):
        await ask_private(first, USER, "Plan my trip")
        await ask_private(second, USER, "/rounds 5")
        [started] = await ask_private(second, USER, "Plan my garden")
        assert started.endswith("Round 1 of 5")
        assert await first.runtime.store.forget_bot(SECOND) == 1
        [fresh] = await ask_private(second, USER, "Plan my garden again")
        assert fresh.endswith("Round 1 of 3")  # a new consultation, the default rounds
        [going_on] = await ask_private(first, USER, "To Rome")
        assert going_on.endswith("Round 2 of 3")
        assert "Plan my trip" in str(model_server.requests[-1]["messages"])


async def test_stats_in_bot_two_count_bot_twos_consultations_only(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """An operator's /stats in bot 2 counts bot 2's consultation; in the deployment's bot
    every consultation, as before bots had scopes, then each bot's week: its own, then each
    stored bot's by id (bot 2's the one it keeps); bot 2's lists no bot."""
    async with two_bots(kind, database, model_server, admin_user_ids=str(USER)) as bots:
        first, second = bots
        for telegram_id, username in ((111, "quiet_bot"), (222, "garden_bot")):
            new = NewBot(telegram_id, username, "sealed", "WXYZ")
            await first.runtime.store.bots.add_bot(new, at=time.time())
        await ask_private(first, 600, "Plan my trip")
        await ask_private(second, 601, "Plan my garden")
        [own] = await ask_private(second, USER, "/stats")
        [everyone] = await ask_private(first, USER, "/stats")
        assert own.split("\n\n")[0].count("Consultations: 1 started") == 1
        assert everyone.split("\n\n")[0].count("Consultations: 2 started") == 1
        by_bot = everyone.split("\n\n")[2].splitlines()
        assert by_bot[0] == "By bot, last 7 days:"
        assert [line.split(", $")[0] for line in by_bot[1:]] == [
            "• this bot: 1 started, 0 completed",
            "• #1 @quiet_bot: 0 started, 0 completed",
            "• #2 @garden_bot: 1 started, 0 completed",
        ]
        assert "By bot" not in own
