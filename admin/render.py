"""The console's pages from Jinja2 templates shipped in the package.

Invariants: autoescape is on for every template, so any text reaches the page escaped
unless it passed through `admin.markdown.render` (safe mode); every stored text shown
goes through `admin.text.reveal` first (the `shown` and `markdown` filters); an undefined
name in a template is an error, not an empty string.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from admin.markdown import render
from admin.text import reveal

CSRF_KEY = web.RequestKey("admin_csrf", str)
"""The CSRF token of the request's console session, when it has one."""


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _markdown(text: str) -> Markup:
    return render(reveal(text))


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("admin", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters["shown"] = reveal
ENVIRONMENT.filters["markdown"] = _markdown
ENVIRONMENT.filters["when"] = _when

NAV = [
    ("consultations", "Consultations"),
    ("people", "People"),
    ("payments", "Payments"),
    ("knowledge", "Knowledge"),
    ("bots", "Bots"),
    ("audit", "Audit log"),
    ("evaluations", "Evaluations"),
]
"""The console's sections (path under /admin/, title), in the menu's order."""


def page(request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
    """`template` rendered for `request` (its session's CSRF token and the menu included)."""
    csrf = request.get(CSRF_KEY)
    text = ENVIRONMENT.get_template(template).render(
        csrf=csrf or "",
        signed_in=csrf is not None,
        nav=NAV,
        **context,
    )
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def bad_request(request: web.Request, message: str) -> web.Response:
    """400: a query or form the console cannot use, saying why."""
    return page(request, "error.html", status=400, title="Not understood", message=message)


def not_found(request: web.Request, message: str) -> web.Response:
    """404: what the path names does not exist (or no longer does)."""
    return page(request, "error.html", status=404, title="Not found", message=message)
