"""Prometheus metrics for the API, the bot and the model calls, in a registry of their own.

Invariant: every metric lives in the `CollectorRegistry` of one `Metrics` object
(never the process-global one), so two instances — two tests, or the bot and a
benchmark in one process — never clash. Label values come from fixed sets (route
templates, error kinds), never from user input, so the series count stays bounded.

What one bot does — rounds answered, consultations completed, turns a quota refused,
updates given up — carries a `bot` label: "0" for the deployment's own bot
(TELEGRAM_BOT_TOKEN, and the API without `bot`), else the stored bot's id (`bot_label`).
Only the callers that serve a stored bot pass its id, so the label takes the ids of the
bots stored, never a value a request chose; summing over `bot` gives the deployment's
total, as the metric did before it had the label.

Tool calls are counted by tool and outcome from each reply's `tool_uses`: the tool label
is a name the deployment's tools have (`name_tools_from`, the names of the configured
servers' tools), else "unknown" — a name the model invented, or a tool whose server went
away, never becomes a series of its own; the outcome is "ok" or a `ToolFailure`'s value.
A replayed reply ran no tool and counts none.

The inbox depth (updates accepted but not handled yet, across all workers) is read from
its source when scraped (`scrape`), so it is never older than the scrape; without a
source it stays 0, and a source that fails or is slow reports NaN for that scrape.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from core.domain.errors import ModelError
from core.domain.outcomes import Reply
from core.domain.ports import Completer, Completion, CompletionRequest, OnDelta
from core.domain.quotas import Limit
from core.domain.tools import TOOL_NAME, ToolFailure, ToolUse
from core.domain.usage import Charge
from telemetry.loopwatch import LAG_BUCKETS

log = logging.getLogger(__name__)

NAMESPACE = "consult"
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
CLAIM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)
DEPTH_TIMEOUT = 2.0
DepthSource = Callable[[], Awaitable[int] | int]
"""The inbox depth: a count query (async) or any callable giving an int."""
TOOL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60)
UNKNOWN_TOOL = "unknown"
"""The tool label of a call to a name the deployment's tools do not have."""
ToolNames = Callable[[], Collection[str]]
"""The names (`<server>__<tool>`) of the tools the deployment offers now."""


def bot_label(scope: int) -> str:
    """The `bot` label of a bot's scope: its id in plain digits ("0": the deployment's own)."""
    if isinstance(scope, bool) or not isinstance(scope, int) or scope < 0:
        raise ValueError(f"a bot's scope is a whole number, not {scope!r}")
    return str(scope)


