"""The PostgreSQL store's schema: versioned migrations, applied once even when workers start
together.

Invariant: each migration runs at most once per database, in order, in one transaction
with the `schema_migrations` row that records it. Every process applies migrations
under one transaction-scoped advisory lock (`MIGRATION_LOCK`), so when several workers
start at once one applies each migration and the others wait for it, then see it
recorded and skip it.

The store's tables are the SQLite store's, with the same columns, keys and indexes
(tests/storage/test_schema_parity.py compares them): times are seconds since the epoch (double
precision), ids are text, options are the JSON text the engine writes. From `m009` on,
both backends' histories have the same migrations under the same names. The
cluster's tables have a history of their own (`storage.postgres.cluster.schema`); their
first tables came with m003, m004, m006 and m008 here, released before it had one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import asyncpg

from storage.statements.bots import BOT_API_TOKENS_MIGRATION
from storage.statements.migrations import IS_APPLIED, RECORD_APPLIED

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x636F6E73756C74  # "consult": the advisory lock key for migrations

Step = str | Callable[[asyncpg.Connection], Awaitable[object]]
"""A statement, or a function of the migration's connection for what SQL alone cannot say."""
Migration = tuple[str, tuple[Step, ...]]
"""A migration's name (they sort in the order they run) and its steps."""

REQUEST_SEARCH_INDEX = "consultations_search"
REQUEST_SEARCH_MIGRATION = "m021_request_search"
PERSON_ACTIVITY_MIGRATION = "m022_person_activity"
KNOWLEDGE_VECTOR = (
    "setweight(to_tsvector('simple'::regconfig, section), 'A')"
    " || to_tsvector('simple'::regconfig, text)"
)
"""A chunk's words as `knowledge_chunks.search` holds them, its heading path weighted A."""


async def index_request_search(connection: asyncpg.Connection) -> bool:
    """Index the requests' trigrams (`pg_trgm`, a GIN index the console's ILIKE search reads)
    unless they are; False, with a warning, where that cannot be done: the extension is
    not installed on the server or this role may not create it. Search then reads every
    row, slower but with the same results; never a reason not to start.

    Extensions are per database: when another schema's store installed `pg_trgm` first,
    its operator class is named by that schema (dropping that schema drops this index)."""
    exists = await connection.fetchval(
        "SELECT to_regclass(quote_ident(current_schema()) || '.' || $1::text)",
        REQUEST_SEARCH_INDEX,
    )
    if exists is not None:
        return True
    try:
        async with connection.transaction():  # a savepoint: a refusal undoes only this
            await connection.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            schema = await connection.fetchval(
                "SELECT quote_ident(n.nspname) FROM pg_extension e"
                " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
            )
            await connection.execute(
                f"CREATE INDEX {REQUEST_SEARCH_INDEX} ON consultations"
                f" USING gin (initial_request {schema}.gin_trgm_ops)"
            )
    except asyncpg.PostgresError as error:
        log.warning(
            "the console's text search is not indexed and reads every consultation: the"
            " PostgreSQL extension pg_trgm could not be used (%s: %s); install the server's"
            " contrib package or run CREATE EXTENSION pg_trgm as a role allowed to, then"
            " restart",
            type(error).__name__,
            error,
        )
        return False
    return True


BOT_SCOPED_KEYS = (
    ("telegram_updates", "update_id"),
    ("round_keyboards", "chat_id, thread_id"),
    ("inbox", "update_id"),
    ("dead_letters", "update_id"),
    ("undelivered", "chat_id, thread_id"),
    ("flood_waits", "chat_id"),
)
"""The tables keyed by Telegram's own ids, and their keys within a bot (m032). Not the
per-user limits (`rate_limits`, `press_limits`): changing their key would break the
previous release's workers during a rolling restart; their per-bot successors are new
tables of the cluster's (`storage.postgres.cluster.schema` c004_bot_rate_limits,
tests/storage/test_pg_shared.py)."""


