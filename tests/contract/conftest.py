"""The store contract suite: every test here that asks for `store` (or `rows`) runs once
per implementation in `tests.store_contract.STORE_KINDS` (SQLite and PostgreSQL), each on a
fresh database of its own (`kind` and `database`, from tests/store_contract.py).

`store` here replaces the SQLite-only `store` of tests/conftest.py; PostgreSQL tests fail
when REQUIRE_POSTGRES is set and the server cannot be reached, and are skipped with one line
otherwise (tests/postgres.py)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from tests.store_contract import Rows, StoreKind

if TYPE_CHECKING:
    from app.stores import Store


@pytest.fixture
async def store(kind: StoreKind, database: str) -> AsyncIterator[Store]:
    """A store of `kind` opened (and migrated) on `database`, closed after the test."""
    opened = await kind.open(database)
    yield opened
    await opened.close()


@pytest.fixture
def rows(kind: StoreKind, database: str) -> Rows:
    """rows(table, **equals): how many rows the database holds, read behind the store."""
    return functools.partial(kind.count, database)
