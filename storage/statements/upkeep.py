"""The upkeep statements both stores run: re-keying and forgetting a chat, expiring and
purging consultations."""

ACTIVE_IN_CHAT = "SELECT 1 FROM consultations WHERE chat_key = $1 AND status = 'active'"
RESET_ACTIVE_IN_CHAT = (
    "UPDATE consultations SET status = 'reset', ended_at = last_activity_at"
    " WHERE chat_key = $1 AND status = 'active'"
)
"""The chat's active consultation reset, ended at its last activity."""
DELETE_CHAT_SETTINGS = "DELETE FROM chat_settings WHERE chat_key = $1"
DELETE_CHAT_CONSULTATIONS = "DELETE FROM consultations WHERE chat_key = $1"
"""A chat's consultations; their messages and idempotency keys go by ON DELETE CASCADE."""

EXPIRE_IDLE = (
    "UPDATE consultations SET status = 'expired', ended_at = $2"
    " WHERE status = 'active' AND last_activity_at < $1"
)
"""The ACTIVE consultations last active before $1 expired, ended at $2; their last activity
is kept for retention."""
PURGE_ENDED = "DELETE FROM consultations WHERE status != 'active' AND last_activity_at < $1"
"""The ended consultations last active before $1 (messages go by ON DELETE CASCADE)."""
