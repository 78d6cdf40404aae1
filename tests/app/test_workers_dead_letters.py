"""An update that every worker dies on, and one that runs past the handling deadline, with
real `python -m bot` worker processes on one PostgreSQL schema (webhook mode, the shared
inbox): each is given up, its chat told once in its user's language, and the chat's next
message answered. Helpers: tests/cluster_harness.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.translate import t
from tests.app.test_workers_e2e import scrape_until
from tests.bot.test_inbox_dead_letters import letters
from tests.cluster_harness import PATH, Replies, chat_ids, cluster, free_port, post_update
from tests.cluster_harness import worker_env as cluster_env
from tests.postgres import postgres_url  # noqa: F401  (fixture)

WAIT = 30  # seconds: the bound on every wait; a wait that runs out fails the test
GIVEN_UP = t("ru", "update_given_up").split("\n", 1)[0]


def told(replies: Replies, chat: int) -> int:
    return replies.first_lines(chat).count(GIVEN_UP)


async def answered(replies: Replies, chat: int, text: str) -> None:
    """Wait for a reply of the model's to a request carrying `text` as its last words (the
    given-up message, stored before the model was called, stays in the turn like a failed
    one's, so the reply echoes both)."""
    async with asyncio.timeout(WAIT):
        while not any(
            line.startswith("Reply to: ") and text in sent.text
            for sent in replies.by_chat.get(chat, [])
            for line in [sent.text.split("\n", 1)[0]]
        ):
            replies.first_lines(chat)  # reads the calls made since
            await asyncio.sleep(0.02)


async def test_an_update_every_worker_dies_on_is_given_up_after_three_attempts(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """The model holds every call, and each worker running the update is killed -9 in it:
    three attempts are counted though none ended. The fourth worker does not run it again:
    it moves it to the dead letters ("attempts", 3), tells the chat once, in Russian as the
    user's Telegram is, and answers the chat's next message; /metrics counts it."""
    model_server.hold = asyncio.Event()
    [chat] = chat_ids(1)
    replies = Replies(bot_api)
    async with cluster(tmp_path) as workers, aiohttp.ClientSession() as http:
        poison = bot_api.text_message(chat, "Вопрос, на котором всё падает", user_id=chat,
                                      language_code="ru")  # fmt: skip
        for attempt in (1, 2, 3):
            port = free_port()
            env = cluster_env(workers.home, bot_api, model_server, postgres_url, port=port)
            worker = await workers.start(env, port)
            await workers.running()
            if attempt == 1:
                assert await post_update(http, f"http://127.0.0.1:{port}{PATH}", poison) == 200
            await model_server.wait_requests(attempt, timeout=WAIT)  # in the turn, held
            await worker.kill()
        assert told(replies, chat) == 0
        port = free_port()
        env = cluster_env(workers.home, bot_api, model_server, postgres_url, port=port)
        survivor = await workers.start(env, port)
        await workers.running()
        await replies.first_line(chat, GIVEN_UP, timeout=WAIT)
        model_server.hold.set()
        after = bot_api.text_message(chat, "Другой вопрос", user_id=chat, language_code="ru")
        assert await post_update(http, f"http://127.0.0.1:{port}{PATH}", after) == 200
        await answered(replies, chat, "Другой вопрос")
        given_up = 'consult_dead_letters_total{bot="0",reason="attempts"} 1.0'
        metrics = await scrape_until(port, given_up)
        assert "Traceback" not in survivor.log(), survivor.log()
    assert len(model_server.requests) == 4  # three attempts at the poison, then the next one
    assert "Вопрос, на котором всё падает" not in str(model_server.requests[-1])  # taken back
    assert told(replies, chat) == 1
    assert await letters(postgres_url) == [(poison["update_id"], "attempts", 3)]
    assert "consult_inbox_depth 0.0" in metrics


async def test_an_update_past_the_handling_deadline_is_stopped_and_the_chat_goes_on(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """INBOX_HANDLING_DEADLINE_SECONDS=2 and a model that never answers the first message:
    its turn is stopped at the deadline, the update moved to the dead letters as
    "deadline", the chat told once; the next message is answered."""
    held = asyncio.Event()
    model_server.hold = held
    [chat] = chat_ids(1)
    replies = Replies(bot_api)
    async with cluster(tmp_path) as workers, aiohttp.ClientSession() as http:
        port = free_port()
        env = cluster_env(workers.home, bot_api, model_server, postgres_url, port=port)
        env["INBOX_HANDLING_DEADLINE_SECONDS"] = "2"
        worker = await workers.start(env, port)
        await workers.running()
        url = f"http://127.0.0.1:{port}{PATH}"
        stuck = bot_api.text_message(chat, "Никогда не ответят", user_id=chat, language_code="ru")
        assert await post_update(http, url, stuck) == 200
        await model_server.wait_requests(1, timeout=WAIT)
        after = bot_api.text_message(chat, "Следующий вопрос", user_id=chat, language_code="ru")
        assert await post_update(http, url, after) == 200
        await replies.first_line(chat, GIVEN_UP, timeout=WAIT)
        held.set()  # the next message's model call answers at once
        await answered(replies, chat, "Следующий вопрос")
        assert "Traceback" not in worker.log(), worker.log()
    assert told(replies, chat) == 1
    assert await letters(postgres_url) == [(stuck["update_id"], "deadline", 1)]
    assert "Никогда не ответят" not in str(model_server.requests[-1])  # taken back
