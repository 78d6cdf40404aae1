"""The one way the fakes serve HTTP: fakes/serving.py LocalServer."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.serving import LocalServer


def _hello_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"host": request.host})

    app = web.Application()
    app.router.add_get("/hello", hello)
    return app


async def test_port_zero_binds_a_free_loopback_port_and_stop_closes_it() -> None:
    server = LocalServer(_hello_app())
    async with server:
        assert server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http, http.get(f"{server.base_url}/hello") as resp:
            assert await resp.json() == {"host": f"127.0.0.1:{server.port}"}
    assert not server.running
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.get(f"{server.base_url}/hello")


async def test_stop_is_idempotent_and_a_second_start_is_refused() -> None:
    server = LocalServer(_hello_app())
    await server.stop()  # never started: nothing to do
    await server.start()
    try:
        with pytest.raises(RuntimeError):
            await server.start()
    finally:
        await server.stop()
    await server.stop()
    assert not server.running


async def test_a_taken_port_fails_start_without_leaving_a_runner() -> None:
    async with LocalServer(_hello_app()) as first:
        second = LocalServer(_hello_app(), port=first.port)
        with pytest.raises(OSError, match=r"(?i)in use"):
            await second.start()
        assert not second.running


@pytest.mark.parametrize(("fake", "path"), [(FakeBotApi, "/bot"), (FakeModelServer, "/v1")])
async def test_the_fakes_report_the_bound_port_in_base_url(
    fake: type[FakeBotApi] | type[FakeModelServer], path: str
) -> None:
    server = fake()
    await server.start()
    try:
        assert server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}{path}"
    finally:
        await server.stop()
        await server.stop()
