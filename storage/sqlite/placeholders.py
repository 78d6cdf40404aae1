"""The SQLite form of the statements both stores run (`storage.statements`)."""


def sqlite_sql(statement: str) -> str:
    """A shared statement with SQLite's numbered parameters (`?1`) for PostgreSQL's (`$1`):
    the same parameter by number, so the arguments are passed in the same order on both."""
    return statement.replace("$", "?")
