"""The store's start-up failure, the same on both backends."""

from __future__ import annotations

from core.domain.errors import StoreUnavailable


class DatabaseUnusable(StoreUnavailable):
    """The database cannot be opened at all: start-up must stop with this message."""
