"""The inbox in /metrics: its depth read when scraped, and how long updates waited in it."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from telemetry.metrics import Metrics
from tests.api_harness import api_settings, running_api


def sample(text: str, name: str) -> float:
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(value)


async def test_the_inbox_depth_is_read_from_its_source_at_each_scrape() -> None:
    """An async source (the inbox's count query) or a plain callable; read per scrape."""
    metrics = Metrics()
    depths = iter([7, 2])

    async def depth() -> int:
        return next(depths)

    metrics.read_inbox_depth_from(depth)
    assert sample((await metrics.scrape())[0].decode(), "consult_inbox_depth") == 7
    assert sample((await metrics.scrape())[0].decode(), "consult_inbox_depth") == 2
    metrics.read_inbox_depth_from(lambda: 5)
    assert sample((await metrics.scrape())[0].decode(), "consult_inbox_depth") == 5


async def test_a_failing_depth_source_does_not_fail_the_scrape() -> None:
    metrics = Metrics()

    async def broken() -> int:
        raise ConnectionError("database gone")

    metrics.read_inbox_depth_from(broken)
    body = (await metrics.scrape())[0].decode()
    assert sample(body, "consult_inbox_depth") != sample(body, "consult_inbox_depth")  # NaN


def test_claim_latency_is_a_histogram_of_seconds() -> None:
    metrics = Metrics()
    metrics.inbox_claim_seconds.observe(0.2)
    metrics.inbox_claim_seconds.observe(3.0)
    body = metrics.render()[0].decode()
    assert sample(body, "consult_inbox_claim_seconds_count") == 2
    assert sample(body, "consult_inbox_claim_seconds_sum") == 3.2


async def test_metrics_route_reads_the_inbox_depth_when_scraped(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    settings = api_settings(tmp_path / "m.sqlite3", model_server.base_url)
    async with running_api(settings) as api:

        async def depth() -> int:
            return 41

        api.metrics.read_inbox_depth_from(depth)
        response = await api.client.get("/metrics")
        assert sample(await response.text(), "consult_inbox_depth") == 41


def test_updates_given_up_are_counted_by_reason() -> None:
    metrics = Metrics()
    metrics.record_given_up("deadline")
    metrics.record_given_up("deadline")
    metrics.record_given_up("attempts")
    body = metrics.render()[0].decode()
    assert sample(body, 'consult_dead_letters_total{bot="0",reason="deadline"}') == 2
    assert sample(body, 'consult_dead_letters_total{bot="0",reason="attempts"}') == 1
