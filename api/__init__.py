"""The HTTP side: JSON API, Telegram webhook, health and Prometheus metrics."""

from api.app import build_web_app, start_web_server
from api.config import ApiConfig, WebhookConfig

__all__ = ["ApiConfig", "WebhookConfig", "build_web_app", "start_web_server"]
