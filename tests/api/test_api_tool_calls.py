"""`toolCalls`: the tools the model called before it wrote a reply, in the HTTP API. The
reply's body carries them as the OpenAPI document describes (absent when none); a
session's messages list them after a restart and the export shows them; the stream sends
a `tool` event where a tool starts, between the text before it and the text after it;
`/healthz` names each tool server. Over a real server, real SQLite and aiohttp's real test
server for the stream, and end to end through `mcp-server-time`."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from jsonschema import Draft202012Validator

from api.responses import response
from api.round_tasks import Relay
from api.sse import EventStream
from core.domain.api_keys import session_key
from core.domain.consultation import Consultation, Message, Role, Status, Usage
from core.domain.outcomes import Reply
from core.domain.tools import ToolFailure, ToolServerStatus, ToolSpec, ToolUse
from core.domain.usage import Accounting, CallKind, Payer
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.api.test_api_ops import check
from tests.api_harness import RunningApi, api_settings, running_api
from tests.mcp_harness import time_server

CLOCK = ToolUse(
    "time__get_current_time",
    "time",
    "get_current_time",
    '{"timezone": "Europe/Paris"}',
    result='{"datetime": "2026-11-29T03:00:00+01:00"}',
    failure=None,
    ms=9,
)
GONE = ToolUse(
    "docs__search",
    "docs",
    "search",
    '{"query": "hours"}',
    error="the tool did not answer within 20 s",
    failure=ToolFailure.TIMEOUT,
    ms=20_000,
)
CLOCK_OUT = {
    "name": "time__get_current_time",
    "arguments": '{"timezone": "Europe/Paris"}',
    "result": '{"datetime": "2026-11-29T03:00:00+01:00"}',
    "error": None,
    "ms": 9,
}
GONE_OUT = {
    "name": "docs__search",
    "arguments": '{"query": "hours"}',
    "result": "",
    "error": "the tool did not answer within 20 s",
    "ms": 20_000,
}


def validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return Draft202012Validator(schema)


async def test_a_replys_body_carries_its_tool_calls_as_the_document_describes(
    api: RunningApi,
) -> None:
    """Every call in order with the five fields; a failed one has its error and no
    result; a reply without tools has no `toolCalls` at all; both bodies are valid."""
    document = await (await api.client.get("/api/openapi.json")).json()
    used = Reply("It is 3 a.m.", str(uuid.uuid4()), 1, 1, True, True, "m", tool_uses=(CLOCK, GONE))
    plain = Reply("It is late.", str(uuid.uuid4()), 1, 1, True, True, "m")
    with_tools, without = response(used), response(plain)
    for body in (with_tools, without):
        validator(document, "ChatResponse").validate(body)
    assert with_tools["toolCalls"] == [CLOCK_OUT, GONE_OUT]
    assert "toolCalls" not in without
    schemas = document["components"]["schemas"]
    for owner in ("ChatResponse", "SessionMessage"):
        assert "toolCalls" in schemas[owner]["properties"]
        assert "toolCalls" not in schemas[owner]["required"]
    fields = {"name", "arguments", "result", "error", "ms"}
    assert (
        set(schemas["ToolCallOut"]["properties"])
        == fields
        == set(schemas["ToolCallOut"]["required"])
    )
    events = document["paths"]["/api/chat/stream"]["post"]["responses"]["200"]["content"]
    tool_event = events["text/event-stream"]["x-sse-events"]["tool"]
    assert tool_event == {"$ref": "#/components/schemas/StreamTool"}
    assert set(schemas["StreamTool"]["required"]) == {"name", "server", "tool"}


async def test_api_stats_count_every_chats_tool_calls_per_tool(api: RunningApi) -> None:
    """Each period of `GET /api/stats` lists the tool calls by tool with the failed ones,
    a name no toolbox offered as `unknown` (last), valid against the document; the calls
    of a reply count once, however many scopes it was charged to."""
    invented = ToolUse("made_up", "", "", "{}", error="no", failure=ToolFailure.UNKNOWN_TOOL)
    charged = Accounting().charge(
        Usage(1, 1),
        model="m",
        kind=CallKind.FINAL,
        chat=session_key(str(uuid.uuid4())),
        payer=Payer(person="api:u-1", client="key-a"),
        at=time.time(),
        tool_uses=[CLOCK, GONE, CLOCK, invented],
    )
    document = await (await api.client.get("/api/openapi.json")).json()
    empty = await (await api.client.get("/api/stats")).json()
    assert empty["today"]["toolCalls"] == []
    await api.store.add_usage([charged])
    response = await api.client.get("/api/stats?days=30")
    body = await response.json()
    assert response.status == 200, body
    check(document, "/api/stats", "get", 200, body)
    counted = [
        {"tool": "docs__search", "calls": 1, "failed": 1},
        {"tool": "time__get_current_time", "calls": 2, "failed": 0},
        {"tool": "unknown", "calls": 1, "failed": 1},
    ]
    for period in ("today", "last7Days", "lastDays"):
        assert body[period]["toolCalls"] == counted


async def test_a_sessions_messages_and_export_list_them_after_a_restart(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A session stored with a round that looked the time up and an answer whose search
    failed: a new runtime on the same file lists each reply's calls, the user's messages
    none, and the Markdown export shows them under their replies."""
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    session = str(uuid.uuid4())
    async with running_api(settings) as api:
        await api.store.create(
            Consultation(
                id=session,
                chat_key=session_key(session),
                max_rounds=2,
                current_round=2,
                status=Status.COMPLETE,
                initial_request="What time is it in Paris?",
                created_at=1_000.0,
                last_activity_at=4_000.0,
                messages=[
                    Message(Role.USER, "What time is it in Paris?", 1_000.0),
                    Message(Role.ASSISTANT, "Winter time?", 2_000.0, tool_uses=(CLOCK,)),
                    Message(Role.USER, "Yes", 3_000.0),
                    Message(Role.ASSISTANT, "3 a.m.", 4_000.0, tool_uses=(GONE,)),
                ],
            )
        )
    async with running_api(settings) as restarted:
        document = await (await restarted.client.get("/api/openapi.json")).json()
        view = await (await restarted.client.get(f"/api/sessions/{session}")).json()
        export = await restarted.client.get(f"/api/sessions/{session}/export?format=md")
        markdown = await export.text()
    validator(document, "SessionView").validate(view)
    assert [m.get("toolCalls") for m in view["messages"]] == [None, [CLOCK_OUT], None, [GONE_OUT]]
    assert (
        "Winter time?\n\n**Looked up**\n\n"
        "time · get\\_current\\_time \\(timezone=Europe/Paris\\)\n\n"
        '```\n{"datetime": "2026-11-29T03:00:00+01:00"}\n```\n'
    ) in markdown
    assert (
        "3 a.m.\n\n**Looked up**\n\n"
        "docs · search \\(query=hours\\) — failed: the tool did not answer within 20 s\n"
    ) in markdown