class Metrics:
    """The counters and histograms; `render` produces the exposition text."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            "http_requests", "HTTP requests by route template, method and status code.",
            ["route", "method", "status"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.http_duration = Histogram(
            "http_request_duration_seconds", "HTTP request handling time by route template.",
            ["route"], namespace=NAMESPACE, registry=r, buckets=MODEL_BUCKETS,
        )  # fmt: skip
        self.rounds = Counter(
            "rounds_answered", "Rounds answered (a reply stored), by source, finality and bot.",
            ["source", "final", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.completed = Counter(
            "consultations_completed", "Consultations that reached their final answer, by "
            "source and bot.",
            ["source", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.model_latency = Histogram(
            "model_request_duration_seconds", "Duration of one model call (whole stream).",
            ["outcome"], namespace=NAMESPACE, registry=r, buckets=MODEL_BUCKETS,
        )  # fmt: skip
        self.model_first_token = Histogram(
            "model_first_token_seconds", "Time from a model call to its first streamed text.",
            namespace=NAMESPACE, registry=r, buckets=MODEL_BUCKETS,
        )  # fmt: skip
        self.model_errors = Counter(
            "model_errors", "Model calls that failed after retries, by error kind.",
            ["kind"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.tokens = Counter(
            "model_tokens", "Model tokens by type (prompt, completion) and source (reported by "
            "the provider, or estimated from the text when it reported none).",
            ["type", "source"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.charged_tokens = Counter(
            "usage_tokens", "Tokens charged with stored replies and other calls, by model "
            "(a priced one, else \"unpriced\"), kind of call and direction (input, output).",
            ["model", "kind", "direction"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.charged_cost = Counter(
            "usage_cost", "Cost charged at MODEL_PRICES (per million tokens), by model and kind.",
            ["model", "kind"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip

        self.quota_refusals = Counter(
            "quota_refusals", "Turns refused by a quota before the model was called, by limit "
            "and bot.",
            ["limit", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip

        self.payments = Counter(
            "payments", "Payments in Telegram Stars kept (each charge once), by plan (\"none\": "
            "one that matched no plan on sale) and bot.",
            ["plan", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.payment_stars = Counter(
            "payment_stars", "Telegram Stars received with the payments kept, by plan and bot.",
            ["plan", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.refunds = Counter(
            "refunds", "Payments refunded by an operator, by bot.",
            ["bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.checkouts_refused = Counter(
            "checkouts_refused", "Pre-checkout queries refused, by reason.",
            ["reason"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip

        self.loop_lag = Histogram(
            "event_loop_lag_seconds", "How late the event loop ran a timer (stalls every chat).",
            namespace=NAMESPACE, registry=r, buckets=LAG_BUCKETS,
        )  # fmt: skip
        self.inbox_depth = Gauge(
            "inbox_depth", "Updates accepted but not handled yet, all workers (read at scrape).",
            namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.inbox_claim_seconds = Histogram(
            "inbox_claim_seconds", "Time from an update's arrival to the start of its processing.",
            namespace=NAMESPACE, registry=r, buckets=CLAIM_BUCKETS,
        )  # fmt: skip
        self.dead_letters = Counter(
            "dead_letters", "Updates given up, by reason (attempts, deadline, error) and bot; "
            "with DATABASE_URL each is kept in the dead_letters table.",
            ["reason", "bot"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.tool_calls = Counter(
            "tool_calls", "Tool calls run for replies, by tool (\"unknown\": a name the "
            "deployment's tools do not have) and outcome (ok, timeout, invalid_arguments, "
            "unknown_tool, unavailable, failed).",
            ["tool", "outcome"], namespace=NAMESPACE, registry=r,
        )  # fmt: skip
        self.tool_duration = Histogram(
            "tool_call_duration_seconds", "Duration of one tool call, by tool.",
            ["tool"], namespace=NAMESPACE, registry=r, buckets=TOOL_BUCKETS,
        )  # fmt: skip
        self._tool_names: ToolNames = frozenset
        self._depth_source: DepthSource | None = None
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}

    def labelled(self, metric: Counter | Histogram, *values: str) -> Any:
        """`metric.labels(*values)` (values in the order of its label names), looked up
        once: the series appears on its first use as with `labels`, but every round
        does not pay prometheus_client's label checks and lock again."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def read_inbox_depth_from(self, source: DepthSource) -> None:
        """Read the inbox depth from `source` at every scrape (set once the inbox exists)."""
        self._depth_source = source

    def record_reply(self, reply: Reply, *, source: str = "api", bot: int = 0) -> None:
        """Count one answered round of the bot of scope `bot` (call it from the bot too,
        with source="telegram")."""
        label = bot_label(bot)
        self.labelled(self.rounds, source, "true" if reply.is_final else "false", label).inc()
        if reply.is_complete:
            self.labelled(self.completed, source, label).inc()

        if not reply.replayed:
            for use in reply.tool_uses:
                self.record_tool_use(use)

    def name_tools_from(self, names: ToolNames) -> None:
        """Label tool calls by the names `names()` gives (the configured tools); until it
        is set every call is labelled "unknown"."""
        self._tool_names = names

    def record_tool_use(self, use: ToolUse) -> None:
        """Count one tool call and its duration (see the module for the labels)."""
        tool = self._tool_label(use)
        outcome = "ok" if use.ok else (use.failure or ToolFailure.FAILED).value
        self.labelled(self.tool_calls, tool, outcome).inc()
        self.labelled(self.tool_duration, tool).observe(max(use.ms, 0) / 1000)

    def _tool_label(self, use: ToolUse) -> str:
        if use.failure is ToolFailure.UNKNOWN_TOOL or not TOOL_NAME.fullmatch(use.name):
            return UNKNOWN_TOOL
        try:
            known = use.name in self._tool_names()
        except Exception:  # the names are a label's guard; a failing source names none
            log.warning("tool names not read for metrics", exc_info=True)
            known = False
        return use.name if known else UNKNOWN_TOOL

    def record_charge(self, charge: Charge) -> None:
        """Count a stored charge's tokens and cost. A model without a price is labelled
        "unpriced": model names can come from API requests, the priced ones from settings."""
        model = charge.model if charge.priced else "unpriced"
        kind = charge.kind.value
        self.labelled(self.charged_tokens, model, kind, "input").inc(charge.usage.prompt_tokens)
        output = self.labelled(self.charged_tokens, model, kind, "output")
        output.inc(charge.usage.completion_tokens)
        self.labelled(self.charged_cost, model, kind).inc(charge.cost)

    def record_quota_refusal(self, limit: Limit, *, bot: int = 0) -> None:
        """Count a turn of the bot of scope `bot` a quota refused (`core.domain.quotas.Limit`:
        a fixed set of labels)."""
        self.labelled(self.quota_refusals, limit.value, bot_label(bot)).inc()

    def record_payment(self, plan: str, stars: int, *, bot: int = 0) -> None:
        """Count a payment kept once to the bot of scope `bot` (`plan`: a plan that bot
        sells, or "none": a fixed set)."""
        label = bot_label(bot)
        self.labelled(self.payments, plan, label).inc()
        self.labelled(self.payment_stars, plan, label).inc(stars)

    def record_refund(self, *, bot: int = 0) -> None:
        """Count a refund of a payment to the bot of scope `bot`."""
        self.labelled(self.refunds, bot_label(bot)).inc()

    def record_checkout_refusal(self, reason: str) -> None:
        """Count a refused pre-checkout (`core.domain.payments.CheckoutRefusal`: fixed)."""
        self.labelled(self.checkouts_refused, reason).inc()

    def record_given_up(self, reason: str, *, bot: int = 0) -> None:
        """Count an update of the bot of scope `bot` given up ("attempts", "deadline" or
        "error")."""
        self.dead_letters.labels(reason=reason, bot=bot_label(bot)).inc()

    def record_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http_requests.labels(route=route, method=method, status=str(status)).inc()
        self.http_duration.labels(route=route).observe(seconds)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """(body, content type) in the exposition format the scraper asked for."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    async def scrape(self, accept: str | None = None) -> tuple[bytes, str]:
        """`render` after reading the values that need a query (the inbox depth)."""
        source = self._depth_source
        if source is not None:
            try:
                async with asyncio.timeout(DEPTH_TIMEOUT):
                    value = source()
                    depth = await value if inspect.isawaitable(value) else value
                self.inbox_depth.set(depth)
            except Exception as exc:  # a scrape reports what it can; NaN says "unknown"
                log.warning("inbox depth not read: %s", exc)
                self.inbox_depth.set(math.nan)
        return self.render(accept)


class MeteredCompleter:
    """A `core.domain.ports.Completer` that measures the one it wraps: latency, errors, tokens."""

    def __init__(self, inner: Completer, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    @property
    def inner(self) -> Completer:
        return self._inner

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        metrics = self._metrics
        started = time.perf_counter()
        first = True

        async def timed_delta(piece: str) -> None:
            nonlocal first
            if first:
                first = False
                metrics.model_first_token.observe(time.perf_counter() - started)
            if on_delta is not None:
                await on_delta(piece)

        try:
            completion = await self._inner.complete(request, timed_delta)
        except ModelError as exc:
            metrics.model_latency.labels(outcome="error").observe(time.perf_counter() - started)
            metrics.model_errors.labels(kind=str(exc.kind)).inc()
            raise
        metrics.labelled(metrics.model_latency, "ok").observe(time.perf_counter() - started)
        usage = completion.usage
        source = "estimated" if usage.estimated else "reported"
        metrics.labelled(metrics.tokens, "prompt", source).inc(usage.prompt_tokens)
        metrics.labelled(metrics.tokens, "completion", source).inc(usage.completion_tokens)
        return completion

    async def close(self) -> None:
        """Close the wrapped completer when it has a `close` (as `OpenAICompleter` does)."""
        close: Any = getattr(self._inner, "close", None)
        if close is not None:
            await close()
