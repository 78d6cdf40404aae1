"""The HTTP side: JSON API (seed 003), Telegram webhook, health and Prometheus metrics."""

from api.app import build_web_app, start_web_server
from api.metrics import MeteredCompleter, Metrics

__all__ = ["MeteredCompleter", "Metrics", "build_web_app", "start_web_server"]
