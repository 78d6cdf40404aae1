"""The idempotency keys' statements (`storage.idempotency` runs them on both stores)."""

CLAIM = (
    "INSERT INTO idempotency_keys (client, key, fingerprint, created_at, owner, lease_until)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (client, key) DO UPDATE"
    " SET owner = excluded.owner, lease_until = excluded.lease_until"
    " WHERE idempotency_keys.fingerprint = excluded.fingerprint"
    " AND idempotency_keys.response IS NULL"
    " AND (idempotency_keys.lease_until IS NULL OR idempotency_keys.lease_until < $4)"
    " RETURNING session_id"
)
"""Claim a key, or take over an abandoned claim of the same request (both stores)."""

FIND = (
    "SELECT fingerprint, session_id, response, lease_until FROM idempotency_keys"
    " WHERE client = $1 AND key = $2"
)

RENEW = (
    "UPDATE idempotency_keys SET lease_until = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL RETURNING 1"
)

ATTACH = (
    "UPDATE idempotency_keys SET session_id = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL RETURNING 1"
)

RELEASE_UNOPENED = (
    "DELETE FROM idempotency_keys"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND session_id IS NULL"
)

RELEASE = (
    "UPDATE idempotency_keys SET owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND owner = $3"
)

PURGE_UNOPENED = (
    "DELETE FROM idempotency_keys WHERE session_id IS NULL AND created_at < $1"
    " AND (lease_until IS NULL OR lease_until < $1)"
)
"""Claims whose holder died before opening a session (the retention purge drops them)."""

SAVE = (
    "UPDATE idempotency_keys SET response = $3, owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND response IS NULL"
)
