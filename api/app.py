"""The aiohttp application: HTTP API, Telegram webhook, health and metrics on one server.

Invariants: every response this server writes on its own behalf is JSON (errors
included: unknown route, wrong method, body too large, a crash, a request the HTTP
parser refuses — see `api.server`; under `/v1/` in the OpenAI error shape); `/api/*` and
`/v1/*` need `Authorization: Bearer <API_TOKEN>` when a token is configured, or a stored
bot's own API token, which pins the request to that bot (`api.bots`); they are
limited to API_RATE_LIMIT_PER_MINUTE requests per client (the token, or the address
without one); no token is ever logged or written back; `/healthz` and `/metrics` never are
(probes and scrapers carry no secrets; they reveal no data); each request is counted
by route template and status code.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from api.bots import PINNED_KEY, BotEngines, OwnBotOnly
from api.chat import CLIENT_KEY, ChatEndpoints
from api.config import ApiConfig
from api.errors import ApiError, from_http, json_response, store_unavailable
from api.export import ExportEndpoint
from api.exposure import check_exposure
from api.forget import ForgetEndpoint
from api.idempotency import KeyStore
from api.memory import MemoryEndpoints
from api.openai_compat.errors import OpenAIError, refusal_response
from api.openai_compat.models import model_ids
from api.openai_compat.routes import OpenAIEndpoints
from api.openapi import build_openapi
from api.ratelimit import RateLimiter
from api.server import ApiRunner, close_unread, name_the_server, runner_options
from api.stats import StatsEndpoint
from api.webhook import TelegramApp, TelegramWebhook, UpdateLog, UpdateSink
from core.domain.bots import api_token_digest
from core.domain.errors import StoreUnavailable
from core.domain.ports import ChatLocks
from core.domain.tools import ToolServerStatus
from core.primitives.intake_gate import IntakeGate
from core.turns.engine import Engine
from core.turns.sales_figures import StarsFigures
from core.turns.transcript import TranscriptLanguages
from media.intake import Intake
from telemetry.metrics import Metrics
from telemetry.supervision import LoopRegistry

log = logging.getLogger(__name__)

PING_TIMEOUT = 2.0
METRICS_KEY = web.AppKey("metrics", Metrics)
WEBHOOK_KEY = web.AppKey("webhook", TelegramWebhook)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Pingable(Protocol):
    """What `/healthz` needs of the store."""

    async def ping(self) -> bool: ...


class ApiStore(Pingable, KeyStore, UpdateLog, Protocol):
    """The store as the HTTP side uses it: health, and idempotency keys."""


ToolStatuses = Callable[[], Sequence[ToolServerStatus]]
"""Where each configured tool server stands now (the composition root's toolbox)."""


def no_tool_servers() -> Sequence[ToolServerStatus]:
    return ()


def tool_server_body(status: ToolServerStatus) -> dict[str, object]:
    """One tool server as `/healthz` shows it (`api.schemas.ToolServerOut`)."""
    return {
        "name": status.name,
        "state": status.state,
        "tools": status.tools,
        "error": status.error,
    }


def build_web_app(
    config: ApiConfig,
    engine: Engine,
    *,
    document_languages: TranscriptLanguages,
    store: ApiStore | None = None,
    telegram_application: TelegramApp | None = None,
    metrics: Metrics | None = None,
    update_sink: UpdateSink | None = None,
    session_locks: ChatLocks | None = None,
    intake: Intake | None = None,
    loops: LoopRegistry | None = None,
    mounts: Sequence[tuple[str, web.Application]] = (),
    tool_statuses: ToolStatuses = no_tool_servers,
    stars: StarsFigures | None = None,
    bots: BotEngines | None = None,
    turn_intake: IntakeGate | None = None,
) -> web.Application:
    """The routes this deployment serves: the API when it is enabled, the webhook when
    one is configured and an application is given, `/healthz` and `/metrics` always,
    and each of `mounts` (a prefix and the application serving it, such as the
    operator's console at `/admin`). An export's labels are in one of
    `document_languages` (`api.export`).
    With an `update_sink` the webhook hands updates to it (see `api.webhook`).

    `/healthz` is 200 only while the store answers, a model is configured and each of the
    process's long-lived `loops` is doing its job (not ended, not stuck, making progress);
    its body names every loop with "ok" or why not, and each configured tool server
    (`tool_statuses`) with its state and how many tools it offers: a tool server that is
    down leaves the status "ok", since consultations go on without its tools.

    Without a `store` to ping, `/healthz` reports 503: healthy only when proven; without
    one, `Idempotency-Key` is refused. Without an `intake`, requests with attachments are
    refused (ATTACHMENT_REFUSED); with one, the chat endpoints admit bodies large enough
    for a file at its limit (`api.attachments.chat_body_limit`), every other route keeps
    API_MAX_BODY_BYTES.

    `bots` serves the stored bots a request names (`api.bots`; None: `engine`'s, the
    deployment's own bot, alone). `turn_intake` is the process's intake gate, which the
    rounds of both chat APIs pass as the bot's updates do (None: no gate).
    """
    metrics = metrics or Metrics()
    token = config.token
    limiter = RateLimiter(config.rate_limit_per_minute)
    served = bots if bots is not None else OwnBotOnly(engine)
    app = web.Application(
        client_max_size=config.max_body_bytes,
        middlewares=[_metered(metrics), _json_errors, _gate(token, limiter, served)],
    )
    name_the_server(app)
    app[METRICS_KEY] = metrics
    if config.enabled:
        chat = ChatEndpoints(
            engine,
            metrics,
            config,
            keys=store,
            locks=session_locks,
            intake=intake,
            bots=served,
            turn_intake=turn_intake,
        )
        document = build_openapi(
            config,
            with_token=token is not None,
            intake=intake,
            languages=document_languages.codes,
            openai_models=model_ids(engine.settings.roles()),
        )

        async def openapi(request: web.Request) -> web.Response:
            return json_response(document)

        app.on_shutdown.append(chat.drain)
        app.router.add_post("/api/chat", chat.chat)
        app.router.add_post("/api/chat/stream", chat.stream)
        app.router.add_get("/api/sessions/{session_id}", chat.session)
        app.router.add_delete("/api/sessions/{session_id}", ForgetEndpoint(served).delete_session)
        app.router.add_get(
            "/api/sessions/{session_id}/export", ExportEndpoint(served, document_languages).export
        )
        memory = MemoryEndpoints(served)
        app.router.add_get("/api/users/{user_id}/memory", memory.facts)
        app.router.add_delete("/api/users/{user_id}/memory", memory.forget)
        app.router.add_delete("/api/users/{user_id}/memory/{fact_id}", memory.delete)
        app.router.add_get("/api/stats", StatsEndpoint(engine.figures, stars).stats)
        app.router.add_get("/api/openapi.json", openapi)
        compatible = OpenAIEndpoints(
            engine,
            metrics,
            config,
            budget=chat.budget,
            intake=intake,
            bots=served,
            turn_intake=turn_intake,
        )
        app.on_shutdown.append(compatible.drain)
        app.router.add_get("/v1/models", compatible.models)
        app.router.add_get("/v1/models/{model_id}", compatible.model)
        app.router.add_post("/v1/chat/completions", compatible.completions)
    if telegram_application is not None and config.webhook is not None:
        webhook = TelegramWebhook(
            telegram_application, config.webhook.secret, seen=store, sink=update_sink
        )
        app.router.add_post(config.webhook.path, webhook.handle)
        app[WEBHOOK_KEY] = webhook

    async def health(request: web.Request) -> web.Response:
        store_ok = await _ping(store)
        model = config.model or None
        problems = loops.problems() if loops is not None else {}
        names = loops.names() if loops is not None else []
        ok = store_ok and model is not None and not problems
        body = {
            "status": "ok" if ok else "unavailable",
            "store": store_ok,
            "model": model,
            "loops": {name: problems.get(name, "ok") for name in names},
            "tools": [tool_server_body(status) for status in tool_statuses()],
        }
        return json_response(body, status=200 if ok else 503)

    async def metrics_text(request: web.Request) -> web.Response:
        body, content_type = await metrics.scrape(request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app.router.add_get("/healthz", health)
    app.router.add_get("/metrics", metrics_text)
    for prefix, mounted in mounts:
        app.add_subapp(prefix, mounted)
    return app


async def start_web_server(
    config: ApiConfig,
    engine: Engine,
    *,
    document_languages: TranscriptLanguages,
    store: ApiStore,
    metrics: Metrics,
    telegram_application: TelegramApp | None = None,
    update_sink: UpdateSink | None = None,
    session_locks: ChatLocks | None = None,
    intake: Intake | None = None,
    loops: LoopRegistry | None = None,
    mounts: Sequence[tuple[str, web.Application]] = (),
    tool_statuses: ToolStatuses = no_tool_servers,
    stars: StarsFigures | None = None,
    bots: BotEngines | None = None,
    turn_intake: IntakeGate | None = None,
) -> web.AppRunner:
    """Serve on the configured host and port; with a webhook, then register it with Telegram.

    `metrics` is the process's registry, so the bot, the model clients and the API
    report into one `/metrics`.
    """
    app = build_web_app(
        config,
        engine,
        document_languages=document_languages,
        store=store,
        telegram_application=telegram_application,
        metrics=metrics,
        update_sink=update_sink,
        session_locks=session_locks,
        intake=intake,
        loops=loops,
        mounts=mounts,
        tool_statuses=tool_statuses,
        stars=stars,
        bots=bots,
        turn_intake=turn_intake,
    )
    check_exposure(config)
    runner = ApiRunner(app, shutdown_timeout=10.0, **runner_options(config))
    await runner.setup()
    try:
        await web.TCPSite(runner, config.host, config.port).start()
        webhook = app.get(WEBHOOK_KEY)
        if webhook is not None and config.webhook is not None:
            await webhook.register(
                config.webhook.url, max_connections=config.max_connections_per_address
            )
    except BaseException:
        await runner.cleanup()
        raise
    log.info("HTTP server on %s:%d", config.host, config.port)
    return runner


async def _ping(store: Pingable | None) -> bool:
    if store is None:
        return False
    try:
        return bool(await asyncio.wait_for(store.ping(), PING_TIMEOUT))
    except Exception:
        log.warning("health check: the store did not answer", exc_info=True)
        return False


def _gate(token: str | None, limiter: RateLimiter, bots: BotEngines) -> Any:
    expected = token.encode() if token else None
    # The client a request counts for: the token's holder, or the address without a token.
    token_client = "token:" + hashlib.sha256(expected).hexdigest()[:32] if expected else None

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        """Refuse `/api/*` and `/v1/*` without the configured bearer token or a bot's own
        (which pins the request to its bot), or over the rate limit."""
        if not request.path.startswith(_GATED):
            return await handler(request)
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        # Headers are decoded with surrogateescape: bytes that are not UTF-8 round-trip.
        presented = given.strip().encode("utf-8", "surrogateescape")
        bearer = scheme.lower() == "bearer" and bool(presented)
        client = None
        if expected is not None and bearer and hmac.compare_digest(presented, expected):
            client = token_client
        elif bearer:  # a bot's own token? looked up by its digest, never compared plain
            digest = api_token_digest(given.strip())
            pinned = await bots.pinned(digest)
            if pinned is not None:
                request[PINNED_KEY] = pinned
                client = "token:" + digest[:32]
        if client is None and expected is not None:
            error = ApiError(
                "UNAUTHORIZED",
                "a valid bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
            return _refused(request, error)
        client = client or f"addr:{request.remote}"
        wait = limiter.retry_after(client)
        if wait:
            error = ApiError(
                "RATE_LIMITED",
                f"too many requests: try again in {wait} s",
                headers={"Retry-After": str(wait)},
            )
            return _refused(request, error)
        request[CLIENT_KEY] = client
        return await handler(request)

    return gate


_GATED = ("/api/", "/v1/")
_OPENAI_PREFIX = "/v1/"


def _refused(request: web.Request, error: ApiError) -> web.Response:
    """The refusal's response: the OpenAI error object on `/v1/` routes, else the API's."""
    if request.path.startswith(_OPENAI_PREFIX):
        return refusal_response(error)
    return error.response()


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Turn every failure into the API's JSON error shape (the OpenAI one under `/v1/`)."""
    try:
        return await handler(request)
    except OpenAIError as exc:
        return exc.response()
    except ApiError as exc:
        if exc.close:  # refused before its body was read: the body stays unread
            close_unread(request)
        return _refused(request, exc)
    except RequestPayloadError as exc:  # a body that cannot be decoded: the client's fault
        log.info("unreadable body on %s %s (%s)", request.method, request.path, exc)
        error = ApiError("VALIDATION_ERROR", "the request body could not be read")
        response = _refused(request, error)
        response.force_close()  # where the next request would start is unknown
        return response
    except StoreUnavailable as exc:
        log.warning("%s %s: %s", request.method, request.path, exc)
        return _refused(request, store_unavailable())
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        error = from_http(exc)
        if "Allow" in exc.headers:
            error.headers["Allow"] = exc.headers["Allow"]
        return _refused(request, error)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _refused(request, ApiError("INTERNAL_ERROR", "internal error"))


def _metered(metrics: Metrics) -> Any:
    @web.middleware
    async def metered(request: web.Request, handler: Any) -> web.StreamResponse:
        """Count the request by route template (never the raw path) and status."""
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        finally:
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else "unmatched"
            method = request.method if request.method in _METHODS else "OTHER"
            metrics.record_request(route, method, status, time.perf_counter() - started)

    return metered
