"""Headers every console response carries, and the forms' CSRF tokens.

Invariants:
- every response under `/admin/` (pages, redirects, errors, static files) carries a
  `Content-Security-Policy` allowing scripts, styles, images, forms and connections from
  the console's own origin only (no inline script, no third party), forbids framing
  (`frame-ancestors 'none'` and `X-Frame-Options: DENY`), sends no referrer and is not
  sniffed (`X-Content-Type-Options: nosniff`); pages are not cached;
- a session's CSRF token is derived from its secret token (HMAC), so it needs no storage,
  differs per session and dies with it; tokens are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none';"
    " object-src 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
MAX_TOKEN_CHARS = 512
"""Longer tokens are refused unread (a token, a session cookie or a CSRF field)."""


def protect(response: web.StreamResponse, *, cache: bool = False) -> None:
    """Give `response` the console's headers (`cache`: a static file may be cached)."""
    response.headers.update(HEADERS)
    if not cache:
        response.headers["Cache-Control"] = "no-store"


def token_hash(token: str) -> str:
    """How a session token is kept and named: its SHA-256, never the token itself."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def csrf_token(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"admin csrf", hashlib.sha256).hexdigest()


def same(given: str | None, expected: str) -> bool:
    """`given` equals `expected`, compared in constant time; False for none or an
    oversized one."""
    if given is None or len(given) > MAX_TOKEN_CHARS:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )
