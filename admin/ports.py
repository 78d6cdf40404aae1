"""What the console needs of the store — the consultation list, one consultation, a chat's
usage, console sessions, the audit log and the knowledge base (both stores provide it) —
and of the knowledge loader: an uploaded file read and stored as the CLI stores a file
(`media.knowledge_files`, through the runtime's document readers; `app.admin_mount`) — and
of the bots the deployment serves besides its own (`app.bots.BotKeeper`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from core.domain.audit import AuditEntry
from core.domain.bots import BotProfile, StoredBot
from core.domain.consultation import Consultation
from core.domain.facts import Fact
from core.domain.knowledge import KnowledgeBase, KnowledgeDocument, Stored
from core.domain.listing import ConsultationQuery, ListedConsultation
from core.domain.people import PeopleQuery, PersonRow
from core.domain.quotas import QuotaOverride
from core.domain.usage import ScopeKind, UsageTotal


class AdminStore(Protocol):
    @property
    def knowledge(self) -> KnowledgeBase:
        """The knowledge base kept in the same database."""
        ...

    async def list_consultations(self, query: ConsultationQuery) -> list[ListedConsultation]: ...

    async def get(self, consultation_id: str) -> Consultation | None: ...

    async def usage_of(
        self, scope: ScopeKind, key: str, *, since_day: str, until_day: str
    ) -> list[UsageTotal]: ...

    async def add_admin_session(
        self, token_hash: str, *, expires_at: float, audit: AuditEntry
    ) -> None:
        """Keep a signed-in session (and its audit entry, in one transaction); sessions
        expired by the entry's time are dropped."""
        ...

    async def admin_session_expiry(self, token_hash: str) -> float | None:
        """When the session ends; None for one that ended or never was."""
        ...

    async def end_admin_session(self, token_hash: str, audit: AuditEntry) -> bool: ...

    async def add_audit(self, entry: AuditEntry) -> None: ...

    async def list_people(self, query: PeopleQuery) -> list[PersonRow]:
        """A page of the people charged for model calls (`core.domain.people`)."""
        ...

    async def person_facts(self, person: str, *, limit: int) -> list[Fact]:
        """The newest `limit` facts `person` told the bot, in any scope."""
        ...

    async def set_person_override(
        self, person: str, override: QuotaOverride | None, *, at: float, audit: AuditEntry
    ) -> bool:
        """Set the person's quota override, or remove it (None), and log it, in one
        transaction; False, logging nothing, when there was none to remove."""
        ...

    async def is_blocked(self, person: str) -> bool: ...

    async def set_blocked(
        self, person: str, blocked: bool, *, at: float, audit: AuditEntry
    ) -> bool:
        """Block or unblock the person and log it, in one transaction; False, logging
        nothing, when they already were so."""
        ...

    async def forget_person_memory(self, person: str, audit: AuditEntry) -> int:
        """Delete the person's facts, preferences and tool calls by day (as /forget does)
        and log it, in one transaction; how many facts went."""
        ...

    async def audit_log(self, *, before_id: int | None, limit: int) -> list[AuditEntry]: ...


class LoadedUpload(Protocol):
    """What loading one uploaded file did: `stored` and `document`, or the `problem` that
    kept it out; `source` names it (`upload:` and its base name); `note` says when only
    part of its text was read."""

    @property
    def source(self) -> str: ...

    @property
    def document(self) -> KnowledgeDocument | None: ...

    @property
    def stored(self) -> Stored | None: ...

    @property
    def problem(self) -> str: ...

    @property
    def note(self) -> str: ...


class UploadLoader(Protocol):
    """Stores uploaded files in the knowledge base as `consultation-bot knowledge add`
    stores files: the same kinds, the same limit, the same readers."""

    @property
    def max_bytes(self) -> int:
        """The largest file loaded (KNOWLEDGE_MAX_DOCUMENT_BYTES)."""
        ...

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The kinds of file loaded, by name: `.md`, `.pdf`…"""
        ...

    def source_of(self, name: str) -> str:
        """The source a file uploaded as `name` is stored under (and named by)."""
        ...

    async def load_upload(
        self, data: bytes, *, name: str, title: str = "", role: str | None = None
    ) -> LoadedUpload:
        """Store the file `name` holding `data`, titled `title` (else its own title),
        for `role`'s consultations (None: every one's); a file that fails stores nothing."""
        ...


class BotKeeping(Protocol):
    """The operator's bots as the CLI keeps them (`app.bots.BotKeeper`): each change is
    checked (a token with Telegram's getMe) and refused with `core.domain.bots.BotRefused`
    changing nothing; BOT is an id or `@username`."""

    async def add(self, token: str, profile: BotProfile, *, label: str = "") -> StoredBot: ...

    async def bots(self) -> list[StoredBot]: ...

    async def find(self, ref: str) -> StoredBot: ...

    async def change(self, ref: str, changes: Mapping[str, str]) -> StoredBot: ...

    async def set_api_token(self, ref: str, token: str) -> StoredBot:
        """Give the bot its own HTTP API token (stored as its SHA-256; empty: none)."""
        ...

    async def enable(self, ref: str, enabled: bool) -> StoredBot: ...

    async def remove(self, ref: str) -> StoredBot: ...

    async def forget_data(self, bot: StoredBot) -> int:
        """Delete what the removed `bot` stored; how many consultations went."""
        ...


class StarRefunds(Protocol):
    """Telegram's `refundStarPayment` and `editUserStarSubscription`, as the console asks
    them (`app.star_refunds`), of the bot of `scope` (the payment's person's:
    `core.domain.telegram_keys.scope_of`)."""

    async def refund_stars(self, scope: int, user_id: int, charge_id: str) -> str | None:
        """Refund the charge to the user; None when Telegram did, else why not (its words)."""
        ...

    async def cancel_subscription(
        self, scope: int, user_id: int, charge_id: str, *, canceled: bool = True
    ) -> str | None:
        """Cancel the subscription the charge paid for (it runs to its end, not renewed),
        or with `canceled` False let it renew again; None when Telegram did, else why not."""
        ...
