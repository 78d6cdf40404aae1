"""The consultation store on PostgreSQL (asyncpg): pooled connections, group commit of the
hot statements, migrations applied once when several workers start together."""
