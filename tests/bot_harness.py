"""The Telegram edge under test: a running bot and the helpers that talk to it.

The real PTB Application long-polls the fake Bot API, the real openai SDK talks to the
fake model server, and the store is a real SQLite file. Every helper waits on the fake
Bot API's recorded calls (never on sleeps); "sent" always means a sendMessage the fake
accepted (status 200), in the order received.

Private chats: `ask_private` sends a message and returns the texts of the replies.
Groups: `post_in_group` sends a member's message (mentioning the bot by default) and
returns the message dict; `group_answer` waits for a finished answer (recognised by its
footer, "Round k of N" / "Final answer", whether sent new or as the final edit of a
progress message: exactly one successful call carries it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram.ext import Application

from app.bot_edge import operator_knowledge
from app.runtime import Runtime, open_runtime
from app.settings import Settings, load_settings
from bot.app import build_application
from bot.transport.config import BotConfig
from bot.updates.cluster_state import IN_MEMORY, SharedState
from core.domain.knowledge import KnowledgeSearch
from core.primitives.intake_gate import IntakeGate
from fakes.bot_api import TOKEN, Call, FakeBotApi
from fakes.model_server import FakeModelServer

# -- starting a bot ------------------------------------------------------------------------


def bot_settings(
    db_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "telegram_bot_token": TOKEN,
        "telegram_api_base_url": bot_api.base_url,
        "openai_api_key": "test-key",
        "openai_base_url": model_server.base_url,
        "llm_model": "test-model",
        "db_path": db_path,
        "llm_max_retries": 1,
        "llm_timeout_seconds": 10,
        "user_rate_limit_per_minute": 0,
        "llm_structured_questions": "off",  # structured rounds have tests of their own
        "memory_enabled": False,  # client memory has tests of its own
        "_env_file": None,
    }
    values.update(overrides)
    return load_settings(**values)


@dataclass
class RunningBot:
    application: Application  # type: ignore[type-arg]
    runtime: Runtime
    api: FakeBotApi
    model: FakeModelServer

    async def send(self, chat_id: int, text: str | None, **kwargs: Any) -> dict[str, Any]:
        """Push a user's message as an update; returns the message dict."""
        kwargs.setdefault("user_id", chat_id if chat_id > 0 else 1)
        update = self.api.text_message(chat_id, text, **kwargs)
        self.api.push_update(update)
        return update["message"]

    async def replies(self, chat_id: int, count: int = 1, timeout: float = 10.0) -> list[str]:  # noqa: ASYNC109
        """Wait until the chat has received `count` sendMessage calls; return all their texts."""
        await self.api.wait_for(
            lambda c: c.method == "sendMessage" and str(c.params.get("chat_id")) == str(chat_id),
            timeout,
            count=count,
        )
        return self.messages(chat_id)

    def messages(self, chat_id: int) -> list[str]:
        return [
            c.params["text"]
            for c in self.api.calls_of("sendMessage")
            if str(c.params.get("chat_id")) == str(chat_id) and c.status == 200
        ]


@contextlib.asynccontextmanager
async def running_bot(
    settings: Settings,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    *,
    config: BotConfig | None = None,
    shared: SharedState = IN_MEMORY,
    clock: Callable[[], float] = time.time,
    knowledge: KnowledgeSearch | None = None,
    turn_intake: IntakeGate | None = None,
) -> AsyncIterator[RunningBot]:
    """A bot polling the fake; `config` replaces the one `settings` gives (tunables),
    `shared` the state kept in memory (limits shared on PostgreSQL, say), `clock` the
    engine's, `knowledge` the knowledge base its consultations read, `turn_intake` the
    process's intake gate (the runtime's, TURN_INTAKE_SLOTS, unless given)."""
    async with open_runtime(settings, clock=clock, knowledge=knowledge) as runtime:
        if shared.round_keyboards is None:  # kept in the store, as `app.serve_bot` keeps them
            shared = dataclasses.replace(shared, round_keyboards=runtime.store)
        application = build_application(
            config or settings.bot_config(),
            runtime.engine,
            intake=runtime.intake,
            shared=shared,
            knowledge=operator_knowledge(runtime),
            sales=runtime.sales,
            stars=runtime.stars,
            turn_intake=turn_intake or runtime.turn_intake,
        )
        async with application:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
            try:
                yield RunningBot(application, runtime, bot_api, model_server)
            finally:
                await application.updater.stop()
                await application.stop()


@contextlib.asynccontextmanager
async def started_bot(
    db_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    *,
    group_progress_interval: float | None = None,
    **overrides: Any,
) -> AsyncIterator[RunningBot]:
    """A running bot on `db_path` with settings `overrides` (and, given, the seconds
    between progress edits in groups: 3 s in production)."""
    settings = bot_settings(db_path, bot_api, model_server, **overrides)
    config = settings.bot_config()
    if group_progress_interval is not None:
        config = dataclasses.replace(config, group_progress_interval=group_progress_interval)
    async with running_bot(settings, bot_api, model_server, config=config) as running:
        yield running


