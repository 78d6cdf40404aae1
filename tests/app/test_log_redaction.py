"""No secret reaches the logs, even at LOG_LEVEL=DEBUG where libraries log URLs and
request parameters; and the storage driver never logs statements (users' messages)."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
from pathlib import Path

import aiohttp

from app.logs import REDACTED, Redactor, secret_settings, secrets_of
from app.settings import load_settings
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.api.test_api_webhook import free_port
from tests.app.test_entrypoint import clean_env

WEBHOOK_SECRET = "hook-Secret_987"
API_TOKEN = "api-token-XYZ-654"
OPENAI_KEY = "sk-test-key-321"


async def test_debug_logs_of_a_running_bot_hold_no_secret(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A webhook bot with the API on, at DEBUG: a Telegram turn, an API call, a stop —
    and not one of the four secrets (nor the token URL-encoded) in the output."""
    port = free_port()
    log = tmp_path / "bot.log"
    env = clean_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=bot_api.base_url,
        WEBHOOK_URL="https://bot.example.com/telegram/webhook",
        WEBHOOK_SECRET=WEBHOOK_SECRET,
        API_ENABLED="true",
        API_TOKEN=API_TOKEN,
        API_PORT=str(port),
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=model_server.base_url,
        LLM_MODEL="test-model",
        DB_PATH=str(tmp_path / "bot.sqlite3"),
        LOG_LEVEL="DEBUG",
    )
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", env=env, cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
        )  # fmt: skip
    try:
        await bot_api.wait_for("setWebhook", timeout=30)  # the server listens before this
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            update = bot_api.text_message(77, "Dear diary, my plans", user_id=77)
            response = await http.post(
                f"{base}/telegram/webhook",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
            )
            assert response.status == 200
            await bot_api.wait_for("sendMessage", timeout=20)
            response = await http.post(
                f"{base}/api/chat",
                json={"message": "Hello"},
                headers={"Authorization": f"Bearer {API_TOKEN}"},
            )
            assert response.status == 200
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 20)
    output = log.read_text()
    assert "DEBUG" in output and "setWebhook" in output  # the libraries did log at DEBUG
    for secret in (TOKEN, TOKEN.replace(":", "%3A"), WEBHOOK_SECRET, API_TOKEN, OPENAI_KEY):
        assert secret not in output, secret
    assert REDACTED in output
    assert " aiosqlite: " not in output


def test_the_redactor_covers_arguments_exceptions_and_stacks() -> None:
    """A secret in %-arguments, in an exception's text and in stack info is replaced;
    secrets too short to tell from ordinary text are left alone."""
    redactor = Redactor(["s3cret-value", None, "abc"])
    logger = logging.getLogger("tests.redaction")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redactor)
    logger.addHandler(handler)
    try:
        logger.warning("calling %s with %r", "https://x/bots3cret-value/getMe", {"k": "abc"})
        try:
            raise RuntimeError("refused: s3cret-value")
        except RuntimeError:
            logger.exception("failed", stack_info=True)
    finally:
        logger.removeHandler(handler)
    assert "s3cret-value" not in stream.getvalue()
    assert stream.getvalue().count(REDACTED) >= 2 and "'abc'" in stream.getvalue()


def test_every_secret_setting_is_redacted() -> None:
    """The secrets come from the settings' types: the transcription key, the console's
    token and the database URL (its password) are kept out of the logs with the others."""
    settings = load_settings(
        telegram_bot_token=TOKEN,
        openai_api_key=OPENAI_KEY,
        transcription_api_key="tr-key-Secret-777",
        admin_token="admin-token-Secret-888",
        database_url="postgresql://bot:pg-Secret-999@127.0.0.1/db",
        _env_file=None,
    )
    secrets = set(secrets_of(settings))
    assert {"tr-key-Secret-777", "admin-token-Secret-888", "pg-Secret-999", OPENAI_KEY} <= secrets
    assert {"telegram_bot_token", "transcription_api_key", "admin_token"} <= set(secret_settings())
