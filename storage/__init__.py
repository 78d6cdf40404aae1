"""Persistence of consultations and chat settings in SQLite (the `ConsultationStore` port)."""

from storage.faults import DatabaseUnusable
from storage.sqlite import SqliteStore

__all__ = ["DatabaseUnusable", "SqliteStore"]