async def test_the_stream_sends_a_tool_event_where_the_tool_started() -> None:
    """The text before the tool is sent first, then `tool` with its name, server and tool,
    then the text after it as a delta: appending the deltas still rebuilds the text."""
    spec = ToolSpec("time__get_current_time", "time", "get_current_time", "The time now.")

    async def stream(request: web.Request) -> web.StreamResponse:
        events = EventStream(request)
        await events.open()
        relay = Relay()
        await relay.on_text("Let me check.")
        await relay.attach(events)
        await relay.on_tool(spec)
        await relay.on_text("Let me check. It is 3 a.m.")
        await events.close()
        return events.response

    app = web.Application()
    app.router.add_get("/stream", stream)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        text = await (await client.get("/stream")).text()
    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1][6:]))
        for block in text.strip().split("\n\n")
    ]
    assert events == [
        ("delta", {"content": "Let me check."}),
        ("tool", {"name": "time__get_current_time", "server": "time", "tool": "get_current_time"}),
        ("delta", {"content": " It is 3 a.m."}),
    ]


async def test_healthz_names_each_tool_server_with_its_state_and_tools(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Read at each probe from the callable it is given; a failed server is reported with
    its error and leaves the status "ok" (consultations go on without its tools); the
    body is valid against the document's HealthResponse."""
    statuses = [ToolServerStatus("time", "ready", 2)]
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    async with running_api(settings, tool_statuses=lambda: tuple(statuses)) as api:
        document = await (await api.client.get("/api/openapi.json")).json()
        first = await api.client.get("/healthz")
        first_body = await first.json()
        statuses.append(ToolServerStatus("docs", "failed", 0, "connection refused"))
        second = await api.client.get("/healthz")
        second_body = await second.json()
    assert first.status == second.status == 200
    assert first_body["tools"] == [{"name": "time", "state": "ready", "tools": 2, "error": None}]
    assert second_body["status"] == "ok"
    assert second_body["tools"][1] == {
        "name": "docs",
        "state": "failed",
        "tools": 0,
        "error": "connection refused",
    }
    for body in (first_body, second_body):
        validator(document, "HealthResponse").validate(body)


@pytest.mark.timeout(90)
async def test_a_streamed_consultation_looks_the_time_up_through_mcp_server_time(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """End to end over the production runtime and a tool server no one here wrote: the
    stream sends the `tool` event between the text before the call and after it, `done`
    carries the call with the server's real result; `/healthz` shows the server ready with
    its one allowed tool; `/metrics` counts the call under the tool's name."""
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        mcp_servers=json.dumps({"time": time_server()}),
        mcp_tools_allow="time.get_current_time",
    )
    model_server.enqueue_calls(
        ScriptedCall("time__get_current_time", '{"timezone": "UTC"}'), text="Let me look."
    )
    model_server.enqueue("It is night in UTC.")
    async with running_api(settings) as api:
        stream = await api.client.post("/api/chat/stream", json={"message": "What time is it?"})
        assert stream.status == 200, await stream.text()
        text = await stream.text()
        health = await (await api.client.get("/healthz")).json()
        metrics = await (await api.client.get("/metrics")).text()
    events = [
        (block.split("\n")[0].removeprefix("event: "), block.split("\n", 1)[1])
        for block in text.strip().split("\n\n")
        if block.startswith("event: ")
    ]
    names = [name for name, _ in events]
    assert names[0] == "session" and names[-1] == "done"
    tool_at = names.index("tool")
    before = "".join(json.loads(d[6:])["content"] for n, d in events[:tool_at] if n == "delta")
    assert before == "Let me look."
    assert json.loads(events[tool_at][1][6:]) == {
        "name": "time__get_current_time",
        "server": "time",
        "tool": "get_current_time",
    }
    [call] = json.loads(events[-1][1][6:])["toolCalls"]
    assert call["name"] == "time__get_current_time" and call["error"] is None
    assert call["arguments"] == '{"timezone": "UTC"}'
    assert json.loads(call["result"])["timezone"] == "UTC"
    assert health["tools"] == [{"name": "time", "state": "ready", "tools": 1, "error": None}]
    assert 'consult_tool_calls_total{outcome="ok",tool="time__get_current_time"} 1.0' in metrics
