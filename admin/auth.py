"""Signing in to the console, staying signed in, signing out.

Invariants:
- signing in takes ADMIN_TOKEN through the form (compared in constant time) and a
  matching sign-in form token (a double-submit cookie set with the form), and gives a new
  random session token in a cookie that is `HttpOnly`, `SameSite=Strict`, `Secure` unless
  the server listens on loopback, and limited to `/admin`; the store keeps only its hash
  and its expiry, so a session lasts `session_seconds` at most and signing out ends it
  everywhere (a copied cookie stops working);
- each sign-in reserves an attempt of its address before its body is read, and an
  address whose `failed_sign_ins` attempts of the window are used (failed, or under way)
  is refused (429) unread, so parallel sign-ins compare at most that many tokens per
  window; on PostgreSQL the count is shared by every worker (`admin.throttle`);
- without a valid session every console path but the sign-in page and static files
  answers 303 to the sign-in page for a browser (an `Accept` naming HTML) and 401 to
  anything else; every POST must carry its form's CSRF token, or is refused (403)
  before its handler runs;
- signing in and out are written to the audit log in the transaction that does them;
  each token compared as wrong is written too (`sign_in_failed`, from which address),
  at most `failed_sign_ins` per address and `MAX_AUDITED` in all per window, so many
  addresses guessing together cannot grow the log without limit.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import BodyPartReader, web

from admin.config import LOGIN_COOKIE, PREFIX, SESSION_COOKIE, AdminConfig
from admin.ports import AdminStore
from admin.render import CSRF_KEY, page
from admin.security import MAX_TOKEN_CHARS, csrf_token, same, token_hash
from admin.throttle import SignInThrottle
from admin.uploads import BROKEN_BODY, PendingFiles
from core.domain.audit import AuditEntry
from core.domain.errors import StoreUnavailable
from core.domain.sign_in_limits import SignInLimits

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPEN_PATHS = (f"{PREFIX}/login",)
OPEN_PREFIXES = (f"{PREFIX}/static/",)
MAX_FORM_FIELDS = 20
MAX_PART_FIELD_BYTES = 4096
"""The longest text field of a multipart form (its CSRF token, a title, a role)."""


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in console session: `hash` names it (the store's key), `csrf` its forms'
    token."""

    hash: str
    csrf: str
    expires_at: float

    @property
    def actor(self) -> str:
        """Who this session is in the audit log: a short, stable name, never its token."""
        return f"session {self.hash[:12]}"


SESSION_KEY = web.RequestKey("admin_session", ConsoleSession)
FILES_KEY = web.RequestKey("admin_files", PendingFiles)
"""A multipart form's files, unread, once its leading fields were (`read_form`)."""
MALFORMED_KEY = web.RequestKey("admin_malformed", bool)
"""Set when a multipart form broke off or was malformed before its first file."""
_FORM_KEY = web.RequestKey("admin_form", dict)


