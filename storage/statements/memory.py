"""The statements on people's memory that both stores run."""

FORGET_IN_CONSULTATIONS = (
    "UPDATE consultations SET memory_owner = NULL, memory_facts = NULL"
    " WHERE person = $1 AND memory_owner IS NOT NULL"
)
"""A person's memory forgotten leaves none in their consultations, whatever their status:
the facts one read when it started are no longer sent to the model in its later rounds,
and it notes no new ones when it completes (it uses no memory from then on). One read of
`consultations_person`."""

FACTS_OF = (
    "SELECT id, text, created_at FROM memory_facts WHERE owner = $1 ORDER BY id DESC LIMIT $2"
)
"""An owner's newest facts ($2 at most), newest first."""
TRIM_FACTS = (
    "DELETE FROM memory_facts WHERE owner = $1 AND id NOT IN"
    " (SELECT id FROM memory_facts WHERE owner = $1 ORDER BY id DESC LIMIT $2)"
)
"""Drop an owner's facts past the newest $2."""

SELECT_PREFERENCES = "SELECT enabled, notice_given FROM memory_preferences WHERE person = $1"
UPSERT_PREFERENCES = (
    "INSERT INTO memory_preferences (person, enabled, notice_given, updated_at)"
    " VALUES ($1, $2, $3, $4) ON CONFLICT (person) DO UPDATE SET enabled = excluded.enabled,"
    " notice_given = excluded.notice_given, updated_at = excluded.updated_at"
)
DELETE_PREFERENCES = "DELETE FROM memory_preferences WHERE person = $1"

SELECT_LANGUAGE = "SELECT language FROM person_languages WHERE person = $1"
UPSERT_LANGUAGE = (
    "INSERT INTO person_languages (person, language, updated_at) VALUES ($1, $2, $3)"
    " ON CONFLICT (person) DO UPDATE SET language = excluded.language,"
    " updated_at = excluded.updated_at"
)
DELETE_LANGUAGE = "DELETE FROM person_languages WHERE person = $1"
