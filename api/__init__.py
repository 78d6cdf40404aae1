"""The HTTP side: JSON API, Telegram webhook, health and Prometheus metrics."""
