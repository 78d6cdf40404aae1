"""The SQL both stores run, written once per table family in PostgreSQL's `$n` style; the
SQLite store runs each through `storage.sqlite.sql.sqlite_sql` (`$1` becomes `?1`, the same
numbered parameter). A statement here uses no PostgreSQL-only syntax (no `::` casts, no
arrays): what only one backend can say stays in that backend's own `sql.py`."""
