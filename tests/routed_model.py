"""The evaluator's three model roles, each answered by its own fake model server.

Routing by server keeps each role's script (the bot's questions and answer, the
simulated user's replies, the judge's JSON) in its own FIFO queue and its own
`requests` list, so a test asserts exactly what each role was sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.settings import Settings, load_settings
from evaluation.settings import EvalSettings, ModelRoles, model_roles
from fakes.model_server import FakeModelServer

BOT_MODEL = "bot-model"
USER_MODEL = "user-model"
JUDGE_MODEL = "judge-model"


@dataclass
class RoleServers:
    bot: FakeModelServer
    user: FakeModelServer
    judge: FakeModelServer

    def settings(self, tmp_path: Path) -> Settings:
        """The deployment's settings pointing the bot at its server (no .env read)."""
        return load_settings(
            _env_file=None,
            openai_api_key="test-key",
            openai_base_url=self.bot.base_url,
            llm_model=BOT_MODEL,
            llm_max_retries=0,
            # Rounds in text as most tests script them; `--questions structured` asks for JSON.
            llm_structured_questions="off",
            db_path=tmp_path / "unused.sqlite3",
        )

    def roles(self, tmp_path: Path) -> ModelRoles:
        evals = EvalSettings(
            user_base_url=self.user.base_url,
            user_model=USER_MODEL,
            judge_base_url=self.judge.base_url,
            judge_model=JUDGE_MODEL,
        )
        return model_roles(self.settings(tmp_path), evals)

    def env(self) -> dict[str, str]:
        """The same three roles as environment variables, for the command line."""
        return {
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": self.bot.base_url,
            "LLM_STRUCTURED_QUESTIONS": "off",  # as in settings(): a variant may ask for it
            "LLM_MODEL": BOT_MODEL,
            "LLM_MAX_RETRIES": "0",
            "EVAL_USER_BASE_URL": self.user.base_url,
            "EVAL_USER_MODEL": USER_MODEL,
            "EVAL_JUDGE_BASE_URL": self.judge.base_url,
            "EVAL_JUDGE_MODEL": JUDGE_MODEL,
        }


@contextlib.asynccontextmanager
async def role_servers() -> AsyncIterator[RoleServers]:
    servers = RoleServers(FakeModelServer(), FakeModelServer(), FakeModelServer())
    started: list[FakeModelServer] = []
    try:
        for server in (servers.bot, servers.user, servers.judge):
            await server.start()
            started.append(server)
        yield servers
    finally:
        for server in reversed(started):
            await server.stop()
