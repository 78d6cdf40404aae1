"""The statements on consultations, their messages and their chats' settings that both
stores run."""

from storage.rows import CONSULTATION_COLUMNS, MESSAGE_INSERT_COLUMNS

SELECT_CONSULTATION = f"SELECT {CONSULTATION_COLUMNS} FROM consultations"
SELECT_ACTIVE = f"{SELECT_CONSULTATION} WHERE chat_key = $1 AND status = 'active'"
"""The chat's active consultation. The literal 'active' (not a parameter) lets the planner
use the partial unique index."""
SELECT_BY_ID = f"{SELECT_CONSULTATION} WHERE id = $1"
SELECT_LATEST = (
    f"{SELECT_CONSULTATION} WHERE chat_key = $1 ORDER BY created_at DESC, id DESC LIMIT 1"
)
SELECT_RECENT = (
    "SELECT id, created_at, last_activity_at, substr(initial_request, 1, $1), status,"
    " current_round, max_rounds FROM consultations WHERE chat_key = $2"
    " ORDER BY created_at DESC, id DESC LIMIT $3"
)
"""A chat's history, newest first: the index on (chat_key, created_at, id) gives the rows in
order, so the read stops after `limit` ($3) of them."""
SELECT_LATEST_STATUS = (
    "SELECT status FROM consultations WHERE chat_key = $1"
    " ORDER BY last_activity_at DESC, created_at DESC LIMIT 1"
)

INSERT_CONSULTATION = (
    f"INSERT INTO consultations ({CONSULTATION_COLUMNS}, last_seq)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
    " $15, $16, $17, $18)"
)
"""A consultation: `consultation_values`, then its last position (its messages' count)."""
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_INSERT_COLUMNS})"
INSERT_MESSAGE_VALUES = (
    f"{INSERT_MESSAGE} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
)
"""A message at a given position: consultation id, seq, then `message_values`."""

SELECT_CHAT_SETTINGS = (
    "SELECT max_rounds, role, system_prompt, language, model FROM chat_settings WHERE chat_key = $1"
)
UPSERT_CHAT_SETTINGS = (
    "INSERT INTO chat_settings (chat_key, max_rounds, role, system_prompt, language,"
    " model, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (chat_key)"
    " DO UPDATE SET max_rounds = excluded.max_rounds, role = excluded.role,"
    " system_prompt = excluded.system_prompt, language = excluded.language,"
    " model = excluded.model, updated_at = excluded.updated_at"
)

WITHDRAW_MESSAGE = (
    "DELETE FROM messages WHERE consultation_id = $1 AND turn_id = $2 AND role = 'user'"
    " AND NOT EXISTS (SELECT 1 FROM messages a WHERE a.consultation_id = $1"
    " AND a.role = 'assistant' AND a.seq > messages.seq)"
    " RETURNING seq"
)
"""Delete a turn's user message if no reply followed it; its position when one went."""
WITHDRAW_EMPTY = (
    "DELETE FROM consultations WHERE id = $1"
    " AND NOT EXISTS (SELECT 1 FROM messages WHERE consultation_id = $1)"
)
"""A consultation whose only message was withdrawn goes too (nothing of it is left)."""
WITHDRAW_FIRST = (
    "UPDATE consultations SET initial_request = (SELECT text FROM messages"
    " WHERE consultation_id = $1 AND role = 'user' ORDER BY seq LIMIT 1)"
    " WHERE id = $1 AND $2 < (SELECT MIN(seq) FROM messages"
    " WHERE consultation_id = $1 AND role = 'user')"
)
"""When the withdrawn message was the first one ($2 its position), the next user message
becomes the request the final round is reminded of."""
