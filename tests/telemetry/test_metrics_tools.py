"""Tool calls in /metrics: counted from each reply by tool and outcome, with a duration
histogram; a tool name the deployment's tools do not have (one the model invented, or
any name before the names are known) is counted as "unknown", so strangers cannot add
series; a replayed reply ran no tool and counts none."""

from __future__ import annotations

from dataclasses import replace

from core.domain.outcomes import Reply
from core.domain.tools import ToolFailure, ToolUse
from telemetry.metrics import Metrics

NOW = ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:00", ms=40)
SLOW = ToolUse(
    "time__get_current_time",
    "time",
    "get_current_time",
    "{}",
    error="did not answer within 20 s",
    failure=ToolFailure.TIMEOUT,
    ms=20_000,
)
BROKE = ToolUse("docs__search", "docs", "search", "{}", error="boom", ms=5)


def invented(n: int) -> ToolUse:
    return ToolUse(
        f"made_up_{n}", "", "", "{}", error="no such tool", failure=ToolFailure.UNKNOWN_TOOL
    )


def reply(*uses: ToolUse) -> Reply:
    return Reply("It is 3 a.m.", "c1", 1, 1, True, True, "m", tool_uses=uses)


def samples(body: str, name: str) -> dict[str, float]:
    """The samples of one metric, by their label text."""
    found = {}
    for line in body.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) :].rsplit(" ", 1)
            found[labels] = float(value)
    return found


async def test_tool_calls_are_counted_by_tool_and_outcome_with_their_durations() -> None:
    metrics = Metrics()
    metrics.name_tools_from(lambda: {"time__get_current_time", "docs__search"})
    metrics.record_reply(reply(NOW, SLOW, NOW), source="telegram")
    metrics.record_reply(reply(BROKE), source="api")
    metrics.record_reply(replace(reply(NOW), replayed=True), source="api")
    body = (await metrics.scrape())[0].decode()
    assert samples(body, "consult_tool_calls_total") == {
        '{outcome="ok",tool="time__get_current_time"}': 2.0,
        '{outcome="timeout",tool="time__get_current_time"}': 1.0,
        '{outcome="failed",tool="docs__search"}': 1.0,
    }
    durations = samples(body, "consult_tool_call_duration_seconds_sum")
    assert durations == {'{tool="time__get_current_time"}': 20.08, '{tool="docs__search"}': 0.005}
    counts = samples(body, "consult_tool_call_duration_seconds_count")
    assert counts['{tool="time__get_current_time"}'] == 3.0


async def test_names_the_tools_do_not_have_share_one_unknown_label() -> None:
    """A thousand invented names, a name no configured tool has (a server that went
    away) and a name outside the allowed form: one "unknown" tool label in all; before
    the names are known, every call is "unknown"."""
    metrics = Metrics()
    metrics.name_tools_from(lambda: {"time__get_current_time"})
    metrics.record_reply(reply(*(invented(n) for n in range(1000))))
    metrics.record_reply(reply(BROKE, replace(NOW, name='x"}\n# forged')))
    body = (await metrics.scrape())[0].decode()
    assert samples(body, "consult_tool_calls_total") == {
        '{outcome="unknown_tool",tool="unknown"}': 1000.0,
        '{outcome="failed",tool="unknown"}': 1.0,
        '{outcome="ok",tool="unknown"}': 1.0,
    }
    assert "made_up" not in body and "forged" not in body

    unnamed = Metrics()
    unnamed.record_reply(reply(NOW))
    body = (await unnamed.scrape())[0].decode()
    assert samples(body, "consult_tool_calls_total") == {'{outcome="ok",tool="unknown"}': 1.0}


async def test_a_failing_names_source_counts_the_call_as_unknown() -> None:
    metrics = Metrics()

    def broken() -> set[str]:
        raise RuntimeError("toolbox gone")

    metrics.name_tools_from(broken)
    metrics.record_reply(reply(NOW))
    body = (await metrics.scrape())[0].decode()
    assert samples(body, "consult_tool_calls_total") == {'{outcome="ok",tool="unknown"}': 1.0}
