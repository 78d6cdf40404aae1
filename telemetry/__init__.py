"""Measuring the running process: Prometheus metrics and the event loop's lateness.

Used by the composition root (model clients), the bot (replies) and the HTTP side
(requests); it depends on `core` only.
"""