class FirstCallOnly(dict[str, float]):
    """Latencies for `FakeBotApi.latency` applied once per method: only the first call stalls."""

    def get(self, key: str, default: float | None = None) -> float | None:  # type: ignore[override]
        return self.pop(key, default)


# -- private chats -------------------------------------------------------------------------


def delivered(call: Call, chat_id: int) -> bool:
    """A sendMessage to the chat that the fake has answered with a message.

    `result` is set only once a call is answered; `status` reads 200 while it is in flight.
    """
    return (
        call.method == "sendMessage"
        and call.result is not None
        and str(call.params.get("chat_id")) == str(chat_id)
    )


def sent(bot: RunningBot, chat_id: int) -> list[Call]:
    """Delivered sendMessage calls to the chat, in order."""
    return [c for c in bot.api.calls if delivered(c, chat_id)]


async def wait_sent(bot: RunningBot, chat_id: int, count: int, timeout: float = 10.0) -> list[str]:  # noqa: ASYNC109
    """Wait until `count` messages in total were delivered to the chat; return all texts."""
    await bot.api.wait_for(lambda c: delivered(c, chat_id), timeout, count=count)
    return [c.params["text"] for c in sent(bot, chat_id)]


async def ask_private(
    bot: RunningBot, chat_id: int, text: str | None, *, parts: int = 1, **kwargs: Any
) -> list[str]:
    """Send a message in a private chat and wait for `parts` more messages to it; return
    their texts."""
    before = len(sent(bot, chat_id))
    await bot.send(chat_id, text, **kwargs)
    texts = await wait_sent(bot, chat_id, before + parts)
    return texts[before:]


async def press(bot: RunningBot, chat_id: int, data: str, message_id: int) -> str:
    """Press an inline button under `message_id`; return the bot's next message."""
    before = len(sent(bot, chat_id))
    bot.api.push_update(bot.api.callback_query(chat_id, chat_id, data, message_id))
    texts = await wait_sent(bot, chat_id, before + 1)
    return texts[before]


def buttons(call: Call) -> list[str]:
    """callback_data of every inline button of a sent message."""
    markup = call.params.get("reply_markup") or {}
    return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row]


def button_kinds(call: Call) -> list[str]:
    """The kind of every inline button of a sent message (its data before ":"): "qf" for a
    round's "Give the final answer now", which names its round after it."""
    return [data.partition(":")[0] for data in buttons(call)]


def final_buttons(call: Call) -> bool:
    """The message carries exactly a final answer's buttons: a follow-up, its document."""
    kinds = [data.partition(":")[0] for data in buttons(call)]
    return kinds == ["fu", "ex"]


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def conversation(request: dict[str, Any]) -> list[str]:
    """Contents of the non-system messages the model was sent."""
    return [m["content"] for m in request["messages"] if m["role"] != "system"]


# -- groups --------------------------------------------------------------------------------

GROUP = -1001234
ALICE, BOB, CAROL = 11, 12, 13
FOOTERS = ("Round ", "Final answer")
NOT_ADMIN = "Only group admins"


def mention(text: str, name: str = "@consult_bot") -> list[dict[str, Any]]:
    """The `mention` entity Telegram attaches to `name` inside `text` (ASCII texts only)."""
    return [{"type": "mention", "offset": text.index(name), "length": len(name)}]


def in_chat(call: Call, chat_id: int) -> bool:
    return call.status == 200 and call.params.get("chat_id") == chat_id


async def post_in_group(
    bot: RunningBot,
    text: str,
    *,
    user: int = ALICE,
    name: str = "Alice",
    chat: int = GROUP,
    addressed: str | None = "@consult_bot",
    **kwargs: Any,
) -> dict[str, Any]:
    """A member's message in a group, mentioning the bot unless `addressed` is None;
    returns the message dict at once (wait with `group_answer` or `group_said`)."""
    kwargs.setdefault("chat_type", "supergroup")
    entities = mention(text, addressed) if addressed and addressed in text else None
    return await bot.send(chat, text, user_id=user, first_name=name, entities=entities, **kwargs)


async def group_answer(bot: RunningBot, count: int, chat: int = GROUP, timeout: float = 10) -> Call:  # noqa: ASYNC109
    """Wait for the `count`-th finished answer in the chat (a send or edit carrying a footer)."""
    return await bot.api.wait_for(
        lambda c: (
            c.method in ("sendMessage", "editMessageText")
            and in_chat(c, chat)
            and any(f in c.params["text"] for f in FOOTERS)
        ),
        timeout,
        count=count,
    )


async def group_said(bot: RunningBot, fragment: str, count: int = 1, chat: int = GROUP) -> Call:
    """Wait for the `count`-th sendMessage to the chat containing `fragment`."""
    return await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and in_chat(c, chat) and fragment in c.params["text"],
        count=count,
    )


def group_texts(bot: RunningBot, chat: int = GROUP) -> list[str]:
    """Texts of the bot's sendMessage calls the fake accepted in the group."""
    return [c.params["text"] for c in bot.api.calls_of("sendMessage") if in_chat(c, chat)]
