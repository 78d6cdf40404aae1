"""A running bot for end-to-end tests: the real PTB Application, long polling against the
fake Bot API, the real openai SDK against the fake model server, a real SQLite file."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram.ext import Application

from app.runtime import Runtime, open_runtime
from app.settings import Settings, load_settings
from bot.app import build_application
from bot.handlers import Handlers
from bot.turns import TurnRunner
from tests.fakes.bot_api import TOKEN, FakeBotApi
from tests.fakes.model_server import FakeModelServer


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

    @property
    def handlers(self) -> Handlers:
        """The bot's `Handlers` (their allow-list gate is the one handler of group -1)."""
        [gate] = self.application.handlers[-1]
        handlers = gate.callback.__self__  # type: ignore[attr-defined]
        assert isinstance(handlers, Handlers)
        return handlers

    def set_group_interval(self, seconds: float) -> None:
        """Space group progress edits at least `seconds` apart (3 s in production)."""
        ttl_minutes = max(round(self.runtime.settings.session_ttl_seconds / 60), 1)
        self.handlers.turns = TurnRunner(ttl_minutes=ttl_minutes, group_interval=seconds)

    def messages(self, chat_id: int) -> list[str]:
        return [
            c.params["text"]
            for c in self.api.calls_of("sendMessage")
            if str(c.params.get("chat_id")) == str(chat_id) and c.status == 200
        ]


@contextlib.asynccontextmanager
async def running_bot(
    settings: Settings, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningBot]:
    async with open_runtime(settings) as runtime:
        application = build_application(settings.bot_config(), runtime.service)
        async with application:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
            try:
                yield RunningBot(application, runtime, bot_api, model_server)
            finally:
                await application.updater.stop()
                await application.stop()


class FirstCallOnly(dict[str, float]):
    """Latencies for `FakeBotApi.latency` applied once per method: only the first call stalls."""

    def get(self, key: str, default: float | None = None) -> float | None:  # type: ignore[override]
        return self.pop(key, default)
