"""The migration ledger's statements both stores run (table `schema_migrations`: one row
per migration applied, under its name)."""

IS_APPLIED = "SELECT 1 FROM schema_migrations WHERE name = $1"
RECORD_APPLIED = "INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)"