class Auth:
    def __init__(
        self,
        config: AdminConfig,
        store: AdminStore,
        *,
        clock: Callable[[], float] = time.time,
        throttle: SignInLimits | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self.throttle: SignInLimits = throttle or SignInThrottle(
            config.failed_sign_ins, config.failure_window_seconds, clock=clock
        )

    # -- the gate ------------------------------------------------------------------------

    @web.middleware
    async def gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Find the request's session; refuse a page without one, a POST without its token."""
        session = await self.session_of(request)
        if session is not None:
            request[SESSION_KEY] = session
            request[CSRF_KEY] = session.csrf
        path = request.path
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return await handler(request)
        if session is None:
            if "text/html" in request.headers.get("Accept", ""):
                raise web.HTTPSeeOther(f"{PREFIX}/login")
            return web.Response(status=401, text="sign in first\n")
        if request.method == "POST":
            form = await read_form(request)
            if not same(form.get("csrf"), session.csrf):
                return refused(request)
        return await handler(request)

    async def session_of(self, request: web.Request) -> ConsoleSession | None:
        token = request.cookies.get(SESSION_COOKIE)
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        hashed = token_hash(token)
        expires_at = await self._store.admin_session_expiry(hashed)
        if expires_at is None or expires_at <= self._clock():
            return None
        return ConsoleSession(hashed, csrf_token(token), expires_at)

    # -- pages ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        if SESSION_KEY in request:
            raise web.HTTPSeeOther(f"{PREFIX}/")
        return self._form(request)

    async def sign_in(self, request: web.Request) -> web.StreamResponse:
        address = request.remote or "unknown"
        counted = counted_as(address)
        reserved = await self.throttle.reserve(counted)  # before the body: see the module
        if reserved.at is None:
            response = self._form(request, status=429, error="Too many failed sign-ins: wait.")
            response.headers["Retry-After"] = str(max(1, round(reserved.wait)))
            return response
        failed = False
        try:
            form = await read_form(request)
            if not same(form.get("login"), request.cookies.get(LOGIN_COOKIE) or "\x00"):
                return refused(request)
            if not same(form.get("token"), self._config.token):
                failed = True
                return await self._failed(request, address)
            return await self._signed_in(address)
        finally:
            if not failed:
                await self._release(counted, reserved.at)

    async def _release(self, counted: str, at: float) -> None:
        """Give the attempt back; one the store cannot take back stays counted (the
        address waits a little longer), never turning a sign-in into an error."""
        try:
            await self.throttle.release(counted, at)
        except StoreUnavailable as error:
            log.warning("a sign-in attempt of %s stays counted: %s", counted, error)

    async def _failed(self, request: web.Request, address: str) -> web.Response:
        log.info("a failed sign-in to the console from %s", address)
        left = await self.throttle.take_audit_slot()
        if left is not None:
            detail = f"from {address}"
            if left == 0:
                detail += "; the next failed sign-ins of this window are not logged"
            await self._store.add_audit(
                AuditEntry(self._clock(), "anonymous", "sign_in_failed", detail=detail)
            )
        return self._form(request, status=401, error="That is not the token.")

    async def _signed_in(self, address: str) -> web.StreamResponse:
        token = secrets.token_urlsafe(32)
        now = self._clock()
        session = ConsoleSession(token_hash(token), csrf_token(token), now + self._seconds)
        await self._store.add_admin_session(
            session.hash,
            expires_at=session.expires_at,
            audit=AuditEntry(now, session.actor, "sign_in", detail=f"from {address}"),
        )
        response = web.HTTPSeeOther(f"{PREFIX}/")
        self._set_cookie(response, SESSION_COOKIE, token, self._seconds)
        response.del_cookie(LOGIN_COOKIE, path=PREFIX)
        raise response

    async def sign_out(self, request: web.Request) -> web.StreamResponse:
        session: ConsoleSession = request[SESSION_KEY]
        await self._store.end_admin_session(
            session.hash, AuditEntry(self._clock(), session.actor, "sign_out")
        )
        response = web.HTTPSeeOther(f"{PREFIX}/login")
        response.del_cookie(SESSION_COOKIE, path=PREFIX)
        raise response

    # -- helpers -------------------------------------------------------------------------

    @property
    def _seconds(self) -> int:
        return self._config.session_seconds

    def _set_cookie(
        self, response: web.StreamResponse, name: str, value: str, max_age: int
    ) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=PREFIX,
            httponly=True,
            secure=self._config.secure_cookies,
            samesite="Strict",
        )

    def _form(self, request: web.Request, *, status: int = 200, error: str = "") -> web.Response:
        login = secrets.token_urlsafe(24)
        response = page(request, "login.html", status=status, login=login, error=error)
        self._set_cookie(response, LOGIN_COOKIE, login, 3600)
        return response


async def read_form(request: web.Request) -> dict[str, str]:
    """The request's form fields (text only, the first of each name); read once a request.

    A multipart form is read only up to its first file: its fields must come first (a
    browser sends them in the form's order), and its files are left unread for the
    handler (`FILES_KEY`), so none is read before the CSRF token was checked."""
    cached = request.get(_FORM_KEY)
    if cached is not None:
        return cached
    fields: dict[str, str] = {}
    if request.content_type == "application/x-www-form-urlencoded":
        for name, value in (await request.post()).items():
            if isinstance(value, str) and name not in fields and len(fields) < MAX_FORM_FIELDS:
                fields[name] = value
    elif request.content_type == "multipart/form-data":
        fields = await _leading_fields(request)
    request[_FORM_KEY] = fields
    return fields


async def _leading_fields(request: web.Request) -> dict[str, str]:
    """A multipart form's text fields before its first file: at most `MAX_FORM_FIELDS`
    parts of at most `MAX_PART_FIELD_BYTES` each (a longer one is 413); a malformed body
    gives the fields read before it broke."""
    fields: dict[str, str] = {}
    try:
        reader = await request.multipart()
        for _ in range(MAX_FORM_FIELDS):
            part = await reader.next()
            if not isinstance(part, BodyPartReader):
                break  # the end, or a nested multipart: no form's
            if part.filename is not None:
                request[FILES_KEY] = PendingFiles(reader, part)
                break
            value = await _field_value(part)
            if part.name and part.name not in fields:
                fields[part.name] = value
    except BROKEN_BODY as broken:
        if isinstance(broken, web.HTTPRequestEntityTooLarge):
            raise
        request[MALFORMED_KEY] = True
    return fields


async def _field_value(part: BodyPartReader) -> str:
    data = bytearray()
    while chunk := await part.read_chunk(MAX_PART_FIELD_BYTES + 1):
        data += chunk
        if len(data) > MAX_PART_FIELD_BYTES:
            raise web.HTTPRequestEntityTooLarge(MAX_PART_FIELD_BYTES, len(data))
    return data.decode("utf-8", "replace")


def counted_as(address: str) -> str:
    """Whose attempts a client's are: its IPv4 address, or its IPv6 address's /64 network
    (one host usually holds a whole /64, so counting each address would let it guess
    without end); an IPv4 address mapped into IPv6 counts as itself; anything else is
    counted as written."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def refused(request: web.Request) -> web.Response:
    """403: a form without its CSRF token (forged, stale, or from another site)."""
    return page(
        request,
        "error.html",
        status=403,
        title="Refused",
        message="This form has expired or did not come from the console. Reload and try again.",
    )
