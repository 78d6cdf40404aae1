"""Persistence of consultations and chat settings in SQLite (the `ConsultationStore` port)."""

from storage.sqlite import SqliteStore
from storage.statements import ActiveConsultationExists

__all__ = ["ActiveConsultationExists", "SqliteStore"]
