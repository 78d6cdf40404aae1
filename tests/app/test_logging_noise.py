"""Which loggers speak at the default LOG_LEVEL: the product's own lines, not the libraries'."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from app.logs import configure_logging

CHATTY = ("openai._base_client", "httpx", "httpx2", "httpcore", "aiohttp.access")


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    """Leave the process's logger levels as the test found them."""
    names = ["", "openai", *CHATTY, "api.access", "aiosqlite", "telegram.ext.Updater"]
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize("name", CHATTY)
def test_library_lines_are_quiet_at_info(name: str) -> None:
    """The SDK's "Retrying request", per-call "HTTP Request" lines and aiohttp's own access
    log are off at INFO; the API's access log is on."""
    configure_logging("INFO")

    assert not logging.getLogger(name).isEnabledFor(logging.INFO)
    assert logging.getLogger("api.access").isEnabledFor(logging.INFO)


def test_debug_lets_them_speak() -> None:
    """LOG_LEVEL=DEBUG is for seeing everything, the libraries included."""
    configure_logging("DEBUG")

    assert all(logging.getLogger(name).isEnabledFor(logging.DEBUG) for name in CHATTY)
    assert not logging.getLogger("aiosqlite").isEnabledFor(logging.DEBUG)  # users' messages
