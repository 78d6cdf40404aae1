"""The statements on the bots table (`m031_bots`, `m036_bot_api_tokens`) both stores run."""

BOT_COLUMNS = (
    "SELECT id, telegram_id, username, label, token_cipher, token_tail, enabled, settings,"
    " created_at, updated_at, removed_at, api_token_hash FROM bots"
)
SELECT_BOTS = f"{BOT_COLUMNS} WHERE removed_at IS NULL ORDER BY id"
SELECT_ALL_BOTS = f"{BOT_COLUMNS} ORDER BY id"
SELECT_BOT = f"{BOT_COLUMNS} WHERE id = $1"
SELECT_BOT_BY_TELEGRAM_ID = f"{BOT_COLUMNS} WHERE telegram_id = $1"
COUNT_BOTS = "SELECT COUNT(*) FROM bots WHERE removed_at IS NULL"

INSERT_BOT = (
    "INSERT INTO bots (telegram_id, username, label, token_cipher, token_tail, enabled,"
    " settings, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)"
    " RETURNING id"
)
REVIVE_BOT = (
    "UPDATE bots SET username = $2, label = $3, token_cipher = $4, token_tail = $5,"
    " enabled = $6, settings = $7, created_at = $8, updated_at = $8, removed_at = NULL,"
    " api_token_hash = NULL WHERE telegram_id = $1 AND removed_at IS NOT NULL RETURNING id"
)
"""A removed bot added again: its row, so its id (its scope) and what it kept, come back
(its API token does not: removing a bot revoked it)."""

UPDATE_BOT = (
    "UPDATE bots SET enabled = $2, settings = $3, label = $4, updated_at = $5"
    " WHERE id = $1 AND removed_at IS NULL"
)
REMOVE_BOT = (
    "UPDATE bots SET enabled = $2, removed_at = $3, updated_at = $3, api_token_hash = NULL"
    " WHERE id = $1 AND removed_at IS NULL RETURNING id"
)
"""$2 is false: a removed bot is disabled too (one row read tells a watcher both)."""

SET_API_TOKEN = (
    "UPDATE bots SET api_token_hash = $2, updated_at = $3"
    " WHERE id = $1 AND removed_at IS NULL RETURNING id"
)
"""$2: the SHA-256 of the bot's API token in hex, or NULL (none)."""
TOKEN_TAKEN = "SELECT id FROM bots WHERE api_token_hash = $1 AND id <> $2"

BOT_API_TOKENS_MIGRATION = (
    "ALTER TABLE bots ADD COLUMN api_token_hash TEXT",
    "CREATE UNIQUE INDEX bots_api_token ON bots (api_token_hash) WHERE api_token_hash IS NOT NULL",
)
"""m036_bot_api_tokens, the same on both stores."""
