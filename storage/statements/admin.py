"""The operator console's statements both stores run: its sessions and its audit log."""

SESSION_EXPIRY = "SELECT expires_at FROM admin_sessions WHERE token_hash = $1"
DROP_EXPIRED_SESSIONS = "DELETE FROM admin_sessions WHERE expires_at <= $1"
"""The sessions expired by $1 (through the index on expiry)."""
INSERT_SESSION = (
    "INSERT INTO admin_sessions (token_hash, created_at, expires_at) VALUES ($1, $2, $3)"
)
AUDIT_PAGE = (
    "SELECT at, actor, action, target, detail, id FROM admin_audit"
    " WHERE id < $1 ORDER BY id DESC LIMIT $2"
)
"""The audit log before id $1, newest first, $2 entries at most."""
INSERT_AUDIT = (
    "INSERT INTO admin_audit (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)"
)
