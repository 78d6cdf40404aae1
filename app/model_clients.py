"""Model clients by name: each an OpenAI-compatible endpoint, opened and closed together.

The bot needs one ("bot"); the quality evaluator adds a simulated user and a judge,
each possibly another server. Every client is wrapped the same way: the whole-call
deadlines of `core.llm.deadline`, then the metrics of `telemetry.metrics`. An endpoint
whose transport is "aiohttp" (the default) sends its chat completions over
`providers.chat_http`; "httpx" sends them through the SDK.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.domain.ports import Completer
from core.llm.deadline import DeadlineCompleter
from core.llm.llm import ModelEndpoint, OpenAICompleter
from providers.chat_http import AiohttpChatWire
from telemetry.metrics import MeteredCompleter, Metrics


class ModelClients:
    """The process's model clients; `close` closes every connection pool they opened."""

    def __init__(self, endpoints: Iterable[ModelEndpoint], metrics: Metrics) -> None:
        self._endpoints: dict[str, ModelEndpoint] = {}
        self._raw: dict[str, OpenAICompleter] = {}
        self._wrapped: dict[str, Completer] = {}
        for endpoint in endpoints:
            if endpoint.name in self._endpoints:
                raise ValueError(f"two model endpoints are named {endpoint.name!r}")
            raw = OpenAICompleter.from_endpoint(endpoint, wire_of(endpoint))
            deadline = DeadlineCompleter(
                raw,
                first_token_seconds=endpoint.first_token_timeout_seconds,
                total_seconds=endpoint.total_timeout_seconds,
            )
            self._endpoints[endpoint.name] = endpoint
            self._raw[endpoint.name] = raw
            self._wrapped[endpoint.name] = MeteredCompleter(deadline, metrics)

    def __getitem__(self, name: str) -> Completer:
        """The client to call: deadlines and metrics included."""
        return self._wrapped[name]

    def endpoint(self, name: str) -> ModelEndpoint:
        return self._endpoints[name]

    def raw(self, name: str) -> OpenAICompleter:
        """The SDK client itself, for what is not a completion (the endpoint check)."""
        return self._raw[name]

    def names(self) -> list[str]:
        return list(self._endpoints)

    async def close(self) -> None:
        for raw in self._raw.values():
            await raw.close()


def wire_of(endpoint: ModelEndpoint) -> AiohttpChatWire | None:
    """The wire `endpoint`'s chat completions travel over; None: through the SDK."""
    if endpoint.transport != "aiohttp":
        return None
    return AiohttpChatWire(timeout=endpoint.timeout_seconds)
