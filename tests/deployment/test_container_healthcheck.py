"""The image's HEALTHCHECK (container/healthcheck.py) as a process: it passes only on a
200 from `/healthz` on the configured port, and passes without asking when the settings
run no HTTP server (a polling bot without the API has no endpoint)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from aiohttp import web

from app.serve_bot import needs_web
from app.settings import load_settings
from fakes.serving import LocalServer

ROOT = Path(__file__).resolve().parents[2]
HEALTHCHECK = ROOT / "container" / "healthcheck.py"


async def healthcheck(tmp_path: Path, **settings: str) -> tuple[int, str]:
    """Exit code and stderr of the health check with `settings` as its environment,
    run in an empty folder (no .env)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **settings}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HEALTHCHECK),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, err.decode()


def health_app(status: int, seen: list[str]) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"status": "ok" if status == 200 else "down"}, status=status)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    return app


async def test_no_http_server_configured_passes_without_a_request(tmp_path: Path) -> None:
    code, err = await healthcheck(tmp_path)
    assert (code, err) == (0, "")


async def test_a_healthy_server_on_a_wildcard_host_passes(tmp_path: Path) -> None:
    seen: list[str] = []
    async with LocalServer(health_app(200, seen)) as server:
        settings = {"API_ENABLED": "true", "API_HOST": "0.0.0.0", "API_PORT": str(server.port)}
        code, err = await healthcheck(tmp_path, **settings)
    assert (code, err) == (0, "")
    assert seen == ["/healthz"]


async def test_the_webhook_alone_turns_the_check_on(tmp_path: Path) -> None:
    seen: list[str] = []
    async with LocalServer(health_app(503, seen)) as server:
        settings = {"WEBHOOK_URL": "https://bot.example.org/telegram/webhook"}
        code, _ = await healthcheck(tmp_path, API_PORT=str(server.port), **settings)
    assert code == 1
    assert seen == ["/healthz"]


async def test_nothing_listening_fails(tmp_path: Path) -> None:
    async with LocalServer(health_app(200, [])) as server:
        port = server.port
    code, err = await healthcheck(tmp_path, API_ENABLED="true", API_PORT=str(port))
    assert code == 1
    assert f"127.0.0.1:{port}/healthz" in err


async def test_the_console_token_alone_turns_the_check_on(tmp_path: Path) -> None:
    """ADMIN_TOKEN alone starts the HTTP server (for the operator's console): a bot whose
    server stopped answering fails the check instead of passing unasked."""
    seen: list[str] = []
    async with LocalServer(health_app(503, seen)) as server:
        settings = {"ADMIN_TOKEN": "a-console-token-of-some-length"}
        code, _ = await healthcheck(tmp_path, API_PORT=str(server.port), **settings)
    assert code == 1
    assert seen == ["/healthz"]


def health_check_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("container_healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("api_enabled", [False, True])
@pytest.mark.parametrize("webhook_url", [None, "https://bot.example.org/telegram/webhook"])
@pytest.mark.parametrize("admin_token", [None, "a-console-token-of-some-length"])
def test_the_check_expects_a_server_exactly_when_the_bot_starts_one(
    api_enabled: bool, webhook_url: str | None, admin_token: str | None
) -> None:
    settings = load_settings(
        _env_file=None, api_enabled=api_enabled, webhook_url=webhook_url, admin_token=admin_token
    )
    assert health_check_module().serves_http(settings) is needs_web(settings)
