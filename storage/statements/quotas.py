"""The quota statements both stores run: turns' token holds, consultations started per
person and day, and per-person overrides."""

RESIZE_HOLD = "UPDATE quota_holds SET tokens = $2, expires_at = $3 WHERE id = $1"
RELEASE_HOLD = "DELETE FROM quota_holds WHERE id = $1"
STARTED = "SELECT started FROM consultation_starts WHERE person = $1 AND day = $2"
SELECT_OVERRIDE = "SELECT daily_tokens FROM quota_overrides WHERE person = $1"
UPSERT_OVERRIDE = (
    "INSERT INTO quota_overrides (person, daily_tokens, updated_at) VALUES ($1, $2, $3)"
    " ON CONFLICT (person) DO UPDATE SET daily_tokens = excluded.daily_tokens,"
    " updated_at = excluded.updated_at"
)
