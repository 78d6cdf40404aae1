"""The console as an aiohttp sub-application mounted at `/admin` on the HTTP server.

Invariants: with no console configured nothing is mounted, so every `/admin` path is the
server's 404; with one, every response under `/admin/` carries the console's security
headers (`admin.security`), unknown paths included, and passes the sign-in gate
(`admin.auth`) first; static files are a fixed set read from the package when the app is
built, so no request names a file on disk.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from importlib import resources

from aiohttp import web

from admin.audit_log import AuditPage
from admin.auth import Auth
from admin.bots import BotPages
from admin.config import PREFIX, AdminConfig
from admin.consultations import ConsultationPages
from admin.dashboard import Dashboard, FigureSource, ToolStatuses, no_tool_servers
from admin.evaluations import EvaluationPages
from admin.knowledge import KnowledgePages
from admin.payments import PaymentPages
from admin.people import BotEngines, PeoplePages
from admin.ports import AdminStore, BotKeeping, UploadLoader
from admin.render import not_found
from admin.security import protect
from core.domain.knowledge import KnowledgeBase
from core.domain.sign_in_limits import SignInLimits
from core.turns.engine import Engine
from core.turns.plan_sales import PlanSales
from core.turns.sales_figures import StarsFigures

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


def build_admin_app(
    config: AdminConfig,
    store: AdminStore,
    engine: Engine,
    *,
    loader: UploadLoader,
    bots: BotKeeping,
    clock: Callable[[], float] = time.time,
    figures: FigureSource | None = None,
    throttle: SignInLimits | None = None,
    knowledge: KnowledgeBase | None = None,
    tool_statuses: ToolStatuses = no_tool_servers,
    payments: PaymentPages | None = None,
    sales: PlanSales | None = None,
    stars: StarsFigures | None = None,
    engines: BotEngines | None = None,
) -> tuple[web.Application, Auth]:
    """The console's routes behind its gate; `loader` stores uploaded files in the store's
    knowledge base; `bots` keeps the bots served besides the deployment's own; `clock` is
    wall time (sessions expire by it); `throttle` counts sign-in attempts (this process's
    own by default); `knowledge` is the knowledge base as
    consultations search it (hybrid with EMBEDDING_MODEL; the store's by default);
    `tool_statuses` where each tool server stands, for the dashboard (none by default);
    `payments` the Payments page (none without one); `sales` the plans sold (a person's
    page shows their plan); `stars` the figures of plans sold, for the dashboard; `engines`
    the engine and plans of a stored bot's people (their page; the deployment's without)."""
    auth = Auth(config, store, clock=clock, throttle=throttle)
    app = web.Application(middlewares=[_headers, auth.gate])
    consultations = ConsultationPages(store, engine.lifecycle, clock)
    evaluations = EvaluationPages(config.reports_dir)
    people = PeoplePages(store, engine, clock, sales=sales, engines=engines)
    searched = store.knowledge if knowledge is None else knowledge
    knowledge_pages = KnowledgePages(store, loader, engine, clock, knowledge=searched)
    add = app.router
    dashboard = Dashboard(engine.figures, figures, tool_statuses, stars, bots=bots.bots)
    add.add_get("/", dashboard.show)
    add.add_get("/login", auth.login_form)
    add.add_post("/login", auth.sign_in)
    add.add_post("/logout", auth.sign_out)
    add.add_get("/consultations", consultations.list)
    add.add_get("/consultations/{consultation_id}", consultations.show)
    add.add_post("/consultations/{consultation_id}/delete", consultations.delete)
    add.add_get("/people", people.list)
    add.add_get("/people/{person}", people.show)
    add.add_post("/people/{person}/quota", people.set_quota)
    add.add_post("/people/{person}/block", people.block)
    add.add_post("/people/{person}/forget-memory", people.forget_memory)
    if payments is not None:
        add.add_get("/payments", payments.list)
        add.add_post("/payments/{charge_id}/refund", payments.refund)
        add.add_post("/payments/{charge_id}/cancel", payments.cancel)
        add.add_post("/payments/{charge_id}/resume", payments.resume)
    add.add_get("/knowledge", knowledge_pages.show)
    add.add_post("/knowledge/upload", knowledge_pages.upload)
    add.add_post("/knowledge/search", knowledge_pages.search)
    add.add_post("/knowledge/{document_id}/delete", knowledge_pages.delete)
    bot_pages = BotPages(store, bots, clock)
    add.add_get("/bots", bot_pages.show)
    add.add_post("/bots/add", bot_pages.add)
    add.add_post("/bots/{bot_id}/set", bot_pages.change)
    add.add_post("/bots/{bot_id}/enable", bot_pages.enable)
    add.add_post("/bots/{bot_id}/disable", bot_pages.disable)
    add.add_post("/bots/{bot_id}/remove", bot_pages.remove)
    add.add_post("/bots/{bot_id}/api_token", bot_pages.set_api_token)
    add.add_post("/bots/{bot_id}/api_token/remove", bot_pages.remove_api_token)
    add.add_get("/audit", AuditPage(store).show)
    add.add_get("/evaluations", evaluations.list)
    add.add_get("/evaluations/{name}", evaluations.show)
    add.add_get("/static/{name}", _static_files())
    add.add_route("*", "/{tail:.*}", _not_found)
    return app, auth


def _static_files() -> Handler:
    folder = resources.files("admin") / "static"
    files = {
        entry.name: (entry.read_bytes(), STATIC_TYPES[suffix])
        for entry in folder.iterdir()
        if (suffix := "." + entry.name.rpartition(".")[2]) in STATIC_TYPES
    }

    async def static(request: web.Request) -> web.StreamResponse:
        found = files.get(request.match_info["name"])
        if found is None:
            return await _not_found(request)
        body, content_type = found
        response = web.Response(body=body, content_type=content_type)
        response.headers["Cache-Control"] = "max-age=3600"
        return response

    return static


async def _not_found(request: web.Request) -> web.StreamResponse:
    return not_found(request, "No such page.")


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The console's security headers on every response, raised ones (redirects) too."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        protect(exc)
        raise
    protect(response, cache=request.path.startswith(f"{PREFIX}/static/"))
    return response