MIGRATIONS: list[Migration] = [
    (
        "m001_initial",
        (
            """
            CREATE TABLE consultations (
                id TEXT PRIMARY KEY,
                chat_key TEXT NOT NULL,
                status TEXT NOT NULL,
                max_rounds INTEGER NOT NULL,
                current_round INTEGER NOT NULL DEFAULT 0,
                initial_request TEXT NOT NULL,
                role TEXT,
                system_prompt TEXT,
                options TEXT NOT NULL DEFAULT '{}',
                created_at DOUBLE PRECISION NOT NULL,
                last_activity_at DOUBLE PRECISION NOT NULL,
                started_by BIGINT
            )
            """,
            "CREATE INDEX consultations_chat_status ON consultations (chat_key, status)",
            # At most one ACTIVE consultation per chat, enforced by the database itself.
            "CREATE UNIQUE INDEX consultations_one_active ON consultations (chat_key)"
            " WHERE status = 'active'",
            "CREATE INDEX consultations_status_activity"
            " ON consultations (status, last_activity_at)",
            """
            CREATE TABLE messages (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                consultation_id TEXT NOT NULL
                    REFERENCES consultations (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL,
                author TEXT,
                text TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                prompt_tokens INTEGER,
                completion_tokens INTEGER,
                tokens_estimated BOOLEAN,
                UNIQUE (consultation_id, seq)
            )
            """,
            """
            CREATE TABLE chat_settings (
                chat_key TEXT PRIMARY KEY,
                max_rounds INTEGER,
                role TEXT,
                system_prompt TEXT,
                language TEXT,
                updated_at DOUBLE PRECISION NOT NULL
            )
            """,
            """
            CREATE TABLE idempotency_keys (
                client TEXT NOT NULL,
                key TEXT NOT NULL,
                fingerprint TEXT NOT NULL,
                session_id TEXT NOT NULL
                    REFERENCES consultations (id) ON DELETE CASCADE,
                response TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (client, key)
            )
            """,
            "CREATE INDEX idempotency_keys_session ON idempotency_keys (session_id)",
            """
            CREATE TABLE telegram_updates (
                update_id BIGINT PRIMARY KEY,
                received_at DOUBLE PRECISION NOT NULL
            )
            """,
            "CREATE INDEX telegram_updates_received ON telegram_updates (received_at)",
        ),
    ),
    (
        # The Telegram update a user message came from (`tg:<update_id>`): handling an update
        # twice (a worker died after storing the reply) finds it instead of storing it again.
        "m002_turn_ids",
        (
            "ALTER TABLE messages ADD COLUMN turn_id TEXT",
            "CREATE INDEX messages_turn ON messages (turn_id) WHERE turn_id IS NOT NULL",
        ),
    ),
    (
        # Updates accepted but not yet handled, worked per chat in update_id order by
        # whichever worker holds the chat's advisory lock.
        "m003_inbox",
        (
            """
            CREATE TABLE inbox (
                update_id BIGINT PRIMARY KEY,
                chat_key TEXT NOT NULL,
                payload TEXT NOT NULL,
                received_at DOUBLE PRECISION NOT NULL
            )
            """,
            "CREATE INDEX inbox_chat ON inbox (chat_key, update_id)",
        ),
    ),
    (
        # State every worker must share: per-user rate limits, replies stored but not yet
        # delivered, and Telegram's flood-control waits per chat.
        "m004_shared_state",
        (
            """
            CREATE TABLE rate_limits (
                user_id BIGINT PRIMARY KEY,
                tokens DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                warned_at DOUBLE PRECISION
            )
            """,
            """
            CREATE TABLE undelivered (
                chat_id BIGINT NOT NULL,
                thread_id BIGINT NOT NULL DEFAULT 0,
                reply TEXT NOT NULL,
                language TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (chat_id, thread_id)
            )
            """,
            "CREATE INDEX undelivered_created ON undelivered (created_at)",
            """
            CREATE TABLE flood_waits (
                chat_id BIGINT PRIMARY KEY,
                until DOUBLE PRECISION NOT NULL
            )
            """,
        ),
    ),
    (
        # The position of a consultation's last message, kept on its row: appending is then
        # one statement that locks the row, takes the next position from its newest version
        # and inserts the message (the store's writes are single statements, one round trip).
        "m005_last_seq",
        (
            "ALTER TABLE consultations ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0",
            "UPDATE consultations c SET last_seq = COALESCE("
            "(SELECT MAX(seq) FROM messages m WHERE m.consultation_id = c.id), 0)",
        ),
    ),
    (
        # Button presses per user, a budget apart from messages (`rate_limits`' columns).
        "m006_press_limits",
        (
            """
            CREATE TABLE press_limits (
                user_id BIGINT PRIMARY KEY,
                tokens DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                warned_at DOUBLE PRECISION
            )
            """,
        ),
    ),
    (
        # A key is claimed before its request does anything: `session_id` is NULL until a
        # session is opened, and `owner` with `lease_until` name the attempt answering it
        # (NULL: nobody; a lease run out: its owner died, and another attempt may take over).
        "m007_idempotency_claims",
        (
            "ALTER TABLE idempotency_keys ALTER COLUMN session_id DROP NOT NULL",
            "ALTER TABLE idempotency_keys ADD COLUMN owner TEXT",
            "ALTER TABLE idempotency_keys ADD COLUMN lease_until DOUBLE PRECISION",
        ),
    ),
    (
        # How many times each waiting update's handling started (counted before it starts,
        # so a worker killed mid-update still counts), and the updates given up: too many
        # attempts, past the handling deadline, or their handling failed. An operator lists,
        # replays or drops them (`consultation-bot dead-letters`).
        "m008_inbox_attempts_dead_letters",
        (
            "ALTER TABLE inbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
            """
            CREATE TABLE dead_letters (
                update_id BIGINT PRIMARY KEY,
                chat_key TEXT NOT NULL,
                payload TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                reason TEXT NOT NULL,
                received_at DOUBLE PRECISION NOT NULL,
                dead_at DOUBLE PRECISION NOT NULL
            )
            """,
            "CREATE INDEX dead_letters_dead_at ON dead_letters (dead_at)",
        ),
    ),
    (
        # The SQLite store keeps `last_seq` from this migration on; here it came with m005.
        "m009_last_seq",
        ("ALTER TABLE consultations ADD COLUMN IF NOT EXISTS last_seq INTEGER NOT NULL DEFAULT 0",),
    ),
    (
        # What an assistant reply asked as structured questions (the round's JSON), and the
        # options chosen for the last round's questions but not yet sent (their JSON); NULL
        # for none, and in rows written before.
        "m010_clarifying_rounds",
        (
            "ALTER TABLE messages ADD COLUMN questions TEXT",
            "ALTER TABLE consultations ADD COLUMN picks TEXT",
        ),
    ),
    (
        "m011_follow_ups",
        ("ALTER TABLE consultations ADD COLUMN follow_ups INTEGER NOT NULL DEFAULT 0",),
    ),
    (
        # Client memory: whose facts a consultation uses and those it started with (NULL:
        # none), the facts per owner, and each person's memory preferences.
        "m012_client_memory",
        (
            "ALTER TABLE consultations ADD COLUMN memory_owner TEXT",
            "ALTER TABLE consultations ADD COLUMN memory_facts TEXT",
            """
            CREATE TABLE memory_facts (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                owner TEXT NOT NULL,
                person TEXT NOT NULL,
                text TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL
            )
            """,
            "CREATE INDEX memory_facts_owner ON memory_facts (owner, id)",
            "CREATE INDEX memory_facts_person ON memory_facts (person)",
            """
            CREATE TABLE memory_preferences (
                person TEXT PRIMARY KEY,
                enabled BOOLEAN NOT NULL,
                notice_given BOOLEAN NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL
            )
            """,
        ),
    ),
    (
        # A chat's consultations by when they started, so its history (the newest few) is
        # read in order and stops after them, however many the chat had.
        "m013_history",
        ("CREATE INDEX consultations_chat_created ON consultations (chat_key, created_at, id)",),
    ),
    (
        # Model usage by UTC day: one row per scope (person, chat or API client key), day,
        # model and kind of call, added to by each charge; a scope's days are one key range.
        "m014_usage",
        (
            """
            CREATE TABLE usage_daily (
                scope_kind TEXT NOT NULL,
                scope_key TEXT NOT NULL,
                day TEXT NOT NULL,
                model TEXT NOT NULL,
                kind TEXT NOT NULL,
                prompt_tokens BIGINT NOT NULL,
                completion_tokens BIGINT NOT NULL,
                calls BIGINT NOT NULL,
                estimated_calls BIGINT NOT NULL,
                cost DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (scope_kind, scope_key, day, model, kind)
            )
            """,
        ),
    ),
    (
        # The model a chat chose with /model (`chat_settings.model`); NULL: LLM_MODEL, as in
        # rows written before.
        "m015_chat_model",
        ("ALTER TABLE chat_settings ADD COLUMN model TEXT",),
    ),
    (
        # Quotas: consultations each person started per UTC day (counted when one is
        # created, kept when consultations are deleted), and the admins' per-person
        # overrides (`daily_tokens` NULL: exempt).
        "m016_quotas",
        (
            """
            CREATE TABLE consultation_starts (
                person TEXT NOT NULL,
                day TEXT NOT NULL,
                started BIGINT NOT NULL,
                PRIMARY KEY (person, day)
            )
            """,
            """
            CREATE TABLE quota_overrides (
                person TEXT PRIMARY KEY,
                daily_tokens BIGINT,
                updated_at DOUBLE PRECISION NOT NULL
            )
            """,
        ),
    ),
    (
        # When a consultation ended (`consultations.ended_at`: its final answer, reset or
        # expiry; NULL while active), so the operator's figures count each end on its day;
        # and indexes reading a period's starts, ends and usage. Rows ended before are
        # filled where the time is known: a reset, and a completed consultation without
        # follow-ups, ended at its last activity; the others stay NULL, uncounted.
        "m017_stats",
        (
            "ALTER TABLE consultations ADD COLUMN ended_at DOUBLE PRECISION",
            "UPDATE consultations SET ended_at = last_activity_at"
            " WHERE status = 'reset' OR (status = 'complete' AND follow_ups = 0)",
            "CREATE INDEX consultations_created ON consultations (created_at)",
            "CREATE INDEX consultations_ended ON consultations (ended_at)",
            "CREATE INDEX usage_daily_kind_day ON usage_daily (scope_kind, day)",
        ),
    ),
    (
        # The interface language each person chose with /language (`person_languages`); a
        # person without a row gets the one their Telegram client names.
        "m018_language",
        (
            """
            CREATE TABLE person_languages (
                person TEXT PRIMARY KEY,
                language TEXT NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL
            )
            """,
        ),
    ),
    (
        # The operator's console: its signed-in sessions (by the hash of their token,
        # dropped past their expiry through its index), its audit log (entries by id, never
        # changed), and the indexes its consultation list pages through, newest first,
        # whole or by status.
        "m019_admin",
        (
            "CREATE TABLE admin_sessions (token_hash TEXT PRIMARY KEY,"
            " created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at)",
            """
            CREATE TABLE admin_audit (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                at DOUBLE PRECISION NOT NULL,
                actor TEXT NOT NULL,
                action TEXT NOT NULL,
                target TEXT NOT NULL,
                detail TEXT NOT NULL
            )
            """,
            "CREATE INDEX consultations_created_id ON consultations (created_at, id)",
            "CREATE INDEX consultations_status_created ON consultations (status, created_at, id)",
        ),
    ),
    (
        # The people an operator blocked: the bot answers them as it answers those not on
        # its allow-list, and the API refuses them.
        "m020_blocks",
        (
            "CREATE TABLE blocked_people (person TEXT PRIMARY KEY,"
            " blocked_at DOUBLE PRECISION NOT NULL)",
        ),
    ),
    (
        # The requests' trigrams indexed for the console's text search (ILIKE), where the
        # server has pg_trgm and this role may create it; retried at each start until then
        # (`migrate`).
        REQUEST_SEARCH_MIGRATION,
        (index_request_search,),
    ),
    (
        # The last UTC day each person was charged (`person_activity`, one row a person,
        # the greatest day of their usage rows), kept by every charge in its statement, so
        # the console's people list pages through its index, newest first, instead of
        # adding up every person's usage history; filled from the usage rows stored.
        PERSON_ACTIVITY_MIGRATION,
        (
            "CREATE TABLE person_activity (person TEXT PRIMARY KEY, last_day TEXT NOT NULL)",
            "CREATE INDEX person_activity_recent ON person_activity (last_day DESC, person)",
            "INSERT INTO person_activity (person, last_day) SELECT scope_key, MAX(day)"
            " FROM usage_daily WHERE scope_kind = 'person' GROUP BY scope_key",
        ),
    ),
    (
        # The tokens reserved by turns under way (`core.turns.quota_holds`), counted next to what
        # was charged by the person's and the client key's quota checks.
        "m023_quota_holds",
        (
            "CREATE TABLE quota_holds (id TEXT PRIMARY KEY, person TEXT, client TEXT,"
            " day TEXT NOT NULL, tokens BIGINT NOT NULL,"
            " expires_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX quota_holds_person ON quota_holds (person, day)",
            "CREATE INDEX quota_holds_client ON quota_holds (client, day)",
            "CREATE INDEX quota_holds_expiry ON quota_holds (expires_at)",
        ),
    ),
    (
        # Whether a final answer came because the model said it knew enough
        # (`messages.ready_for_final`, false in rows written before), and the Telegram
        # message carrying each conversation's latest round keyboard (`round_keyboards`,
        # one row per chat and forum topic, 0 for none), so the next reply takes that
        # keyboard away, after a restart and on any worker.
        "m024_round_messages",
        (
            "ALTER TABLE messages ADD COLUMN ready_for_final BOOLEAN NOT NULL DEFAULT false",
            "CREATE TABLE round_keyboards (chat_id BIGINT NOT NULL, thread_id BIGINT NOT NULL,"
            " message_id BIGINT NOT NULL, PRIMARY KEY (chat_id, thread_id))",
        ),
    ),
    (
        # Who asked each consultation (a person key as quotas and the console name people;
        # NULL: not known), recorded when it starts, and the console's list of one
        # person's consultations by its index, newest first. Rows stored before get the
        # person of the memory they started with (a Telegram group owner's part before
        # `@`, `core.domain.facts.person_of`), else the Telegram user who started them unless
        # that was the anonymous admins' account (`core.domain.facts.ANONYMOUS_ADMIN_ID`).
        "m025_consultation_person",
        (
            "ALTER TABLE consultations ADD COLUMN person TEXT",
            "UPDATE consultations SET person = CASE"
            " WHEN left(memory_owner, 3) = 'tg:' THEN split_part(memory_owner, '@', 1)"
            " WHEN memory_owner IS NOT NULL THEN memory_owner"
            " WHEN started_by <> 1087968824 THEN 'tg:' || started_by END"
            " WHERE memory_owner IS NOT NULL OR started_by IS NOT NULL",
            # After the rows are filled: the index is built once, not row by row.
            "CREATE INDEX consultations_person ON consultations (person, created_at, id)",
        ),
    ),
    (
        # The operator's knowledge base: documents by source (title, role, the hash of
        # their bytes, when added) and their chunks in order (heading path, page, text),
        # with their words (`search`, generated from `KNOWLEDGE_VECTOR`: the `simple`
        # configuration, no language's stemming or stop words; stored, so neither a
        # search nor its ranking parses a chunk again) in a GIN index.
        "m026_knowledge",
        (
            "CREATE TABLE knowledge_documents ("
            " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " title TEXT NOT NULL, source TEXT NOT NULL UNIQUE, role TEXT,"
            " content_hash TEXT NOT NULL, added_at DOUBLE PRECISION NOT NULL)",
            "CREATE TABLE knowledge_chunks ("
            " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " document_id BIGINT NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,"
            " position INTEGER NOT NULL, section TEXT NOT NULL, page INTEGER, text TEXT NOT NULL,"
            f" search tsvector GENERATED ALWAYS AS ({KNOWLEDGE_VECTOR}) STORED,"
            " UNIQUE (document_id, position))",
            "CREATE INDEX knowledge_search ON knowledge_chunks USING gin (search)",
        ),
    ),
    (
        # The knowledge-base passages a final answer or a follow-up's answer cited (their
        # JSON; NULL for none and in rows written before), so history, exports and a
        # session's messages list them after a restart.
        "m027_knowledge_sources",
        ("ALTER TABLE messages ADD COLUMN knowledge_sources TEXT",),
    ),
    (
        # Each knowledge-base chunk's vector, when an embeddings model is configured
        # (float16 bytes of unit length, and the model that made them), written and
        # deleted with its chunk: hybrid retrieval searches them in memory.
        "m028_knowledge_vectors",
        (
            "CREATE TABLE knowledge_vectors (chunk_id BIGINT PRIMARY KEY"
            " REFERENCES knowledge_chunks (id) ON DELETE CASCADE,"
            " model TEXT NOT NULL, vector BYTEA NOT NULL)",
        ),
    ),
    (
        # The tools a reply called before it was written (their JSON; NULL for none and in
        # rows written before), so the context, history, exports and a session's messages
        # show them after a restart.
        "m029_tool_uses",
        ("ALTER TABLE messages ADD COLUMN tool_uses TEXT",),
    ),
    (
        # Tool calls by UTC day: one row per scope (person, chat or API client key), day
        # and tool (the name the model called, or "unknown"), added to with each reply's
        # charge; a scope's days are one key range, a period's chats one range of the index.
        "m030_tool_usage",
        (
            "CREATE TABLE tool_usage_daily (scope_kind TEXT NOT NULL, scope_key TEXT NOT NULL,"
            " day TEXT NOT NULL, tool TEXT NOT NULL, calls BIGINT NOT NULL,"
            " failed BIGINT NOT NULL, PRIMARY KEY (scope_kind, scope_key, day, tool))",
            "CREATE INDEX tool_usage_daily_kind_day ON tool_usage_daily (scope_kind, day)",
        ),
    ),
    (
        # The bots an operator added besides TELEGRAM_BOT_TOKEN's (`core.domain.bots`): one
        # row per Telegram bot, its token encrypted with its last four characters, its
        # settings as JSON text; ids come from an identity and are never reused (a bot's id
        # is the scope of everything it keeps), and a removed bot keeps its row.
        "m031_bots",
        (
            "CREATE TABLE bots (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            " telegram_id BIGINT NOT NULL UNIQUE, username TEXT NOT NULL,"
            " label TEXT NOT NULL DEFAULT '', token_cipher TEXT NOT NULL,"
            " token_tail TEXT NOT NULL, enabled BOOLEAN NOT NULL DEFAULT TRUE,"
            " settings TEXT NOT NULL DEFAULT '{}', created_at DOUBLE PRECISION NOT NULL,"
            " updated_at DOUBLE PRECISION NOT NULL, removed_at DOUBLE PRECISION)",
        ),
    ),
    (
        # The bot (`bot`, its scope: 0 the deployment's own, `core.domain.telegram_keys`)
        # each row keyed by Telegram's own ids belongs to, part of its primary key: two
        # bots' update ids and chat ids collide, and one bot's flood waits and undelivered
        # replies are not another's. Rows stored before are scope 0.
        # Rows keyed by chat or person keys need no column: their keys carry the scope
        # (`tg2:`). The cluster's tables (`storage.postgres.cluster.schema.TABLES`) came
        # from this history, and take their scope here too. Workers of the release before
        # name the old keys in ON CONFLICT: stop them before this runs.
        "m032_bot_scope",
        tuple(
            f"ALTER TABLE {table} ADD COLUMN bot BIGINT NOT NULL DEFAULT 0,"
            f" DROP CONSTRAINT {table}_pkey, ADD PRIMARY KEY (bot, {key})"
            for table, key in BOT_SCOPED_KEYS
        ),
    ),
    (
        # Payments in Telegram Stars and the plans they give (`core.domain.payments`): one
        # row per `telegram_payment_charge_id` (its primary key: a payment delivered twice,
        # or seen by two workers, is stored once), kept apart from any consultation;
        # `person_plans` holds each person's (person key's) current plan and its end.
        "m033_payments",
        (
            "CREATE TABLE payments (charge_id TEXT PRIMARY KEY,"
            " provider_charge_id TEXT NOT NULL DEFAULT '', person TEXT NOT NULL,"
            " plan_id TEXT NOT NULL, stars BIGINT NOT NULL, currency TEXT NOT NULL,"
            " payload TEXT NOT NULL, is_recurring BOOLEAN NOT NULL DEFAULT FALSE,"
            " subscription_expires_at DOUBLE PRECISION, refunded_at DOUBLE PRECISION,"
            " created_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX payments_person ON payments (person, created_at)",
            "CREATE INDEX payments_created ON payments (created_at)",
            "CREATE TABLE person_plans (person TEXT PRIMARY KEY, plan_id TEXT NOT NULL,"
            " ends_at DOUBLE PRECISION NOT NULL, charge_id TEXT NOT NULL DEFAULT '',"
            " updated_at DOUBLE PRECISION NOT NULL)",
        ),
    ),
    (
        # Whether a person's subscription was cancelled (/cancelsub, the console's Cancel
        # renewal): when, NULL while it renews. /resumesub and every grant (a renewal paid
        # anyway, a new purchase) set it NULL again.
        "m035_subscription_cancels",
        ("ALTER TABLE person_plans ADD COLUMN renewal_cancelled_at DOUBLE PRECISION",),
    ),
    (
        # A bot's own HTTP API token (`api.bots`), stored as its SHA-256 in hex only (never
        # the token): a request bearing it is pinned to that bot. At most one bot has a
        # given token; none has one until an operator sets it.
        "m036_bot_api_tokens",
        BOT_API_TOKENS_MIGRATION,
    ),
]


