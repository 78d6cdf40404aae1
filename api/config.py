"""What the HTTP edge needs to know of the deployment, as frozen values.

Built by the composition root from the deployment settings (`app.settings`); the
HTTP side never reads environment settings itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.connection_slots import IPNetwork


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Telegram posts updates to `url`, which the HTTP server serves at `path`."""

    url: str
    secret: str
    path: str = "/telegram/webhook"


@dataclass(frozen=True, slots=True)
class ApiConfig:
    enabled: bool = True  # the JSON API; health, metrics and the webhook are served anyway
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    allow_anonymous: bool = False  # listen beyond loopback without a token
    max_body_bytes: int = 1_000_000
    models: frozenset[str] = frozenset()  # what a request may name in `model`
    max_tokens_limit: int = 8192
    max_input_chars: int = 4000
    max_rounds_limit: int = 10
    rate_limit_per_minute: int = 60  # per client; 0: no limit
    access_log: bool = True
    header_timeout_seconds: float = 10.0  # to read a request's line and headers, in all
    body_timeout_seconds: float = 30.0  # to read its body once the headers are in
    max_connections: int = 256  # open at once; past it a new one is closed when accepted
    max_connections_per_address: int = 32  # open at once from one address (or proxy's client)
    trusted_proxies: tuple[IPNetwork, ...] = ()  # whose X-Forwarded-For names the client
    body_bytes_in_flight: int = 32_000_000  # chat bodies held at once (`api.body_budget`)
    model: str = ""  # the deployment's model, reported by /healthz
    webhook: WebhookConfig | None = None
