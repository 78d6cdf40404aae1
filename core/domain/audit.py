"""The operator's audit log: who did what to which record, and when.

Invariant: an entry is written by the same transaction as the action it records
(`add_admin_session`, `end_admin_session`, `delete_consultation` take it), so the log
never names an action that did not happen nor misses one that did; a failed sign-in,
which changes nothing, is an entry of its own (`sign_in_failed`, bounded per window by
`core.domain.sign_in_limits`). Entries are never
changed; they are read newest first by id.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_AUDIT_PAGE = 200
MAX_FIELD_CHARS = 500
"""Longest actor, action, target or detail kept: the log's rows stay small."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action: `actor` names the console session that took it (never the token),
    `action` what it did (`sign_in`, `delete_consultation`, …), `target` what it did it
    to; `id` is 0 until stored."""

    at: float
    actor: str
    action: str
    target: str = ""
    detail: str = ""
    id: int = 0

    def bounded(self) -> AuditEntry:
        """This entry with every text within `MAX_FIELD_CHARS` and no NUL character."""
        return AuditEntry(
            self.at,
            _bound(self.actor),
            _bound(self.action),
            _bound(self.target),
            _bound(self.detail),
            self.id,
        )


def _bound(text: str) -> str:
    return text.replace("\x00", "")[:MAX_FIELD_CHARS]
