"""Persistence: the `ConsultationStore` port on SQLite (`storage.sqlite`, the default) and on
PostgreSQL (`storage.postgres`, for one or several workers), what a cluster of several
workers shares on PostgreSQL (`storage.postgres.cluster`), and what both backends share:
the row mapping (`storage.rows`), the idempotency keys (`storage.idempotency`), the
start-up failure (`storage.errors`) and the SQL both run (`storage.statements`).
Each backend keeps the same tables with the same meaning."""
