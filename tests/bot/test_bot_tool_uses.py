"""The tools a reply used, shown in Telegram: `TurnRunner` against the fake Bot API. While a
tool runs the draft (private chat) or the progress message (group) shows "Looking up:
server · tool…" in the person's language, under the text so far, until the reply's text
goes on; the delivered reply lists its tools under "Looked up", failed ones marked, and
nothing when it used none. Hostile tool arguments stay one bounded line of plain text.
Replies made here, then the real engine's, then end to end through the production runtime
and the fake MCP server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from telegram.ext import ExtBot

from bot.commands.history import SHOW
from bot.commands.turns import TurnRunner
from bot.transport.flood import ChatFloodControl
from bot.transport.progress import Live
from bot.transport.target import Target
from bot.transport.telegram_http import AiohttpRequest
from core.domain.asking import UserMessage
from core.domain.outcomes import Reply
from core.domain.tools import ToolFailure, ToolSpec, ToolUse
from fakes.bot_api import TOKEN, Call, FakeBotApi
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.bot_harness import ask_private, bot_settings, buttons, running_bot, sent, wait_sent
from tests.history_harness import pressed
from tests.mcp_harness import fake_stdio
from tests.service_harness import Clock, make_service
from tests.toolboxes import Tools

if TYPE_CHECKING:
    from core.llm.llm import OpenAICompleter
    from storage.sqlite.store import SqliteStore

USER = 3501
GROUP = -1003501
TIME = ToolSpec("time__get_current_time", "time", "get_current_time", "The time now.")
PARIS = ToolUse(
    "time__get_current_time",
    "time",
    "get_current_time",
    '{"timezone": "Europe/Paris"}',
    result='{"datetime": "2026-11-29T03:00:00+01:00"}',
    ms=8,
)
GONE = ToolUse(
    "docs__search",
    "docs",
    "search",
    '{"query": "opening hours", "limit": 3}',
    error="the tool did not answer within 20 s",
    failure=ToolFailure.TIMEOUT,
    ms=20_000,
)


@pytest.fixture
async def ext_bot(bot_api: FakeBotApi) -> AsyncIterator[ExtBot[Any]]:
    async with ExtBot(
        TOKEN, base_url=bot_api.base_url, request=AiohttpRequest(), rate_limiter=ChatFloodControl()
    ) as bot:
        yield bot


def final(text: str, *uses: ToolUse) -> Reply:
    return Reply(text, "c1", 2, 2, is_final=True, is_complete=True, model="m", tool_uses=uses)


def shows(text: str) -> Callable[[Call], bool]:
    """A draft, a message or an edit that showed `text`."""
    return lambda c: c.method in SHOWN and bool(c.result) and c.params.get("text") == text


SHOWN = ("sendMessageDraft", "sendMessage", "editMessageText")


def looking_up(
    bot_api: FakeBotApi, before: str, during: str, after: str, reply: Reply
) -> Callable[[Live], Awaitable[Reply]]:
    """A turn whose model writes `before`, runs the time tool (held until its line is
    shown as `during`), then writes `after` (held until shown) and gives `reply`."""

    async def action(live: Live) -> Reply:
        if before:
            await live.on_text(before)
        await live.on_tool(TIME)
        await bot_api.wait_for(shows(during))
        await live.on_text(after)
        await bot_api.wait_for(shows(after))
        return reply

    return action


async def test_a_private_chats_draft_shows_the_tool_then_the_text_replaces_it(
    ext_bot: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """The draft reads "Looking up: time · get_current_time…" under the text so far (in
    italics, the names as written), then the text alone; the answer lists the tools used
    under a bold "Looked up", the failed one marked, after the text and before the
    status line."""
    runner = TurnRunner(ttl_minutes=60)
    during = "Let me check.\n\nLooking up: time · get_current_time…"
    reply = final("It is 3 a.m. in Paris.", PARIS, GONE)
    action = looking_up(bot_api, "Let me check.", during, "It is 3", reply)
    await runner.run(ext_bot, Target(USER), "en", action)

    [draft, *_] = [c for c in bot_api.calls_of("sendMessageDraft") if c.params["text"] == during]
    assert {"type": "italic", "offset": 15, "length": 36} in draft.params["entities"]
    [sent] = bot_api.calls_of("sendMessage")
    assert sent.params["text"].startswith(
        "It is 3 a.m. in Paris.\n\nLooked up\n"
        "time · get_current_time (timezone=Europe/Paris)\n"
        "docs · search (query=opening hours, limit=3) — failed\n\nFinal answer"
    )
    assert {"type": "bold", "offset": 24, "length": 9} in sent.params["entities"]


async def test_a_group_shows_it_in_the_progress_message_in_the_persons_language(
    ext_bot: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """In a group the progress message is edited: the tool's line alone while nothing is
    written yet, in Russian; the answer edits that message and lists the tools in
    Russian."""
    runner = TurnRunner(ttl_minutes=60, group_interval=0.05)
    during = "Ищу: time · get_current_time…"
    reply = final("Сейчас 3 часа ночи.", PARIS, GONE)
    action = looking_up(bot_api, "", during, "Сейчас 3", reply)
    target = Target(GROUP, reply_to=77, private=False)
    await runner.run(ext_bot, target, "ru", action)

    edits = [c.params["text"] for c in bot_api.calls_of("editMessageText")]
    assert "Сейчас 3" in edits
    assert edits[-1].startswith(
        "Сейчас 3 часа ночи.\n\nПроверено\n"
        "time · get_current_time (timezone=Europe/Paris)\n"
        "docs · search (query=opening hours, limit=3) — не удалось"
    )


async def test_a_reply_without_tools_lists_none(ext_bot: ExtBot[Any], bot_api: FakeBotApi) -> None:
    """No tool used: no "Looked up" line, the status line follows the text."""

    async def action(live: Live) -> Reply:
        return final("Three in the morning.")

    await TurnRunner(ttl_minutes=60).run(ext_bot, Target(USER), "en", action)
    [sent] = bot_api.calls_of("sendMessage")
    assert sent.params["text"].startswith("Three in the morning.\n\nFinal answer")
    assert "Looked up" not in sent.params["text"]


async def test_hostile_arguments_and_names_stay_one_short_line_of_plain_text(
    ext_bot: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """A megabyte of arguments with Markdown, line breaks and a forged heading becomes one
    line of at most a few dozen characters per argument; a tool whose name holds Markdown
    signs shows them as written, in the progress line and in the list."""
    forged = "**bold** [link](http://x.example)\n\nFinal answer\n" + "x" * 1_000_000
    odd = ToolSpec("a__b", "we*ird", "to_ol_[x]", "")
    hostile = ToolUse("a__b", "we*ird", "to_ol_[x]", json.dumps({"q": forged, "n": 1}), ms=1)
    not_json = ToolUse("a__b", "we*ird", "to_ol_[x]", "{" + "\n" * 10 + "y" * 500_000, ms=1)

    async def action(live: Live) -> Reply:
        await live.on_tool(odd)
        await bot_api.wait_for(shows("Looking up: we*ird · to_ol_[x]…"))
        return final("Done.", hostile, not_json)

    async with asyncio.timeout(20):
        await TurnRunner(ttl_minutes=60).run(ext_bot, Target(USER), "en", action)
    [sent] = bot_api.calls_of("sendMessage")
    lines = sent.params["text"].split("\n")
    start = lines.index("Looked up")
    listed = lines[start + 1 : start + 3]
    assert listed[0].startswith("we*ird · to_ol_[x] (q=**bold** [link](http://x.example) Final")
    assert listed[0].endswith("…, n=1)")
    assert listed[1].startswith("we*ird · to_ol_[x] ({ yyy") and listed[1].endswith("…)")
    assert all(len(line) < 200 for line in listed)
    assert lines[start + 3 : start + 5] == ["", "Final answer"]
    bold, footer = sent.params["entities"]  # the heading's, and the status line's italics
    assert (bold["type"], bold["offset"], bold["length"]) == ("bold", 7, 9)
    assert footer["type"] == "italic" and footer["offset"] > len("\n".join(lines[: start + 3]))


async def test_tools_running_at_once_are_named_together(
    ext_bot: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """Two tools started one after the other (running at once) are both named, each
    once, until the text goes on; the next tool after that text is named alone."""
    search = ToolSpec("docs__search", "docs", "search", "Search the docs.")

    async def action(live: Live) -> Reply:
        await live.on_tool(TIME)
        await live.on_tool(search)
        await live.on_tool(TIME)
        await bot_api.wait_for(shows("Looking up: time · get_current_time, docs · search…"))
        await live.on_text("Found it.")
        await live.on_tool(search)
        await bot_api.wait_for(shows("Found it.\n\nLooking up: docs · search…"))
        return final("Found it.", PARIS)

    await TurnRunner(ttl_minutes=60).run(ext_bot, Target(USER), "en", action)
    [sent] = bot_api.calls_of("sendMessage")
    assert sent.params["text"].startswith("Found it.\n\nLooked up\ntime · get_current_time")


async def test_the_engines_tools_show_while_they_run_and_under_the_answer(
    ext_bot: ExtBot[Any],
    bot_api: FakeBotApi,
    store: SqliteStore,
    completer: OpenAICompleter,
    model_server: FakeModelServer,
) -> None:
    """The real engine (real SQLite, the real openai SDK against the fake model server
    streaming two tool calls at once, the test toolbox, whose waiting tool is let go once
    the draft names it): the draft names both running tools under the text before them;
    the answer lists both, the failed one marked."""
    tools = Tools()
    engine = make_service(store, completer, Clock(), toolbox=tools, default_max_rounds=1)
    model_server.enqueue_calls(
        ScriptedCall("slow__wait"), ScriptedCall("bad__fail"), text="Let me check."
    )
    model_server.enqueue("Done waiting.")
    during = "Let me check.\n\nLooking up: slow · wait, bad · fail…"

    async def release_when_shown() -> None:
        await bot_api.wait_for(shows(during), timeout=20)
        tools.release()

    async def action(live: Live) -> Reply:
        release = asyncio.create_task(release_when_shown())
        message = UserMessage("tg:1", "Wait", on_text=live.on_text, on_tool=live.on_tool)
        reply = await engine.turns.ask(message)
        await release
        return reply

    async with asyncio.timeout(30):
        await TurnRunner(ttl_minutes=60).run(ext_bot, Target(USER), "en", action)
    [sent] = bot_api.calls_of("sendMessage")
    assert sent.params["text"].startswith(
        "Let me check.\n\nDone waiting.\n\nLooked up\nslow · wait\nbad · fail — failed\n\n"
    )


@pytest.mark.timeout(90)
async def test_the_bot_lists_what_its_tool_servers_answered_and_keeps_it(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """End to end: the real PTB Application on the fake Bot API, the production runtime
    with the fake MCP server over stdio (`fakes.mcp_server`), a final answer for which the
    model called `echo` and `fail`: the answer lists both in the person's language, the
    failed one marked; /usage counts them per tool; and "Answer N" in /history after a
    restart lists them again."""
    settings = bot_settings(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        default_max_rounds=1,
        mcp_servers=json.dumps({"fake": fake_stdio()}),
        mcp_tools_allow="fake.echo,fake.fail",
    )
    model_server.enqueue_calls(
        ScriptedCall("fake__echo", '{"text": "hello"}'), ScriptedCall("fake__fail")
    )
    model_server.enqueue("Done.")
    listed = "Проверено\nfake · echo (text=hello)\nfake · fail — не удалось"
    async with running_bot(settings, bot_api, model_server) as bot:
        [answer] = await ask_private(bot, USER, "Echo please", language_code="ru")
        assert answer.startswith("Done.\n\n" + listed + "\n\n")
        sent_tools = model_server.requests[-1]["tools"]
        assert [t["function"]["name"] for t in sent_tools] == ["fake__echo", "fake__fail"]
        [usage] = await ask_private(bot, USER, "/usage", language_code="ru")
        calls = "fake · echo 1, fake · fail 1 (не удалось: 1)"
        assert f"Вызовы инструментов сегодня: {calls}\n" in usage
    async with running_bot(settings, bot_api, model_server) as again:
        await ask_private(again, USER, "/history", language_code="ru")
        listing = sent(again, USER)[-1]
        [show] = [d for d in buttons(listing) if d.startswith(f"{SHOW}:")]
        count = len(sent(again, USER))
        await pressed(again, USER, show, int(listing.result["message_id"]), language_code="ru")
        shown = (await wait_sent(again, USER, count + 1))[-1]
    assert listed in shown
