"""`python -m bot` as a real process: configuration errors, a clean stop on SIGTERM, and no
message lost when the process is killed mid-answer.

The process gets a clean environment and a temporary working directory, so no `.env` and
no developer settings leak in; it talks to the fake Bot API and model server of the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.languages import LANGUAGES, SOURCE, menu_code

USER = 501


def clean_env(home: Path, **values: str) -> dict[str, str]:
    """Only PATH and HOME from the outside world, plus the given settings."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **values}


def fakes_env(
    home: Path, bot_api: FakeBotApi, model_server: FakeModelServer, **values: str
) -> dict[str, str]:
    """`clean_env` for a bot talking to the test's fake Bot API and model server (no SDK
    retries), plus the given settings (which win)."""
    fakes = {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": bot_api.base_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": model_server.base_url,
        "LLM_MODEL": "test-model",
        "LLM_MAX_RETRIES": "0",
        "LLM_STRUCTURED_QUESTIONS": "off",  # structured rounds have tests of their own
        "MEMORY_ENABLED": "false",  # client memory has tests of its own
    }
    return clean_env(home, **(fakes | values))


def run_bot_sync(tmp_path: Path, **values: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot"],
        env=clean_env(tmp_path, **values),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({}, "TELEGRAM_BOT_TOKEN"),
        ({"TELEGRAM_BOT_TOKEN": TOKEN}, "OPENAI_API_KEY"),
        (
            {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "k", "DEFAULT_MAX_ROUNDS": "abc"},
            "DEFAULT_MAX_ROUNDS",
        ),
        (
            {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "k", "WEBHOOK_URL": "https://x/hook"},
            "WEBHOOK_SECRET",
        ),
    ],
)
def test_configuration_errors_exit_2_with_one_line(
    tmp_path: Path, values: dict[str, str], named: str
) -> None:
    """A missing or invalid setting ends the process with code 2 and one line naming it."""
    done = run_bot_sync(tmp_path, **values)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@dataclass
