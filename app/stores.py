"""The store factory: which `ConsultationStore` a deployment uses, from its settings.

SQLite (one file, DB_PATH) is the embedded default; DATABASE_URL=postgresql://… selects
PostgreSQL, shared by any number of worker processes. The factory is the one place that
knows the storage implementations, so another store is added here and nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from app.settings import Settings
from app.startup import StartupError
from core.domain.ports import BotRegistry, ConsultationStore, PaymentBook
from storage.errors import DatabaseUnusable
from storage.knowledge import VectorStore
from storage.sqlite.store import SqliteStore

if TYPE_CHECKING:  # a type only: a bot without the HTTP server never loads it
    from admin.ports import AdminStore
    from api.app import ApiStore
    from bot.transport.round_keyboards import KeyboardMessages

    class Store(ConsultationStore, ApiStore, AdminStore, KeyboardMessages, Protocol):
        """The store as a whole process uses it: the engine's port, what the HTTP side
        needs (health, idempotency keys, seen Telegram updates), what the operator's
        console needs (its list, sessions and audit log), which message carries each
        Telegram conversation's round keyboard, the knowledge base kept in the same
        database (`knowledge`: its search for the engine, its documents for the
        operator), the bots the operator added (`bots`), the payments in Stars and people's plans
        (`payments`), and closing it."""

        @property
        def knowledge(self) -> VectorStore: ...

        @property
        def bots(self) -> BotRegistry: ...

        @property
        def payments(self) -> PaymentBook: ...

        async def close(self) -> None: ...


async def open_store(settings: Settings) -> Store:
    """Open (and migrate) the configured store; an unusable one is a `StartupError`."""
    url = settings.secret("database_url")
    if url:
        from storage.postgres.store import PostgresStore  # asyncpg: only with DATABASE_URL

        try:
            return await PostgresStore.open(url, pool_size=settings.database_pool_size)
        except DatabaseUnusable as exc:
            raise StartupError(f"DATABASE_URL: {exc}") from None
    try:
        return await SqliteStore.open(settings.db_path)
    except DatabaseUnusable as exc:
        raise StartupError(f"DB_PATH: {exc}") from None
