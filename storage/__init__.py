"""Persistence of consultations and chat settings in SQLite (the `ConsultationStore` port)."""

from storage.faults import DatabaseUnusable
from storage.sqlite import SqliteStore
from storage.statements import ActiveConsultationExists

__all__ = ["ActiveConsultationExists", "DatabaseUnusable", "SqliteStore"]
