"""What the console needs to know about its deployment, read once from the settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SESSION_COOKIE = "admin_session"
LOGIN_COOKIE = "admin_login"
"""The sign-in form's own token (double submit): set with the form, sent back with it."""
PREFIX = "/admin"
MIN_ADMIN_TOKEN_CHARS = 16
"""A shorter ADMIN_TOKEN stops the start: it is the console's only password."""


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """`token`: what signs in (ADMIN_TOKEN); `secure_cookies`: cookies only over HTTPS
    (everywhere but a server on loopback); `session_seconds`: how long a sign-in lasts;
    `reports_dir`: where the evaluator writes its reports (EVAL_REPORTS_DIR)."""

    token: str
    secure_cookies: bool = True
    session_seconds: int = 8 * 3600
    reports_dir: Path = Path("evaluation-report")
    failed_sign_ins: int = 5
    """Failed sign-ins an address may make per `failure_window_seconds`."""
    failure_window_seconds: float = 900.0
