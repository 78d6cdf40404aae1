"""The fleet (`app.bot_fleet`): the deployment's bot and the stored bots, each a real PTB
Application polling one fake Bot API that serves every token, all on one runtime; the bots
table is followed as the bot process follows it (`Fleet.run`). On PostgreSQL the stored
bots go through the shared inbox and a polling leader each, as on the workers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from app.bot_fleet import Fleet
from app.bot_secrets import TokenBox, tail_of
from app.runtime import Runtime, open_runtime
from app.settings import Settings
from bot.app import build_application
from bot.transport.menus import commands_in
from bot.updates.cluster_state import IN_MEMORY
from core.domain.bots import BotProfile, NewBot, StoredBot, parse_profile
from fakes.bot_api import TOKEN, Call, FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.languages import LANGUAGES
from tests.bot_harness import bot_settings, system_prompt
from tests.store_contract import StoreKind
from tests.waiting import until

SECRET = "fleet-test-secret-key-0123456789"
FIRST = "111:FIRST-BOT-TOKEN"
SECOND = "222:SECOND-BOT-TOKEN"
TOKENS = {TOKEN: (123456, "consult_bot"), FIRST: (111, "first_bot"), SECOND: (222, "second_bot")}
USER = 501
INSTRUCTION = "You are the tax desk of Acme. Answer about taxes only."


def replied(call: Call, token: str, chat_id: int) -> bool:
    """A sendMessage of `token`'s bot that Telegram took, to `chat_id`."""
    return (
        call.method == "sendMessage"
        and call.token == token
        and call.result is not None
        and call.params.get("chat_id") == chat_id
    )


@dataclasses.dataclass
class Deployment:
    """The running bot process: its runtime, its own bot's Application and the fleet."""

    runtime: Runtime
    api: FakeBotApi
    fleet: Fleet

    async def add(self, token: str, profile: BotProfile) -> StoredBot:
        """Store a bot as `bots add` does (its token sealed under SECRET_KEY)."""
        username = TOKENS[token][1]
        sealed = TokenBox(SECRET).seal(token)
        new = NewBot(TOKENS[token][0], username, sealed, tail_of(token), "", profile)
        return await self.runtime.store.bots.add_bot(new, at=time.time())

    async def ask(self, token: str, text: str, chat_id: int = USER) -> str:
        """Send `text` to `token`'s bot in a private chat; its next reply there."""
        before = len([c for c in self.api.calls if replied(c, token, chat_id)])
        self.api.push_update(self.api.text_message(chat_id, text, user_id=chat_id), token=token)
        call = await self.api.wait_for(lambda c: replied(c, token, chat_id), 10, count=before + 1)
        return str(call.params["text"])


def fleet_settings(
    kind: StoreKind, database: str, api: FakeBotApi, model: FakeModelServer
) -> Settings:
    overrides: dict[str, Any] = {"secret_key": SECRET, "llm_models": "test-model,model-b"}
    if kind.name == "sqlite":
        return bot_settings(Path(database), api, model, **overrides)
    return bot_settings(Path("unused.sqlite3"), api, model, database_url=database, **overrides)


@contextlib.asynccontextmanager
async def deployment(settings: Settings, api: FakeBotApi) -> AsyncIterator[Deployment]:
    """The bot process on `settings`: its own bot polling, the fleet following the table
    (with DATABASE_URL, through the shared inbox)."""
    async with contextlib.AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(open_runtime(settings, inbox=True))
        shared = dataclasses.replace(IN_MEMORY, round_keyboards=runtime.store)
        application = build_application(settings.bot_config(), runtime.engine, shared=shared)
        await stack.enter_async_context(application)
        await application.start()
        stack.push_async_callback(application.stop)
        assert application.updater is not None
        await application.updater.start_polling(poll_interval=0, timeout=1)
        stack.push_async_callback(application.updater.stop)
        fleet = Fleet(runtime, poll_timeout=1, watch_seconds=0.2)
        stack.push_async_callback(fleet.close)
        watching = asyncio.create_task(fleet.run())

        async def stop_watching() -> None:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching

        stack.push_async_callback(stop_watching)
        yield Deployment(runtime, api, fleet)


@contextlib.asynccontextmanager
async def fakes() -> AsyncIterator[FakeBotApi]:
    api = FakeBotApi(tokens=TOKENS)
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


async def running(process: Deployment, *scopes: int) -> None:
    await until(lambda: set(process.fleet.running) == set(scopes), f"bots {scopes} running")


