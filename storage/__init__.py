"""Persistence: the `ConsultationStore` port on SQLite (`storage.sqlite`, the default) and on
PostgreSQL (`storage.postgres`, for one or several workers), PostgreSQL's coordination of
several workers (`storage.postgres.coordination`), and what both backends share
(`storage.shared`). Each backend keeps the same tables with the same meaning."""
