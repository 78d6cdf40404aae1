"""What the console needs of the store: the consultation list, one consultation, a chat's
usage, console sessions and the audit log. Both stores provide it."""

from __future__ import annotations

from typing import Protocol

from core.domain.audit import AuditEntry
from core.domain.consultation import Consultation
from core.domain.facts import Fact
from core.domain.listing import ConsultationQuery, ListedConsultation
from core.domain.people import PeopleQuery, PersonRow
from core.domain.quotas import QuotaOverride
from core.domain.usage import ScopeKind, UsageTotal


class AdminStore(Protocol):
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
        """Delete the person's facts and preferences (as /forget does) and log it, in one
        transaction; how many facts went."""
        ...

    async def audit_log(self, *, before_id: int | None, limit: int) -> list[AuditEntry]: ...
