"""Several real `python -m bot` workers on one PostgreSQL schema, with the fakes for Telegram
and the model: a load-balanced webhook, a worker killed mid-traffic, one API session on two
workers, the polling leader's hand-over, and migrations raced by workers starting together.

Helpers (processes, the load balancer, reading replies and histories) are in
tests/cluster_harness.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.cluster_harness import (
    API_TOKEN,
    Cluster,
    LoadBalancer,
    Replies,
    chat_ids,
    cluster,
    free_port,
    histories,
    post_update,
    unique_token,
    worker_env,
)
from tests.postgres import postgres_url  # noqa: F401  (fixture)

CHATS = 100
ROUNDS = 3
MODEL_SECONDS = 0.2
FINAL_MARKER = "IMPORTANT: This is the last round of the consultation"  # final_round.mustache


def question(chat: int, round_: int) -> str:
    return f"Question {round_} of chat {chat}"


@dataclass
class Traffic:
    """What the test users sent and saw, for the assertions and the printed figures."""

    chats: list[int] = field(default_factory=lambda: chat_ids(CHATS))
    sent: int = 0
    gaps: list[float] = field(default_factory=list)  # per message: POST to its reply
    round_one_done: int = 0
    round_one: asyncio.Event = field(default_factory=asyncio.Event)
    third: int = CHATS // 3

    def answered_round_one(self) -> None:
        self.round_one_done += 1
        if self.round_one_done >= self.third:
            self.round_one.set()


async def converse(
    workers: Cluster, url: str, bot_api: FakeBotApi, replies: Replies, traffic: Traffic
) -> None:
    """Every chat at once; each sends its next round only once the last one was answered.
    A reply that never comes fails the test with the workers' warnings."""

    async def chat(chat_id: int) -> None:
        for round_ in range(1, ROUNDS + 1):
            text = question(chat_id, round_)
            update = bot_api.text_message(chat_id, text, user_id=chat_id)
            started = time.monotonic()
            assert await post_update(http, url, update) == 200
            traffic.sent += 1
            reply = await replies.first_line(chat_id, f"Reply to: {text}")
            traffic.gaps.append(reply.monotonic - started)
            if round_ == 1:
                traffic.answered_round_one()

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        try:
            await asyncio.gather(*(chat(chat_id) for chat_id in traffic.chats))
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe workers' warnings:\n{workers.warnings()}") from None


async def start_webhook_workers(
    workers: Cluster,
    count: int,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    database_url: str,
    *,
    api: bool = False,
) -> list[int]:
    ports = [free_port() for _ in range(count)]
    for port in ports:
        env = worker_env(workers.home, bot_api, model_server, database_url, port=port, api=api)
        await workers.start(env, port)
    await workers.running()
    return ports


def reply_lines(replies: Replies, chat_id: int) -> list[str]:
    return [line for line in replies.first_lines(chat_id) if line.startswith("Reply to: ")]


def delivered_twice(replies: Replies, chats: list[int]) -> int:
    """Replies the users saw more than once (a reply sent, its update handled again)."""
    return sum(
        len(reply_lines(replies, chat)) - len(set(reply_lines(replies, chat))) for chat in chats
    )


def assert_answered_once_each(replies: Replies, chats: list[int]) -> None:
    for chat_id in chats:
        lines = reply_lines(replies, chat_id)
        assert lines == [f"Reply to: {question(chat_id, r)}" for r in range(1, ROUNDS + 1)]


async def assert_histories_in_order(database_url: str, chats: list[int]) -> None:
    """One consultation per chat: user and assistant strictly alternating, in round order,
    each message stored once."""
    found = await histories(database_url)
    assert len(found) == len(chats)
    for chat_id in chats:
        [rows] = found[f"tg:{chat_id}"]
        assert [role for role, _ in rows] == ["user", "assistant"] * ROUNDS, rows
        asked = [question(chat_id, r) for r in range(1, ROUNDS + 1)]
        assert [text for role, text in rows if role == "user"] == asked
        answers = [text.split("\n", 1)[0] for role, text in rows if role == "assistant"]
        assert answers == [f"Reply to: {q}" for q in asked]


def assert_final_round_instructed(model_server: FakeModelServer) -> None:
    """Each model request's system prompt carries the final-round text iff it is round 3."""
    seen = set()
    for body in model_server.requests:
        messages = body["messages"]
        last = [m["content"] for m in messages if m["role"] == "user"][-1]
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        assert (FINAL_MARKER in system) == last.startswith(f"Question {ROUNDS} "), last
        seen.add(last)
    assert len(seen) == CHATS * ROUNDS


