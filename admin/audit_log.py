"""`/admin/audit`: the audit log, newest first, a page at a time (by entry id)."""

from __future__ import annotations

from aiohttp import web

from admin.config import PREFIX
from admin.ports import AdminStore
from admin.render import page

PAGE = 100


class AuditPage:
    def __init__(self, store: AdminStore) -> None:
        self._store = store

    async def show(self, request: web.Request) -> web.StreamResponse:
        before = request.query.get("before", "")
        before_id = int(before) if before.isdigit() and len(before) < 19 else None
        entries = await self._store.audit_log(before_id=before_id, limit=PAGE + 1)
        more = len(entries) > PAGE
        entries = entries[:PAGE]
        next_link = f"{PREFIX}/audit?before={entries[-1].id}" if more else None
        return page(request, "audit.html", entries=entries, next_link=next_link)
