"""Structured rounds on several real `python -m bot` workers (PostgreSQL, load-balanced
webhook) against a model server that ignores `response_format` and writes prose: every
round on every worker, the first after its start included, is one model call, and the
user sees the prose. Helpers are in tests/cluster_harness.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer, schema_asked
from tests.cluster_harness import (
    LoadBalancer,
    Replies,
    chat_ids,
    cluster,
    free_port,
    post_update,
    worker_env,
)
from tests.postgres import postgres_url  # noqa: F401  (fixture)

WORKERS = 2
CHATS = 6
ROUNDS = 2


async def test_prose_rounds_cost_one_call_each_on_every_worker(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Six chats × two rounds through a round-robin balancer over two fresh workers: each
    round is answered with the prose the model wrote, by exactly one model call."""
    model_server.ignore_format = True
    replies = Replies(bot_api)
    chats = chat_ids(CHATS)
    async with cluster(tmp_path) as workers:
        ports = [free_port() for _ in range(WORKERS)]
        for port in ports:
            env = worker_env(tmp_path, bot_api, model_server, postgres_url, port=port)
            await workers.start({**env, "LLM_STRUCTURED_QUESTIONS": "auto"}, port)
        await workers.running()

        async def chat(http: aiohttp.ClientSession, url: str, chat_id: int) -> None:
            for round_ in range(1, ROUNDS + 1):
                text = f"Question {round_} of chat {chat_id}"
                update = bot_api.text_message(chat_id, text, user_id=chat_id)
                assert await post_update(http, url, update) == 200
                await replies.first_line(chat_id, f"Reply to: {text}")

        async with LoadBalancer(ports) as balancer, aiohttp.ClientSession() as http:
            await asyncio.gather(*(chat(http, balancer.url, c) for c in chats))
        assert all(balancer.forwarded[port] > 0 for port in ports), balancer.forwarded
        assert "Traceback" not in workers.logs()

    assert len(model_server.requests) == CHATS * ROUNDS
    asked = [schema_asked(body) for body in model_server.requests]
    # JSON was asked (a worker's first rounds, until its first prose reply came back), and
    # each of those asks was the round's only call (the count above). Which worker takes an
    # update from the shared inbox is the workers' race, so one may handle them all.
    assert "clarifying_round" in asked, asked
