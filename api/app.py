"""The aiohttp application: HTTP API, Telegram webhook, health and metrics on one server.

Invariants: every response this server writes on its own behalf is JSON (errors
included: unknown route, wrong method, body too large, a crash); `/api/*` needs
`Authorization: Bearer <API_TOKEN>` when a token is configured, `/healthz` and
`/metrics` never do (probes and scrapers carry no secrets; they reveal no data);
each request is counted by route template and status code.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any, Protocol

from aiohttp import web

from api.chat import ChatEndpoints
from api.errors import ApiError, from_http, json_response
from api.metrics import Metrics
from api.openapi import build_openapi
from api.webhook import TelegramApp, TelegramWebhook
from core.service import ConsultationService
from core.settings import ConfigError, Settings

log = logging.getLogger(__name__)

PING_TIMEOUT = 2.0
METRICS_KEY = web.AppKey("metrics", Metrics)
WEBHOOK_KEY = web.AppKey("webhook", TelegramWebhook)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Pingable(Protocol):
    """What `/healthz` needs of the store (`storage.SqliteStore` has it)."""

    async def ping(self) -> bool: ...


def build_web_app(
    settings: Settings,
    service: ConsultationService,
    *,
    store: Pingable | None = None,
    telegram_application: TelegramApp | None = None,
    metrics: Metrics | None = None,
) -> web.Application:
    """The routes this deployment serves: the API when API_ENABLED, the webhook when
    WEBHOOK_URL is set and an application is given, `/healthz` and `/metrics` always.

    Without a `store` to ping, `/healthz` reports 503: healthy only when proven.
    """
    metrics = metrics or Metrics()
    token = settings.secret("api_token")
    app = web.Application(
        client_max_size=settings.api_max_body_bytes,
        middlewares=[_metered(metrics), _json_errors, _bearer(token)],
    )
    app[METRICS_KEY] = metrics
    if settings.api_enabled:
        chat = ChatEndpoints(
            service,
            metrics,
            max_rounds_limit=settings.max_rounds_limit,
            max_body_bytes=settings.api_max_body_bytes,
        )
        document = build_openapi(
            max_rounds_limit=settings.max_rounds_limit, with_token=token is not None
        )

        async def openapi(request: web.Request) -> web.Response:
            return json_response(document)

        app.on_shutdown.append(chat.drain)
        app.router.add_post("/api/chat", chat.chat)
        app.router.add_post("/api/chat/stream", chat.stream)
        app.router.add_get("/api/openapi.json", openapi)
    if telegram_application is not None and settings.webhook_url:
        secret = settings.secret("webhook_secret")
        if not secret:
            raise ConfigError("WEBHOOK_SECRET: required when WEBHOOK_URL is set")
        webhook = TelegramWebhook(telegram_application, secret)
        app.router.add_post(settings.webhook_path, webhook.handle)
        app[WEBHOOK_KEY] = webhook

    async def health(request: web.Request) -> web.Response:
        store_ok = await _ping(store)
        model = settings.llm_model or None
        ok = store_ok and model is not None
        body = {"status": "ok" if ok else "unavailable", "store": store_ok, "model": model}
        return json_response(body, status=200 if ok else 503)

    async def metrics_text(request: web.Request) -> web.Response:
        body, content_type = metrics.render(request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app.router.add_get("/healthz", health)
    app.router.add_get("/metrics", metrics_text)
    return app


async def start_web_server(
    settings: Settings, runtime: Any, telegram_application: TelegramApp | None
) -> web.AppRunner:
    """Serve on API_HOST:API_PORT; in webhook mode, then register the webhook with Telegram.

    `runtime` is a `bot.runtime.Runtime`; its `metrics` attribute is used when present,
    so the bot and the API report into one registry.
    """
    app = build_web_app(
        settings,
        runtime.service,
        store=runtime.store,
        telegram_application=telegram_application,
        metrics=getattr(runtime, "metrics", None),
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=10.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.api_host, settings.api_port).start()
        webhook = app.get(WEBHOOK_KEY)
        if webhook is not None and settings.webhook_url:
            await webhook.register(settings.webhook_url)
    except BaseException:
        await runner.cleanup()
        raise
    log.info("HTTP server on %s:%d", settings.api_host, settings.api_port)
    return runner


async def _ping(store: Pingable | None) -> bool:
    if store is None:
        return False
    try:
        return bool(await asyncio.wait_for(store.ping(), PING_TIMEOUT))
    except Exception:
        log.warning("health check: the store did not answer", exc_info=True)
        return False


def _bearer(token: str | None) -> Any:
    expected = token.encode() if token else None

    @web.middleware
    async def bearer(request: web.Request, handler: Any) -> web.StreamResponse:
        """Refuse `/api/*` without the configured bearer token."""
        if expected is not None and request.path.startswith("/api/"):
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), expected
            ):
                error = ApiError("UNAUTHORIZED", "a valid bearer token is required")
                return error.response(headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return bearer


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Turn every failure into the API's JSON error shape."""
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return from_http(exc).response(headers=headers)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return ApiError("INTERNAL_ERROR", "internal error").response()


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
