"""Versioned schema migrations.

Invariant: every migration in `MIGRATIONS` runs at most once per database, in
registration (numbered) order, inside its own transaction together with the
row in `schema_migrations` that records it — so a migration is either fully
applied and recorded, or not at all. Never edit a released migration: add one.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import aiosqlite

from storage.sqlite.placeholders import sqlite_sql
from storage.statements.bots import BOT_API_TOKENS_MIGRATION
from storage.statements.migrations import IS_APPLIED, RECORD_APPLIED

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register `fn`; names sort in the order they must run (m001_…, m002_…)."""
    name = getattr(fn, "__name__", "")
    if MIGRATIONS and name <= getattr(MIGRATIONS[-1], "__name__", ""):
        raise ValueError(f"migration {name!r} is out of order")
    MIGRATIONS.append(fn)
    return fn


async def migrate(
    db: aiosqlite.Connection, migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Apply the migrations not yet recorded; return the names applied now.

    `db` must be in autocommit mode (``isolation_level=None``) so that the
    explicit BEGIN/COMMIT here are the only transaction boundaries.
    """
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    applied: list[str] = []
    for fn in MIGRATIONS if migrations is None else migrations:
        name = fn.__name__
        # BEGIN IMMEDIATE takes the write lock first, so two processes opening
        # the same file cannot both decide a migration is still missing.
        try:
            await db.execute("BEGIN IMMEDIATE")
            done = await db.execute_fetchall(sqlite_sql(IS_APPLIED), (name,))
            if list(done):
                await db.rollback()
                continue
            await fn(db)
            await db.execute(sqlite_sql(RECORD_APPLIED), (name, time.time()))
        except BaseException:
            await db.rollback()
            raise
        await db.commit()
        applied.append(name)
    if applied:
        await _give_pages_back(db)
    return applied


async def _give_pages_back(db: aiosqlite.Connection) -> None:
    """Pages a migration freed (a table rebuilt) go back to the file system. Moving pages
    may free another (a table's root page moved down), so it runs until none is left."""
    for _ in range(4):
        rows = list(await db.execute_fetchall("PRAGMA freelist_count"))
        if not rows or not rows[0][0]:
            return
        await db.execute_fetchall("PRAGMA incremental_vacuum")


async def applied_migrations(db: aiosqlite.Connection) -> list[str]:
    """Names recorded in `schema_migrations`, oldest first."""
    rows = await db.execute_fetchall("SELECT name FROM schema_migrations ORDER BY applied_at, name")
    return [row[0] for row in rows]


@migration
async def m001_initial(db: aiosqlite.Connection) -> None:
    """Consultations, their ordered messages, and per-chat settings."""
    await db.execute(
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
            created_at REAL NOT NULL,
            last_activity_at REAL NOT NULL
        )
        """
    )
    await db.execute("CREATE INDEX consultations_chat_status ON consultations (chat_key, status)")
    # At most one ACTIVE consultation per chat, enforced by the database itself.
    await db.execute(
        "CREATE UNIQUE INDEX consultations_one_active ON consultations (chat_key)"
        " WHERE status = 'active'"
    )
    # expire_idle and purge scan by status and age.
    await db.execute(
        "CREATE INDEX consultations_status_activity ON consultations (status, last_activity_at)"
    )
    await db.execute(
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            consultation_id TEXT NOT NULL
                REFERENCES consultations (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            author TEXT,
            text TEXT NOT NULL,
            created_at REAL NOT NULL,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            UNIQUE (consultation_id, seq)
        )
        """
    )
    await db.execute(
        """
        CREATE TABLE chat_settings (
            chat_key TEXT PRIMARY KEY,
            max_rounds INTEGER,
            role TEXT,
            system_prompt TEXT,
            language TEXT,
            updated_at REAL NOT NULL
        )
        """
    )


@migration
async def m002_started_by(db: aiosqlite.Connection) -> None:
    """Who opened a consultation: in groups they may change it like an admin."""
    await db.execute("ALTER TABLE consultations ADD COLUMN started_by INTEGER")


@migration
async def m003_idempotency_keys(db: aiosqlite.Connection) -> None:
    """API requests by `Idempotency-Key`: a retry gets the stored reply, not a new round.

    A row belongs to its session and is deleted with it (retention purge), so keys
    live exactly as long as the session they answered. `response` is NULL while the
    round is unanswered (running, or failed: the key may then be used to retry).
    """
    await db.execute(
        """
        CREATE TABLE idempotency_keys (
            client TEXT NOT NULL,
            key TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            session_id TEXT NOT NULL
                REFERENCES consultations (id) ON DELETE CASCADE,
            response TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (client, key)
        )
        """
    )
    await db.execute("CREATE INDEX idempotency_keys_session ON idempotency_keys (session_id)")


@migration
async def m004_telegram_updates(db: aiosqlite.Connection) -> None:
    """Telegram update ids recently received by the webhook, so a redelivery is dropped.

    Bounded: rows older than a day (Telegram stops redelivering long before) are
    deleted as new ones arrive, through the index on `received_at`.
    """
    await db.execute(
        "CREATE TABLE telegram_updates ( update_id INTEGER PRIMARY KEY, received_at REAL NOT NULL)"
    )
    await db.execute("CREATE INDEX telegram_updates_received ON telegram_updates (received_at)")


@migration
async def m005_estimated_usage(db: aiosqlite.Connection) -> None:
    """Whether a reply's token counts were estimated (the provider reported none).

    NULL in rows written before: their counts were what the provider reported.
    """
    await db.execute("ALTER TABLE messages ADD COLUMN tokens_estimated INTEGER")


@migration
async def m006_turn_ids(db: aiosqlite.Connection) -> None:
    """The Telegram update a user message came from (`tg:<update_id>`), so handling an
    update a second time finds the turn instead of storing it again."""
    await db.execute("ALTER TABLE messages ADD COLUMN turn_id TEXT")
    await db.execute("CREATE INDEX messages_turn ON messages (turn_id) WHERE turn_id IS NOT NULL")


@migration
async def m007_idempotency_claims(db: aiosqlite.Connection) -> None:
    """A key is claimed before its request does anything: `session_id` may be NULL (no
    session opened yet), and `owner` with `lease_until` name the attempt answering it
    (NULL: nobody; a lease run out: its owner died, and another attempt may take over)."""
    await db.execute(
        """
        CREATE TABLE idempotency_claims (
            client TEXT NOT NULL,
            key TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            session_id TEXT REFERENCES consultations (id) ON DELETE CASCADE,
            response TEXT,
            created_at REAL NOT NULL,
            owner TEXT,
            lease_until REAL,
            PRIMARY KEY (client, key)
        )
        """
    )
    await db.execute(
        "INSERT INTO idempotency_claims (client, key, fingerprint, session_id, response,"
        " created_at) SELECT client, key, fingerprint, session_id, response, created_at"
        " FROM idempotency_keys"
    )
    await db.execute("DROP TABLE idempotency_keys")
    await db.execute("ALTER TABLE idempotency_claims RENAME TO idempotency_keys")
    await db.execute("CREATE INDEX idempotency_keys_session ON idempotency_keys (session_id)")


@migration
async def m009_last_seq(db: aiosqlite.Connection) -> None:
    """The position of a consultation's last message, kept on its row (as on PostgreSQL):
    a message appended takes its position from the row's `last_seq`, advanced by the same
    transaction."""
    await db.execute("ALTER TABLE consultations ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0")
    await db.execute(
        "UPDATE consultations SET last_seq = COALESCE("
        "(SELECT MAX(seq) FROM messages m WHERE m.consultation_id = consultations.id), 0)"
    )


@migration
async def m010_clarifying_rounds(db: aiosqlite.Connection) -> None:
    """What an assistant reply asked as structured questions (`messages.questions`, the
    round's JSON), and the options chosen for the last round's questions but not yet sent
    (`consultations.picks`, their JSON); NULL for none, and in rows written before."""
    await db.execute("ALTER TABLE messages ADD COLUMN questions TEXT")
    await db.execute("ALTER TABLE consultations ADD COLUMN picks TEXT")


@migration
async def m011_follow_ups(db: aiosqlite.Connection) -> None:
    """How many follow-ups a complete consultation answered (`consultations.follow_ups`);
    0 in rows written before."""
    await db.execute("ALTER TABLE consultations ADD COLUMN follow_ups INTEGER NOT NULL DEFAULT 0")


@migration
async def m012_client_memory(db: aiosqlite.Connection) -> None:
    """Client memory: whose facts a consultation uses and those it started with
    (`consultations.memory_owner`, `memory_facts`; NULL: none), the facts per owner, and
    each person's memory preferences."""
    await db.execute("ALTER TABLE consultations ADD COLUMN memory_owner TEXT")
    await db.execute("ALTER TABLE consultations ADD COLUMN memory_facts TEXT")
    await db.execute(
        """
        CREATE TABLE memory_facts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL,
            person TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at REAL NOT NULL
        )
        """
    )
    await db.execute("CREATE INDEX memory_facts_owner ON memory_facts (owner, id)")
    await db.execute("CREATE INDEX memory_facts_person ON memory_facts (person)")
    await db.execute(
        """
        CREATE TABLE memory_preferences (
            person TEXT PRIMARY KEY,
            enabled INTEGER NOT NULL,
            notice_given INTEGER NOT NULL,
            updated_at REAL NOT NULL
        )
        """
    )


@migration
async def m013_history(db: aiosqlite.Connection) -> None:
    """A chat's consultations by when they started, so its history (the newest few) is
    read in order and stops after them, however many the chat had."""
    await db.execute(
        "CREATE INDEX consultations_chat_created ON consultations (chat_key, created_at, id)"
    )


USAGE_DAILY_TABLE = """
    CREATE TABLE usage_daily (
        scope_kind TEXT NOT NULL,
        scope_key TEXT NOT NULL,
        day TEXT NOT NULL,
        model TEXT NOT NULL,
        kind TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        calls INTEGER NOT NULL,
        estimated_calls INTEGER NOT NULL,
        cost REAL NOT NULL,
        PRIMARY KEY (scope_kind, scope_key, day, model, kind)
    ) WITHOUT ROWID
"""


@migration
async def m014_usage(db: aiosqlite.Connection) -> None:
    """Model usage by UTC day: one row per scope (person, chat or API client key), day,
    model and kind of call, added to by each charge; a scope's days are one key range.
    Without a rowid the rows live in their key's B-tree: one tree to write, not two."""
    await db.execute(USAGE_DAILY_TABLE)


@migration
async def m015_chat_model(db: aiosqlite.Connection) -> None:
    """The model a chat chose with /model (`chat_settings.model`); NULL: LLM_MODEL, as in
    rows written before."""
    await db.execute("ALTER TABLE chat_settings ADD COLUMN model TEXT")


@migration
async def m016_quotas(db: aiosqlite.Connection) -> None:
    """Quotas: consultations each person started per UTC day (counted when one is created,
    kept when consultations are deleted), and the admins' per-person overrides
    (`daily_tokens` NULL: exempt)."""
    await db.execute(
        """
        CREATE TABLE consultation_starts (
            person TEXT NOT NULL,
            day TEXT NOT NULL,
            started INTEGER NOT NULL,
            PRIMARY KEY (person, day)
        ) WITHOUT ROWID
        """
    )
    await db.execute(
        """
        CREATE TABLE quota_overrides (
            person TEXT PRIMARY KEY,
            daily_tokens INTEGER,
            updated_at REAL NOT NULL
        )
        """
    )


STATS_MIGRATION = (
    "ALTER TABLE consultations ADD COLUMN ended_at REAL",
    "UPDATE consultations SET ended_at = last_activity_at"
    " WHERE status = 'reset' OR (status = 'complete' AND follow_ups = 0)",
    "CREATE INDEX consultations_created ON consultations (created_at)",
    "CREATE INDEX consultations_ended ON consultations (ended_at)",
    "CREATE INDEX usage_daily_kind_day ON usage_daily (scope_kind, day)",
)


@migration
async def m017_stats(db: aiosqlite.Connection) -> None:
    """When a consultation ended (`consultations.ended_at`: its final answer, reset or
    expiry; NULL while active), so the operator's figures count each end on its day; and
    indexes reading a period's starts, ends and usage. Rows ended before are filled where
    the time is known: a reset, and a completed consultation without follow-ups, ended at
    its last activity; the others (expired, or with follow-ups) stay NULL, uncounted."""
    for statement in STATS_MIGRATION:
        await db.execute(statement)


@migration
async def m018_language(db: aiosqlite.Connection) -> None:
    """The interface language each person chose with /language (`person_languages`); a
    person without a row gets the one their Telegram client names."""
    await db.execute(
        """
        CREATE TABLE person_languages (
            person TEXT PRIMARY KEY,
            language TEXT NOT NULL,
            updated_at REAL NOT NULL
        )
        """
    )


@migration
async def m019_admin(db: aiosqlite.Connection) -> None:
    """The operator's console: its signed-in sessions (by the hash of their token, dropped
    past their expiry through its index), its audit log (entries by id, never changed),
    and the indexes its consultation list pages through, newest first, whole or by status."""
    await db.execute(
        "CREATE TABLE admin_sessions (token_hash TEXT PRIMARY KEY,"
        " created_at REAL NOT NULL, expires_at REAL NOT NULL)"
    )
    await db.execute("CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at)")
    await db.execute(
        """
        CREATE TABLE admin_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            detail TEXT NOT NULL
        )
        """
    )
    await db.execute("CREATE INDEX consultations_created_id ON consultations (created_at, id)")
    await db.execute(
        "CREATE INDEX consultations_status_created ON consultations (status, created_at, id)"
    )


@migration
async def m020_blocks(db: aiosqlite.Connection) -> None:
    """The people an operator blocked: the bot answers them as it answers those not on
    its allow-list, and the API refuses them."""
    await db.execute(
        "CREATE TABLE blocked_people (person TEXT PRIMARY KEY, blocked_at REAL NOT NULL)"
    )


REQUEST_SEARCH_MIGRATION = (
    # External content: the text stays in `consultations` alone; the index keeps its trigrams.
    "CREATE VIRTUAL TABLE consultations_search USING fts5(initial_request,"
    " content='consultations', content_rowid='rowid', tokenize='trigram')",
    "CREATE TRIGGER consultations_search_insert AFTER INSERT ON consultations BEGIN"
    " INSERT INTO consultations_search (rowid, initial_request)"
    " VALUES (new.rowid, new.initial_request); END",
    # An external-content index forgets a row by being told the text it indexed.
    "CREATE TRIGGER consultations_search_delete AFTER DELETE ON consultations BEGIN"
    " INSERT INTO consultations_search (consultations_search, rowid, initial_request)"
    " VALUES ('delete', old.rowid, old.initial_request); END",
    "CREATE TRIGGER consultations_search_update AFTER UPDATE OF initial_request"
    " ON consultations WHEN old.initial_request IS NOT new.initial_request BEGIN"
    " INSERT INTO consultations_search (consultations_search, rowid, initial_request)"
    " VALUES ('delete', old.rowid, old.initial_request);"
    " INSERT INTO consultations_search (rowid, initial_request)"
    " VALUES (new.rowid, new.initial_request); END",
    "INSERT INTO consultations_search (consultations_search) VALUES ('rebuild')",
)


@migration
async def m021_request_search(db: aiosqlite.Connection) -> None:
    """An index of the requests' trigrams for the console's text search
    (`consultations_search`, FTS5 with the trigram tokenizer, SQLite 3.34 or later), over
    `consultations.initial_request` by rowid, filled from the rows already stored and kept
    by triggers on every insert, change of request and delete (purges, deleted chats and
    consultations alike). A later migration that rebuilds `consultations` must rebuild
    this index too: the rowids it keeps would change."""
    for statement in REQUEST_SEARCH_MIGRATION:
        await db.execute(statement)


PERSON_ACTIVITY_MIGRATION = (
    "CREATE TABLE person_activity (person TEXT PRIMARY KEY, last_day TEXT NOT NULL) WITHOUT ROWID",
    "CREATE INDEX person_activity_recent ON person_activity (last_day DESC, person)",
    "INSERT INTO person_activity (person, last_day) SELECT scope_key, MAX(day)"
    " FROM usage_daily WHERE scope_kind = 'person' GROUP BY scope_key",
)


@migration
async def m022_person_activity(db: aiosqlite.Connection) -> None:
    """The last UTC day each person was charged (`person_activity`, one row a person, the
    greatest day of their usage rows), kept by every charge in its transaction, so the
    console's people list pages through its index, newest first, instead of adding up
    every person's usage history; filled from the usage rows already stored."""
    for statement in PERSON_ACTIVITY_MIGRATION:
        await db.execute(statement)


@migration
async def m023_quota_holds(db: aiosqlite.Connection) -> None:
    """The tokens reserved by turns under way (`core.turns.quota_holds`), counted next to what
    was charged by the person's and the client key's quota checks."""
    await db.execute(
        "CREATE TABLE quota_holds (id TEXT PRIMARY KEY, person TEXT, client TEXT,"
        " day TEXT NOT NULL, tokens INTEGER NOT NULL, expires_at REAL NOT NULL)"
    )
    await db.execute("CREATE INDEX quota_holds_person ON quota_holds (person, day)")
    await db.execute("CREATE INDEX quota_holds_client ON quota_holds (client, day)")
    await db.execute("CREATE INDEX quota_holds_expiry ON quota_holds (expires_at)")


@migration
async def m024_round_messages(db: aiosqlite.Connection) -> None:
    """Whether a final answer came because the model said it knew enough
    (`messages.ready_for_final`, 0 in rows written before), and the Telegram message
    carrying each conversation's latest round keyboard (`round_keyboards`, one row per chat
    and forum topic, 0 for none), so the next reply takes that keyboard away, after a
    restart too."""
    await db.execute("ALTER TABLE messages ADD COLUMN ready_for_final INTEGER NOT NULL DEFAULT 0")
    await db.execute(
        "CREATE TABLE round_keyboards (chat_id INTEGER NOT NULL, thread_id INTEGER NOT NULL,"
        " message_id INTEGER NOT NULL, PRIMARY KEY (chat_id, thread_id)) WITHOUT ROWID"
    )


CONSULTATION_PERSON_MIGRATION = (
    "ALTER TABLE consultations ADD COLUMN person TEXT",
    # Rows stored before: the person of the memory they started with (a Telegram group
    # owner's part before `@`, `core.domain.facts.person_of`), else the Telegram user who
    # started them unless that was Telegram's anonymous admin account (1087968824,
    # `core.domain.facts.ANONYMOUS_ADMIN_ID`, every group's); NULL when neither is known.
    "UPDATE consultations SET person = CASE"
    " WHEN substr(memory_owner, 1, 3) = 'tg:' AND instr(memory_owner, '@') > 0"
    " THEN substr(memory_owner, 1, instr(memory_owner, '@') - 1)"
    " WHEN memory_owner IS NOT NULL THEN memory_owner"
    " WHEN started_by <> 1087968824 THEN 'tg:' || started_by END"
    " WHERE memory_owner IS NOT NULL OR started_by IS NOT NULL",
    # After the rows are filled: the index is built once, not row by row.
    "CREATE INDEX consultations_person ON consultations (person, created_at, id)",
)


@migration
async def m025_consultation_person(db: aiosqlite.Connection) -> None:
    """Who asked each consultation (`consultations.person`, a person key as quotas and the
    console name people; NULL: not known), recorded when it starts, and the console's list
    of one person's consultations by its index, newest first."""
    for statement in CONSULTATION_PERSON_MIGRATION:
        await db.execute(statement)


KNOWLEDGE_MIGRATION = (
    "CREATE TABLE knowledge_documents (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " title TEXT NOT NULL, source TEXT NOT NULL UNIQUE, role TEXT,"
    " content_hash TEXT NOT NULL, added_at REAL NOT NULL)",
    "CREATE TABLE knowledge_chunks (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " document_id INTEGER NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,"
    " position INTEGER NOT NULL, section TEXT NOT NULL, page INTEGER, text TEXT NOT NULL,"
    " UNIQUE (document_id, position))",
    # External content: the text stays in `knowledge_chunks` alone; the index keeps words.
    "CREATE VIRTUAL TABLE knowledge_search USING fts5(section, text,"
    " content='knowledge_chunks', content_rowid='id',"
    " tokenize=\"unicode61 remove_diacritics 2 categories 'L* M* N* Co'\")",
    # How many chunks hold each word: search leaves out words most chunks hold.
    "CREATE VIRTUAL TABLE knowledge_words USING fts5vocab(knowledge_search, 'row')",
    "CREATE TRIGGER knowledge_search_insert AFTER INSERT ON knowledge_chunks BEGIN"
    " INSERT INTO knowledge_search (rowid, section, text)"
    " VALUES (new.id, new.section, new.text); END",
    "CREATE TRIGGER knowledge_search_delete AFTER DELETE ON knowledge_chunks BEGIN"
    " INSERT INTO knowledge_search (knowledge_search, rowid, section, text)"
    " VALUES ('delete', old.id, old.section, old.text); END",
    "CREATE TRIGGER knowledge_search_update AFTER UPDATE ON knowledge_chunks BEGIN"
    " INSERT INTO knowledge_search (knowledge_search, rowid, section, text)"
    " VALUES ('delete', old.id, old.section, old.text);"
    " INSERT INTO knowledge_search (rowid, section, text)"
    " VALUES (new.id, new.section, new.text); END",
)


@migration
async def m026_knowledge(db: aiosqlite.Connection) -> None:
    """The operator's knowledge base: documents by source (`knowledge_documents`: title,
    role, the hash of their bytes, when added) and their chunks in order
    (`knowledge_chunks`: heading path, page, text), with a full-text index of the chunks'
    words (`knowledge_search`, FTS5, bm25) kept by triggers on every change of a chunk, and
    its vocabulary (`knowledge_words`: how many chunks hold each word).
    Ids are never reused (AUTOINCREMENT): a passage's id names one text for good."""
    for statement in KNOWLEDGE_MIGRATION:
        await db.execute(statement)


@migration
async def m027_knowledge_sources(db: aiosqlite.Connection) -> None:
    """The knowledge-base passages a final answer or a follow-up's answer cited
    (`messages.knowledge_sources`, their JSON; NULL for none and in rows written before),
    so history, exports and a session's messages list them after a restart."""
    await db.execute("ALTER TABLE messages ADD COLUMN knowledge_sources TEXT")


@migration
async def m028_knowledge_vectors(db: aiosqlite.Connection) -> None:
    """Each knowledge-base chunk's vector, when an embeddings model is configured
    (`knowledge_vectors`: float16 bytes of unit length, and the model that made them),
    written and deleted with its chunk: hybrid retrieval searches them in memory."""
    await db.execute(
        "CREATE TABLE knowledge_vectors (chunk_id INTEGER PRIMARY KEY"
        " REFERENCES knowledge_chunks (id) ON DELETE CASCADE,"
        " model TEXT NOT NULL, vector BLOB NOT NULL)"
    )


@migration
async def m029_tool_uses(db: aiosqlite.Connection) -> None:
    """The tools a reply called before it was written (`messages.tool_uses`, their JSON;
    NULL for none and in rows written before), so the context, history, exports and a
    session's messages show them after a restart."""
    await db.execute("ALTER TABLE messages ADD COLUMN tool_uses TEXT")


@migration
async def m030_tool_usage(db: aiosqlite.Connection) -> None:
    """Tool calls by UTC day: one row per scope (person, chat or API client key), day and
    tool (the name the model called, or "unknown"), added to with each reply's charge; a
    scope's days are one key range, a period's chats one range of the second index."""
    await db.execute(
        "CREATE TABLE tool_usage_daily (scope_kind TEXT NOT NULL, scope_key TEXT NOT NULL,"
        " day TEXT NOT NULL, tool TEXT NOT NULL, calls INTEGER NOT NULL,"
        " failed INTEGER NOT NULL, PRIMARY KEY (scope_kind, scope_key, day, tool)) WITHOUT ROWID"
    )
    await db.execute("CREATE INDEX tool_usage_daily_kind_day ON tool_usage_daily (scope_kind, day)")


@migration
async def m031_bots(db: aiosqlite.Connection) -> None:
    """The bots an operator added besides TELEGRAM_BOT_TOKEN's (`core.domain.bots`): one row
    per Telegram bot, its token encrypted (`token_cipher`) with its last four characters
    (`token_tail`), its settings as JSON; ids are never reused (AUTOINCREMENT), since a
    bot's id is the scope of everything it keeps, and a removed bot keeps its row."""
    await db.execute(
        "CREATE TABLE bots (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " telegram_id INTEGER NOT NULL UNIQUE, username TEXT NOT NULL,"
        " label TEXT NOT NULL DEFAULT '', token_cipher TEXT NOT NULL,"
        " token_tail TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1,"
        " settings TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL,"
        " updated_at REAL NOT NULL, removed_at REAL)"
    )


BOT_SCOPE_MIGRATION = (
    # The key's columns first, in its order: SQLite 3.40's quick_check misreads a WITHOUT
    # ROWID table whose primary key does not lead its columns (the start-up check would
    # call the file corrupt).
    "CREATE TABLE telegram_updates_scoped (bot INTEGER NOT NULL DEFAULT 0,"
    " update_id INTEGER NOT NULL, received_at REAL NOT NULL,"
    " PRIMARY KEY (bot, update_id)) WITHOUT ROWID",
    "INSERT INTO telegram_updates_scoped (bot, update_id, received_at)"
    " SELECT 0, update_id, received_at FROM telegram_updates",
    "DROP TABLE telegram_updates",
    "ALTER TABLE telegram_updates_scoped RENAME TO telegram_updates",
    "CREATE INDEX telegram_updates_received ON telegram_updates (received_at)",
    "CREATE TABLE round_keyboards_scoped (bot INTEGER NOT NULL DEFAULT 0,"
    " chat_id INTEGER NOT NULL, thread_id INTEGER NOT NULL, message_id INTEGER NOT NULL,"
    " PRIMARY KEY (bot, chat_id, thread_id)) WITHOUT ROWID",
    "INSERT INTO round_keyboards_scoped (bot, chat_id, thread_id, message_id)"
    " SELECT 0, chat_id, thread_id, message_id FROM round_keyboards",
    "DROP TABLE round_keyboards",
    "ALTER TABLE round_keyboards_scoped RENAME TO round_keyboards",
)


@migration
async def m032_bot_scope(db: aiosqlite.Connection) -> None:
    """The bot (`bot`, its scope: 0 the deployment's own, `core.domain.telegram_keys`) each
    row keyed by Telegram's own ids belongs to, part of its primary key: two bots' update
    ids and chat ids collide. `telegram_updates` and `round_keyboards` are rebuilt (SQLite
    cannot change a primary key), their rows kept as scope 0. Rows keyed by chat or person
    keys need no column: their keys carry the scope (`tg2:`)."""
    for statement in BOT_SCOPE_MIGRATION:
        await db.execute(statement)


@migration
async def m033_payments(db: aiosqlite.Connection) -> None:
    """Payments in Telegram Stars and the plans they give (`core.domain.payments`): one
    row per `telegram_payment_charge_id` (its primary key: a payment delivered twice is
    stored once), kept apart from any consultation; `person_plans` holds each person's
    (person key's) current plan and when it ends."""
    await db.execute(
        "CREATE TABLE payments (charge_id TEXT PRIMARY KEY,"
        " provider_charge_id TEXT NOT NULL DEFAULT '', person TEXT NOT NULL,"
        " plan_id TEXT NOT NULL, stars INTEGER NOT NULL, currency TEXT NOT NULL,"
        " payload TEXT NOT NULL, is_recurring INTEGER NOT NULL DEFAULT 0,"
        " subscription_expires_at REAL, refunded_at REAL, created_at REAL NOT NULL)"
    )
    await db.execute("CREATE INDEX payments_person ON payments (person, created_at)")
    await db.execute("CREATE INDEX payments_created ON payments (created_at)")
    await db.execute(
        "CREATE TABLE person_plans (person TEXT PRIMARY KEY, plan_id TEXT NOT NULL,"
        " ends_at REAL NOT NULL, charge_id TEXT NOT NULL DEFAULT '',"
        " updated_at REAL NOT NULL) WITHOUT ROWID"
    )


@migration
async def m035_subscription_cancels(db: aiosqlite.Connection) -> None:
    """Whether a person's subscription was cancelled (`/cancelsub`, the console's Cancel
    renewal): `person_plans.renewal_cancelled_at`, when; NULL while it renews. `/resumesub`
    and every grant (a renewal paid anyway, a new purchase) set it NULL again."""
    await db.execute("ALTER TABLE person_plans ADD COLUMN renewal_cancelled_at REAL")


@migration
async def m036_bot_api_tokens(db: aiosqlite.Connection) -> None:
    """A bot's own HTTP API token (`api.bots`), stored as its SHA-256 in hex only (never the
    token): a request bearing it is pinned to that bot. At most one bot has a given token;
    none has one until an operator sets it (`bots set BOT api_token=-`)."""
    for statement in BOT_API_TOKENS_MIGRATION:
        await db.execute(statement)