class BotProcess:
    """A `python -m bot` child process with its stderr in a file."""

    process: asyncio.subprocess.Process
    log: Path

    @classmethod
    async def launch(
        cls, env: dict[str, str], log: Path, cwd: Path, module: str = "bot"
    ) -> BotProcess:
        """Start `python -m <module>` in `cwd` with exactly `env`, its output into `log`."""
        with log.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
            )
        return cls(process, log)

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig`; return the exit code."""
        self.process.send_signal(sig)
        return await self.exited()

    async def exited(self, timeout: float = 30) -> int:  # noqa: ASYNC109
        """The exit code. A process still running after `timeout` hangs: the test fails."""
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"still running after {timeout:g} s:\n{self.log.read_text()}"
            ) from None

    async def logged(self, fragment: str, timeout: float = 30) -> None:  # noqa: ASYNC109
        """Wait until the process's log contains `fragment` (the file is read every 20 ms)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while fragment not in self.log.read_text():
            if self.process.returncode is not None or loop.time() > deadline:
                raise AssertionError(f"{fragment!r} never logged:\n{self.log.read_text()}")
            await asyncio.sleep(0.02)

    async def asked(self, model_server: FakeModelServer, count: int = 1) -> None:
        """Wait until the model has received `count` requests in all."""
        try:
            await model_server.wait_requests(count, timeout=30)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; the bot's log:\n{self.log.read_text()}") from None


StartBot = Callable[[], Awaitable[BotProcess]]


@pytest.fixture
async def start_bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[StartBot]:
    """Start `python -m bot` against the fakes, on one database file; kill leftovers at the end."""
    started: list[BotProcess] = []
    env = fakes_env(tmp_path, bot_api, model_server, DB_PATH=str(tmp_path / "bot.sqlite3"))

    async def start() -> BotProcess:
        started.append(await BotProcess.launch(env, tmp_path / f"bot{len(started)}.log", tmp_path))
        return started[-1]

    yield start
    for bot in started:
        if bot.process.returncode is None:
            bot.process.kill()
            await bot.process.wait()


async def answered(bot_api: FakeBotApi, fragment: str, timeout: float = 20) -> str:  # noqa: ASYNC109
    """Wait for a message to the user containing `fragment`; return its text."""
    call = await bot_api.wait_for(
        lambda c: (
            c.method == "sendMessage"
            and c.status == 200
            and c.params.get("chat_id") == USER
            and fragment in c.params["text"]
        ),
        timeout,
    )
    return str(call.params["text"])


async def test_runs_stops_on_sigterm_and_resumes_after_restart(
    start_bot: StartBot, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The process answers, sets its command menus, exits 0 soon after SIGTERM, and a
    restart on the same database continues the consultation at round 2."""
    first = await start_bot()
    bot_api.push_update(bot_api.text_message(USER, "Help me pick weights", user_id=USER))
    text = await answered(bot_api, "Round 1 of 3")
    assert text.startswith("Reply to: Help me pick weights")
    code = await first.stop()  # it exits soon: `stop` fails the test on a hang
    assert code == 0, first.log.read_text()
    assert "Traceback" not in first.log.read_text()
    menus = {(json.loads(k)[0]["type"], json.loads(k)[1]) for k in bot_api.commands}
    codes = [None if code == SOURCE else menu_code(code) for code in LANGUAGES]
    assert menus == {
        (scope, code) for scope in ("all_private_chats", "all_group_chats") for code in codes
    }

    second = await start_bot()
    bot_api.push_update(bot_api.text_message(USER, "Hammer curls", user_id=USER))
    await answered(bot_api, "Round 2 of 3")
    assert [m["content"] for m in model_server.requests[-1]["messages"][1:]] == [
        "Help me pick weights",
        "Reply to: Help me pick weights",
        "Hammer curls",
    ]
    assert len(model_server.requests) == 2  # the first update was not delivered twice
    code = await second.stop()
    assert code == 0


async def test_a_killed_process_loses_no_message(
    start_bot: StartBot, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """kill -9 while the model is answering; after a restart /retry answers the stored message."""
    first = await start_bot()
    model_server.enqueue("too late", delay=30)
    bot_api.push_update(bot_api.text_message(USER, "Keep this question", user_id=USER))
    await first.asked(model_server)
    code = await first.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL

    second = await start_bot()
    bot_api.push_update(bot_api.text_message(USER, "/retry", user_id=USER))
    text = await answered(bot_api, "Reply to: Keep this question")
    assert text.endswith("Round 1 of 3")
    users = [m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["Keep this question"]
    assert not any("too late" in t for t in bot_api.sent_texts(USER))
    code = await second.stop()
    assert code == 0


async def test_a_rejected_token_exits_2_with_one_line(tmp_path: Path, bot_api: FakeBotApi) -> None:
    """Telegram refusing the token ends start-up with exit code 2 and one clear line."""
    bot_api.fail_next("getMe", status=401, description="Unauthorized")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        env=clean_env(
            tmp_path,
            TELEGRAM_BOT_TOKEN=TOKEN,
            OPENAI_API_KEY="k",
            TELEGRAM_API_BASE_URL=bot_api.base_url,
            LOG_LEVEL="WARNING",
            DB_PATH=str(tmp_path / "bot.sqlite3"),
        ),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "TELEGRAM_BOT_TOKEN" in lines[0], err.decode()


async def test_sigterm_mid_answer_delivers_it_before_exiting(
    start_bot: StartBot, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A SIGTERM while the model is answering lets that answer reach the user, then exits 0."""
    bot = await start_bot()
    release = asyncio.Event()
    model_server.enqueue("Worth the wait", hold=release)
    bot_api.push_update(bot_api.text_message(USER, "Slow question", user_id=USER))
    await bot.asked(model_server)
    bot.process.send_signal(signal.SIGTERM)
    await bot.logged("stopping")  # the process is stopping while the model still answers
    release.set()
    code = await bot.exited()
    assert code == 0, bot.log.read_text()
    assert any("Worth the wait" in t for t in bot_api.sent_texts(USER)), bot.log.read_text()


def run_module(tmp_path: Path, module: str, **values: str) -> subprocess.CompletedProcess[str]:
    """`python -m <module>` with only `values` as settings; it must end on its own."""
    return subprocess.run(
        [sys.executable, "-m", module],
        env=clean_env(tmp_path, **values),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


def assert_one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit code 2 and exactly one line on stderr, containing every fragment. The loop
    watcher's warnings are not counted: on a loaded machine start-up itself can stall the
    event loop past its threshold, and saying so is the watcher's job."""
    assert done.returncode == 2, done.stderr
    lines = [
        line
        for line in done.stderr.strip().splitlines()
        if "event loop was blocked for" not in line
    ]
    assert len(lines) == 1, done.stderr
    assert all(fragment in lines[0] for fragment in fragments), done.stderr


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.parametrize(
    ("module", "case"),
    [
        (module, case)
        for case in ("db folder is a file", "db is not a database", "log level", "port in use")
        for module in ("bot", "api")
        if (module, case) != ("bot", "port in use")  # needs Telegram first: the test below
    ],
)
def test_start_up_failures_exit_2_with_one_line(tmp_path: Path, module: str, case: str) -> None:
    """Each deployment mistake ends the process with code 2 and one line naming it."""
    values = {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9/bot",  # never reached
        "OPENAI_API_KEY": "test-key",
        "DB_PATH": str(tmp_path / "bot.sqlite3"),
    }
    with listening_socket() as busy:
        if case == "db folder is a file":
            (tmp_path / "plain").write_text("")
            values["DB_PATH"] = str(tmp_path / "plain" / "bot.sqlite3")
            expected: tuple[str, ...] = ("DB_PATH", "plain")
        elif case == "db is not a database":
            (tmp_path / "bot.sqlite3").write_text("hello\n" * 1000)
            expected = ("DB_PATH", "not a SQLite database")
        elif case == "log level":
            values["LOG_LEVEL"] = "LOUD"
            expected = ("LOG_LEVEL", "LOUD")
        else:
            values["API_ENABLED"] = "true"
            values["API_TOKEN"] = "an-api-token"
            values["API_PORT"] = str(busy.getsockname()[1])
            expected = ("API_PORT", str(busy.getsockname()[1]))
        done = run_module(tmp_path, module, **values)
    assert_one_line(done, *expected)
    assert "Traceback" not in done.stderr


async def test_a_busy_port_stops_the_bot_with_one_line(tmp_path: Path, bot_api: FakeBotApi) -> None:
    """The bot serving its API on a port already taken exits 2 with one line."""
    with listening_socket() as busy:
        port = str(busy.getsockname()[1])
        done = await asyncio.to_thread(
            run_module,
            tmp_path,
            "bot",
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_BASE_URL=bot_api.base_url,
            OPENAI_API_KEY="test-key",
            DB_PATH=str(tmp_path / "bot.sqlite3"),
            API_ENABLED="true",
            API_TOKEN="an-api-token",
            API_PORT=port,
            LOG_LEVEL="WARNING",
        )
    assert_one_line(done, "API_PORT", port)


async def test_a_webhook_telegram_refuses_stops_the_bot_with_one_line(
    tmp_path: Path, bot_api: FakeBotApi
) -> None:
    """setWebhook refused (e.g. not an HTTPS URL): exit 2, one line naming WEBHOOK_URL."""
    bot_api.fail_next(
        "setWebhook", status=400, description="Bad Request: bad webhook: HTTPS url must be provided"
    )
    with listening_socket() as probe:
        port = str(probe.getsockname()[1])
    done = await asyncio.to_thread(
        run_module,
        tmp_path,
        "bot",
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=bot_api.base_url,
        OPENAI_API_KEY="test-key",
        DB_PATH=str(tmp_path / "bot.sqlite3"),
        WEBHOOK_URL="http://bot.example.com/telegram/webhook",
        WEBHOOK_SECRET="hook-secret",
        API_PORT=port,
        LOG_LEVEL="WARNING",
    )
    assert_one_line(done, "WEBHOOK_URL", "url must be provided")


async def test_the_api_logs_its_shutdown_on_sigterm(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """`python -m api` stopped by SIGTERM logs that it is stopping and that it stopped, and
    exits 0."""
    with listening_socket() as probe:
        port = probe.getsockname()[1]
    env = clean_env(
        tmp_path,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=model_server.base_url,
        LLM_MODEL="test-model",
        API_TOKEN="an-api-token",
        API_PORT=str(port),
        DB_PATH=str(tmp_path / "api.sqlite3"),
    )
    api = await BotProcess.launch(env, tmp_path / "api.log", tmp_path, module="api")
    try:
        await api.logged(f"API on http://127.0.0.1:{port}")
        assert await api.stop() == 0
    finally:
        if api.process.returncode is None:
            api.process.kill()
            await api.process.wait()
    log = api.log.read_text()
    assert "stopping" in log and log.rstrip().endswith("stopped"), log
    assert "Traceback" not in log


async def test_a_bot_selling_plans_sets_menus_with_the_payment_commands(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With PLANS, the process's menus in every language and scope end with /plans,
    /paysupport and /terms, and have no /refund."""
    plans = json.dumps([{"id": "pro", "title": "Pro", "stars": 250, "days": 30}])
    env = fakes_env(tmp_path, bot_api, model_server, PLANS=plans, DB_PATH=str(tmp_path / "b.db"))
    bot = await BotProcess.launch(env, tmp_path / "bot.log", tmp_path)
    try:
        await bot_api.wait_for("getUpdates", 30)  # the menus are set before polling starts
        assert len(bot_api.commands) == 2 * len(LANGUAGES)
        for commands in bot_api.commands.values():
            names = [c["command"] for c in commands]
            assert names[-3:] == ["plans", "paysupport", "terms"]
            assert "refund" not in names
        assert await bot.stop() == 0, bot.log.read_text()
    finally:
        if bot.process.returncode is None:
            bot.process.kill()
            await bot.process.wait()