CATCH_UP_PERSON_ACTIVITY = (
    "INSERT INTO person_activity (person, last_day) SELECT scope_key, MAX(day)"
    " FROM usage_daily WHERE scope_kind = 'person' AND day >= $1 GROUP BY scope_key"
    " ON CONFLICT (person) DO UPDATE SET"
    " last_day = GREATEST(person_activity.last_day, EXCLUDED.last_day)"
)
"""The people charged since $1 (a UTC day) listed at their last day: a worker of the
release before `person_activity`, still running during a rolling restart, charges people
without listing them. One range read of `usage_daily_kind_day`."""


async def migrate(connection: asyncpg.Connection) -> list[str]:
    """Apply the store's migrations this database lacks; return the names applied now.
    The search index a past start could not create is tried again, and the people charged
    yesterday or today are listed (`CATCH_UP_PERSON_ACTIVITY`)."""
    applied = await apply_migrations(connection, MIGRATIONS)
    if await connection.fetchval(IS_APPLIED, PERSON_ACTIVITY_MIGRATION):
        yesterday = datetime.now(UTC).date() - timedelta(days=1)
        await connection.execute(CATCH_UP_PERSON_ACTIVITY, yesterday.isoformat())
    if REQUEST_SEARCH_MIGRATION not in applied:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            if await connection.fetchval(IS_APPLIED, REQUEST_SEARCH_MIGRATION):
                await index_request_search(connection)
    return applied


async def apply_migrations(
    connection: asyncpg.Connection, migrations: Sequence[Migration]
) -> list[str]:
    """Apply those of `migrations` this database lacks, in order; return the names applied
    by this call."""
    async with connection.transaction():
        # Under the lock too: two CREATE TABLE IF NOT EXISTS at once can both try to create it.
        await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
    applied: list[str] = []
    for name, steps in migrations:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            done = await connection.fetchval(IS_APPLIED, name)
            if done:
                continue
            for step in steps:
                if isinstance(step, str):
                    await connection.execute(step)
                else:
                    await step(connection)
            await connection.execute(
                RECORD_APPLIED,
                name,
                time.time(),
            )
        applied.append(name)
    return applied


async def applied_migrations(connection: asyncpg.Connection) -> list[str]:
    rows = await connection.fetch("SELECT name FROM schema_migrations ORDER BY name")
    return [row["name"] for row in rows]