async def test_three_workers_behind_a_load_balancer_answer_every_message_once(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """100 chats × 3 rounds through a round-robin balancer over three workers: each
    message answered exactly once, histories strictly alternating in order, and the third
    round's model request told it is the last."""
    model_server.latency = MODEL_SECONDS
    replies = Replies(bot_api)
    traffic = Traffic()
    async with cluster(tmp_path) as workers:
        ports = await start_webhook_workers(workers, 3, bot_api, model_server, postgres_url)
        async with LoadBalancer(ports) as balancer:
            await converse(workers, balancer.url, bot_api, replies, traffic)
        assert all(balancer.forwarded[port] > 0 for port in ports), balancer.forwarded
        assert "Traceback" not in workers.logs()
    assert traffic.sent == CHATS * ROUNDS
    assert_answered_once_each(replies, traffic.chats)
    await assert_histories_in_order(postgres_url, traffic.chats)
    assert_final_round_instructed(model_server)
    assert len(model_server.requests) == CHATS * ROUNDS
    print(
        f"\n3 workers: {traffic.sent} messages, longest wait for a reply "
        f"{max(traffic.gaps):.2f} s, per worker {sorted(balancer.forwarded.values())}"
    )


async def test_a_worker_killed_mid_traffic_loses_nothing(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """The same traffic; once a third of the chats got their first reply one worker is
    killed -9. The balancer skips it; every chat completes, each message is answered, no
    history row is stored twice. The figures are printed."""
    model_server.latency = MODEL_SECONDS
    replies = Replies(bot_api)
    traffic = Traffic()
    async with cluster(tmp_path) as workers:
        ports = await start_webhook_workers(workers, 3, bot_api, model_server, postgres_url)
        victim = workers.workers[1]

        async def kill_after_a_third() -> float:
            await traffic.round_one.wait()
            await victim.kill()
            return time.monotonic()

        async with LoadBalancer(ports) as balancer:
            started = time.monotonic()
            killer = asyncio.create_task(kill_after_a_third())
            await converse(workers, balancer.url, bot_api, replies, traffic)
            killed_at = await killer
        assert not victim.alive
        assert balancer.skipped > 0  # the dead worker was tried, and passed over
        survivors = "\n".join(w.log() for w in workers.workers if w is not victim)
        assert "Traceback" not in survivors, survivors
    assert traffic.sent == CHATS * ROUNDS
    await assert_histories_in_order(postgres_url, traffic.chats)  # each row once, in order
    twice = delivered_twice(replies, traffic.chats)
    answered = sum(len(set(reply_lines(replies, chat))) for chat in traffic.chats)
    assert answered == CHATS * ROUNDS
    print(
        f"\nkill -9 of one of 3 workers {killed_at - started:.2f} s in: {traffic.sent} "
        f"messages sent, {answered} answered, {twice} replies delivered twice, "
        f"{len(model_server.requests) - CHATS * ROUNDS} extra model calls, "
        f"{balancer.skipped} balancer skips, longest wait for a reply {max(traffic.gaps):.2f} s"
    )


async def api_chat(http: aiohttp.ClientSession, port: int, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    async with http.post(f"http://127.0.0.1:{port}/api/chat", json=body, headers=headers) as r:
        answer: dict[str, Any] = await r.json()
        assert r.status == 200, answer
        return answer


async def test_one_api_session_on_two_workers_answers_rounds_in_turn(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Rounds 2 and 3 of one session sent to two workers at once (round 2's model call is
    held while round 3 arrives at the other worker): both are answered, one after the other,
    and the history strictly alternates user and assistant."""
    async with cluster(tmp_path) as workers:
        first, second = await start_webhook_workers(
            workers, 2, bot_api, model_server, postgres_url, api=True
        )
        async with aiohttp.ClientSession() as http:
            opened = await api_chat(http, first, {"message": "Plan a garden", "maxRounds": 3})
            session = opened["sessionId"]
            model_server.hold = asyncio.Event()
            two = asyncio.create_task(
                api_chat(http, first, {"message": "Clay soil", "sessionId": session})
            )
            await model_server.wait_requests(2, timeout=30)
            three = asyncio.create_task(
                api_chat(http, second, {"message": "Mostly shade", "sessionId": session})
            )
            await asyncio.sleep(0.5)  # lets it reach the session's lock; passes either way
            model_server.hold.set()
            answers = await asyncio.gather(two, three)
        assert "Traceback" not in workers.logs()
    assert [a["round"] for a in answers] == [2, 3], answers
    [[rows]] = (await histories(postgres_url)).values()
    assert [role for role, _ in rows] == ["user", "assistant"] * 3
    users = [text for role, text in rows if role == "user"]
    assert users == ["Plan a garden", "Clay soil", "Mostly shade"]
    assert len(model_server.requests) == 3
    last = model_server.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] != "system"] == [
        text for _, text in rows[:-1]
    ]  # round 3 was asked with round 2's reply in its history
    assert any(FINAL_MARKER in m["content"] for m in last if m["role"] == "system")


LEADING = "polling: this worker polls Telegram for all workers"


async def test_a_killed_polling_leader_is_replaced_and_no_update_is_lost(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Two workers polling: one leads. Updates pushed, the leader killed -9 while the model
    holds its first answer, more updates pushed: the other worker starts polling, and every update
    is answered once (the ones the dead leader had queued or fetched included)."""
    replies = Replies(bot_api)
    chats = chat_ids(10)
    token = unique_token()
    async with cluster(tmp_path) as workers:
        for _ in range(2):
            env = worker_env(
                tmp_path, bot_api, model_server, postgres_url, webhook=False, token=token
            )
            await workers.start(env)
        await workers.running()
        leader = await workers.first_to_log(LEADING)
        [follower] = [w for w in workers.workers if w is not leader]
        model_server.hold = asyncio.Event()  # no reply until the leader is dead
        before = [question(chat, 1) for chat in chats[:5]]
        for chat, text in zip(chats, before, strict=False):
            bot_api.push_update(bot_api.text_message(chat, text, user_id=chat))
        await model_server.wait_requests(1, timeout=30)  # the leader fetched and queued them
        await leader.kill()
        killed_at = time.monotonic()
        model_server.hold.set()
        after = [question(chat, 1) for chat in chats[5:]]
        for chat, text in zip(chats[5:], after, strict=True):
            bot_api.push_update(bot_api.text_message(chat, text, user_id=chat))
        await follower.bot.logged(LEADING)
        took_over = time.monotonic() - killed_at
        for chat, text in zip(chats, before + after, strict=True):
            await replies.first_line(chat, f"Reply to: {text}")
        assert "Traceback" not in follower.log(), follower.log()
    for chat, text in zip(chats, before + after, strict=True):
        assert replies.first_lines(chat).count(f"Reply to: {text}") == 1
    print(f"\npolling leader killed -9: the other worker polled {took_over:.2f} s later")


async def test_workers_starting_together_on_an_empty_schema_all_come_up(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Three workers started at once on an empty schema: each migration is applied by
    exactly one of them, once, and all three answer /healthz with 200."""
    async with cluster(tmp_path) as workers:
        ports = [free_port() for _ in range(3)]
        envs = [
            worker_env(tmp_path, bot_api, model_server, postgres_url, port=port, api=True)
            for port in ports
        ]
        for env, port in zip(envs, ports, strict=True):
            await workers.start(env, port)
        await workers.running()
        async with aiohttp.ClientSession() as http:
            for port in ports:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                    assert response.status == 200, await response.text()
        logs = workers.logs()
        assert "Traceback" not in logs, logs
    applied = [
        name.strip()
        for line in logs.splitlines()
        if "database migrated:" in line
        for name in line.split("database migrated:", 1)[1].split(",")
    ]
    db = await asyncpg.connect(postgres_url)
    try:
        recorded = [r["name"] for r in await db.fetch("SELECT name FROM schema_migrations")]
    finally:
        await db.close()
    assert sorted(applied) == sorted(recorded)  # each applied once, by one worker
    assert len(recorded) >= 4


async def keyed_chat(
    http: aiohttp.ClientSession, port: int, body: dict[str, Any], key: str
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {API_TOKEN}", "Idempotency-Key": key}
    async with http.post(f"http://127.0.0.1:{port}/api/chat", json=body, headers=headers) as r:
        return r.status, await r.json()


async def sessions_in(database_url: str) -> int:
    db = await asyncpg.connect(database_url)
    try:
        return int(await db.fetchval("SELECT count(*) FROM consultations"))
    finally:
        await db.close()


async def test_one_key_sent_to_two_workers_at_once_is_answered_once(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """The same `Idempotency-Key` sent to two workers at once (the model held meanwhile): the
    same body gets one session, one model call and the same reply on both; another body gets
    422 whichever worker sees it; on an existing session, the key uses one round."""

    async def both(bodies: tuple[dict[str, Any], dict[str, Any]], key: str) -> list[Any]:
        model_server.hold = asyncio.Event()
        asked = len(model_server.requests)
        sends = [
            asyncio.create_task(keyed_chat(http, port, body, key))
            for port, body in zip(ports, bodies, strict=True)
        ]
        await model_server.wait_requests(asked + 1, timeout=30)
        await asyncio.sleep(0.5)  # lets the other request reach the model too, if it would
        model_server.hold.set()
        return list(await asyncio.gather(*sends))

    async with cluster(tmp_path) as workers:
        ports = await start_webhook_workers(
            workers, 2, bot_api, model_server, postgres_url, api=True
        )
        async with aiohttp.ClientSession() as http:
            same = {"message": "Plan a garden", "maxRounds": 3}
            first, second = await both((same, same), "key-same-body")
            assert first[0] == 200 and second == first, (first, second)
            assert len(model_server.requests) == 1
            assert await sessions_in(postgres_url) == 1
            session = first[1]["sessionId"]

            other = {"message": "Plan a pond", "maxRounds": 3}
            answers = await both((same | {"maxRounds": 2}, other), "key-two-bodies")
            assert sorted(status for status, _ in answers) == [200, 422], answers
            refused = next(body for status, body in answers if status == 422)
            assert refused["code"] == "IDEMPOTENCY_KEY_REUSED"
            assert len(model_server.requests) == 2
            assert await sessions_in(postgres_url) == 2

            going_on = {"message": "Clay soil", "sessionId": session}
            first, second = await both((going_on, going_on), "key-session")
            assert first[0] == 200 and second == first, (first, second)
            assert first[1]["round"] == 2
            assert len(model_server.requests) == 3
        assert "Traceback" not in workers.logs()
    [rows] = (await histories(postgres_url))["api:" + session]
    assert [text for role, text in rows if role == "user"] == ["Plan a garden", "Clay soil"]