async def test_each_bot_asks_the_model_with_its_own_instruction_role_model_and_rounds(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """The same chat id in three bots is three consultations, each sent with its bot's
    system prompt, model and rounds; what a bot does not set is the deployment's."""
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            taxes = await process.add(
                FIRST, parse_profile({"instruction": INSTRUCTION, "model": "model-b", "rounds": 5})
            )
            law = await process.add(SECOND, parse_profile({"role": "lawyer"}))
            await running(process, taxes.id, law.id)

            own = await process.ask(TOKEN, "Plan my trip")
            assert own.endswith("Round 1 of 3")
            mine = model_server.requests[-1]
            assert mine["model"] == "test-model" and INSTRUCTION not in system_prompt(mine)

            tax = await process.ask(FIRST, "Do I owe VAT?")
            assert tax.endswith("Round 1 of 5")
            request = model_server.requests[-1]
            assert request["model"] == "model-b" and INSTRUCTION in system_prompt(request)

            lawyer = await process.ask(SECOND, "Can I break my lease?")
            assert lawyer.endswith("Round 1 of 3")
            request = model_server.requests[-1]
            lawyer_text = process.runtime.prompts.role_text("lawyer")
            assert request["model"] == "test-model" and lawyer_text in system_prompt(request)
            assert lawyer_text not in system_prompt(mine)

            going_on = await process.ask(TOKEN, "To Rome")
            assert going_on.endswith("Round 2 of 3")  # its own conversation, not the others'
            assert "Do I owe VAT" not in str(model_server.requests[-1]["messages"])
        for chat_key in ("tg:501", f"tg{taxes.id}:501", f"tg{law.id}:501"):
            assert await kind.count(database, "consultations", chat_key=chat_key) == 1


async def test_a_bot_added_while_running_answers_and_a_disabled_one_stops(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """A bot stored while the process runs starts polling and answers; disabled, its
    Application stops and fetches nothing more; changed, it answers with its new settings."""
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            bot = await process.add(FIRST, BotProfile())
            reply = await process.ask(FIRST, "Hello there")  # within the wait: 10 s
            assert reply.startswith("Reply to: Hello there")

            store = process.runtime.store.bots
            await store.update_bot(bot.id, at=time.time(), profile=parse_profile({"rounds": 7}))
            await until(
                lambda: (
                    process.fleet.running.get(bot.id) is not None
                    and process.fleet.running[bot.id].plan.engine.default_max_rounds == 7
                ),
                "the changed bot restarted",
            )
            assert (await process.ask(FIRST, "/reset")).strip()
            assert (await process.ask(FIRST, "New question")).endswith("Round 1 of 7")

            await store.update_bot(bot.id, at=time.time(), enabled=False)
            await running(process)
            assert process.runtime.loops.problems() == {}  # its loops went with it
            seen = len(api.calls)
            api.push_update(api.text_message(USER, "Anyone there?", user_id=USER), token=FIRST)
            await process.fleet.sync()  # another reading of the table: still disabled
            assert (await process.ask(TOKEN, "And the first bot?")).startswith("Reply to")
            assert not [c for c in api.calls[seen:] if c.token == FIRST]


async def test_one_bot_held_by_flood_control_never_holds_another(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """Telegram's RetryAfter for one bot's sendMessage pauses that bot's reply only: the
    other bot answers the same chat id meanwhile, and the held reply follows later."""
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            first = await process.add(FIRST, BotProfile())
            second = await process.add(SECOND, BotProfile())
            await running(process, first.id, second.id)
            api.fail_next(
                "sendMessage",
                status=429,
                description="Too Many Requests",
                retry_after=3,
                token=FIRST,
            )
            api.push_update(api.text_message(USER, "Held?", user_id=USER), token=FIRST)
            await api.wait_for(lambda c: c.token == FIRST and c.status == 429, 10)
            assert (await process.ask(SECOND, "Free?")).startswith("Reply to: Free?")
            assert not [c for c in api.calls if replied(c, FIRST, USER)]  # still waiting
            await api.wait_for(lambda c: replied(c, FIRST, USER), 10)


async def test_a_restart_keeps_every_bot_and_its_conversations(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """After the process stops and starts again, every enabled stored bot polls again and
    each conversation goes on where it was."""
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            first = await process.add(FIRST, BotProfile())
            second = await process.add(SECOND, parse_profile({"rounds": 4}))
            await running(process, first.id, second.id)
            assert (await process.ask(FIRST, "Plan my trip")).endswith("Round 1 of 3")
            assert (await process.ask(SECOND, "Plan my garden")).endswith("Round 1 of 4")
        async with deployment(settings, api) as process:
            await running(process, first.id, second.id)
            assert (await process.ask(FIRST, "To Rome")).endswith("Round 2 of 3")
            assert (await process.ask(SECOND, "Tomatoes")).endswith("Round 2 of 4")


async def test_a_bots_language_replaces_the_one_the_client_names(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """A bot whose profile sets German speaks German to a user whose client is English;
    the deployment's bot, to the same user, English; /language still overrides it."""
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            german = await process.add(FIRST, parse_profile({"language": "de"}))
            await running(process, german.id)
            assert await process.ask(FIRST, "/rounds 2") == "Runden pro Beratung: 2."
            assert await process.ask(TOKEN, "/rounds 2") == "Rounds per consultation: 2."
            languages = process.fleet.running[german.id].engine.languages  # as /language does
            await languages.choose(f"tg{german.id}:{USER}", "fr")
            assert (await process.ask(FIRST, "/rounds 2")).startswith("Tours par consultation")


def menus_of(api: FakeBotApi, token: str, since: int = 0) -> dict[tuple[str, str], list[str]]:
    """The command menus `token`'s bot set after call `since`, the last of each scope and
    `language_code` ("": the default): each command's description, in order."""
    menus = {}
    for call in api.calls[since:]:
        if call.token == token and call.method == "setMyCommands":
            scope = call.params["scope"]["type"]  # the fake decodes JSON values
            commands = call.params["commands"]
            key = (scope, str(call.params.get("language_code", "")))
            menus[key] = [f"/{c['command']} {c['description']}" for c in commands]
    return menus


async def test_a_bots_language_describes_every_menu_it_sets(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """A stored bot whose profile sets German describes its commands in German in the
    default menus and in every client language's, private chats and groups; changed to
    French, every menu is set again in French, none left in German; a bot without a
    language keeps one menu per client language."""
    german, french, english = (commands_in(code) for code in ("de", "fr", "en"))
    assert german != english and french != german
    menus = len(LANGUAGES) * 2  # every language_code (the default for English), two scopes
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            bot = await process.add(FIRST, parse_profile({"language": "de"}))
            plain = await process.add(SECOND, parse_profile({}))
            await running(process, bot.id, plain.id)
            described = {
                key: [f"/{c.command} {c.description}" for c in german]
                for key in menus_of(api, FIRST)
            }
            assert len(described) == menus
            assert menus_of(api, FIRST) == described
            assert ("all_private_chats", "") in described and ("all_group_chats", "ru") in described
            assert menus_of(api, SECOND)[("all_private_chats", "")][0].startswith(
                f"/{english[0].command} {english[0].description}"
            )
            ru = commands_in("ru")[0]
            assert menus_of(api, SECOND)[("all_group_chats", "ru")][0] == (
                f"/{ru.command} {ru.description}"
            )

            since = len(api.calls)
            store = process.runtime.store.bots
            await store.update_bot(
                bot.id, at=time.time(), profile=parse_profile({"language": "fr"})
            )
            await until(lambda: len(menus_of(api, FIRST, since)) == menus, "the menus set again")
            again = menus_of(api, FIRST, since)
            assert {tuple(v) for v in again.values()} == {
                tuple(f"/{c.command} {c.description}" for c in french)
            }
            assert (await process.ask(FIRST, "/rounds 2")).startswith("Tours par consultation")


MANY = {f"{900 + n}:MANY-BOT-TOKEN": (900 + n, f"many_bot_{n}") for n in range(8)}


async def test_many_bots_added_at_once_start_side_by_side(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """Eight bots added at once, with Telegram taking 80 ms a menu call (26 a bot): all run
    within 8 s, where one after the other would take 17 s, and each answers."""
    api = FakeBotApi(tokens={**TOKENS, **MANY})
    api.latency = {"setMyCommands": 0.08}
    await api.start()
    try:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            store = process.runtime.store.bots
            added = []
            for token, (telegram_id, username) in MANY.items():
                sealed = TokenBox(SECRET).seal(token)
                new = NewBot(telegram_id, username, sealed, tail_of(token), "", BotProfile())
                added.append(await store.add_bot(new, at=time.time()))
            began = time.monotonic()
            scopes = {bot.id for bot in added}
            await until(lambda: set(process.fleet.running) == scopes, "every bot running")
            assert time.monotonic() - began < 8.0
            for token in MANY:
                assert (await process.ask(token, "/rounds 2")).startswith("Rounds per")
    finally:
        await api.stop()


WEBHOOK_SECRET = "main-webhook-secret"


async def test_each_bot_takes_webhooks_at_its_own_path_with_its_own_secret(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """With WEBHOOK_URL each stored bot sets its webhook at `/telegram/<id>` with a secret
    of its own; an update posted there reaches that bot only; another bot's secret, none,
    or a path naming no running bot is refused; disabled, its webhook is deleted."""
    from aiohttp.test_utils import TestClient, TestServer

    from api.app import build_web_app
    from app.bot_fleet import bot_webhook_secret
    from i18n.document_labels import DOCUMENT_LANGUAGES

    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server).model_copy(
            update={"webhook_url": "https://bot.example.com/telegram/webhook"}
        )
        settings = settings.model_copy(update={"webhook_secret": SecretStr(WEBHOOK_SECRET)})
        async with contextlib.AsyncExitStack() as stack:
            runtime = await stack.enter_async_context(open_runtime(settings, inbox=True))
            fleet = Fleet(runtime, poll_timeout=1, watch_seconds=0.2)
            stack.push_async_callback(fleet.close)
            web_app = build_web_app(
                settings.api_config(),
                runtime.engine,
                document_languages=DOCUMENT_LANGUAGES,
                store=runtime.store,
                mounts=[fleet.webhooks()],
            )
            client = await stack.enter_async_context(TestClient(TestServer(web_app)))
            process = Deployment(runtime, api, fleet)
            first = await process.add(FIRST, BotProfile())
            second = await process.add(SECOND, BotProfile())
            await fleet.sync()
            assert set(fleet.running) == {first.id, second.id}
            [hook] = [c for c in api.calls_of("setWebhook") if c.token == FIRST]
            assert hook.params["url"] == f"https://bot.example.com/telegram/{first.id}"
            secret = bot_webhook_secret(WEBHOOK_SECRET, first.id)
            assert hook.params["secret_token"] == secret
            assert secret != bot_webhook_secret(WEBHOOK_SECRET, second.id)

            update = api.text_message(USER, "Through the webhook", user_id=USER)
            header = {"X-Telegram-Bot-Api-Secret-Token": secret}
            for path, headers, status in (
                (f"/telegram/{second.id}", header, 403),  # bot 1's secret on bot 2's path
                (f"/telegram/{first.id}", {}, 401),
                (f"/telegram/{first.id}", {"X-Telegram-Bot-Api-Secret-Token": "forged"}, 403),
                ("/telegram/99", header, 404),
                ("/telegram/0", header, 404),
                ("/telegram/" + "9" * 40, header, 404),
                (f"/telegram/{first.id}x", header, 404),
                (f"/telegram/{first.id}", header, 200),
            ):
                response = await client.post(path, json=update, headers=headers)
                assert response.status == status, (path, await response.text())
            call = await api.wait_for(lambda c: replied(c, FIRST, USER), 10)
            assert str(call.params["text"]).startswith("Reply to: Through the webhook")
            assert not [c for c in api.calls if c.token == SECOND and c.method == "sendMessage"]

            await runtime.store.bots.update_bot(first.id, at=time.time(), enabled=False)
            await fleet.sync()
            assert [c for c in api.calls_of("deleteWebhook") if c.token == FIRST]
            response = await client.post(f"/telegram/{first.id}", json=update, headers=header)
            assert response.status == 404


async def test_a_bot_telegram_refuses_is_logged_once_and_never_stops_the_others(
    kind: StoreKind, database: str, model_server: FakeModelServer, caplog: Any
) -> None:
    """A stored bot whose token Telegram refuses (revoked) does not start: one WARNING
    naming it, not its token, tried again at each reading; the other bot answers."""
    revoked = "333:REVOKED-BOT-TOKEN"
    async with fakes() as api:
        settings = fleet_settings(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            sealed = TokenBox(SECRET).seal(revoked)
            gone = await process.runtime.store.bots.add_bot(
                NewBot(333, "revoked_bot", sealed, tail_of(revoked)), at=time.time()
            )
            working = await process.add(FIRST, BotProfile())
            await running(process, working.id)
            assert (await process.ask(FIRST, "Still there?")).startswith("Reply to")
            await until(
                lambda: len([c for c in api.calls if c.token == revoked]) >= 2,
                "the revoked bot tried again",
            )
            assert gone.id not in process.fleet.running
    warnings = [r.getMessage() for r in caplog.records if "cannot start" in r.getMessage()]
    assert len(warnings) == 1 and f"bot #{gone.id} @revoked_bot" in warnings[0]
    assert "REVOKED-BOT" not in caplog.text
