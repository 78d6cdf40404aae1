"""The consultation store on one SQLite file (aiosqlite): one writer thread that batches
writes into shared commits, a reader connection that sees only committed data."""
