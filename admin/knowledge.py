"""`/admin/knowledge`: the knowledge base's documents, uploading files to it, deleting a
document, and what a consultation of a role would receive for a query.

Invariants:
- an upload is read to its end within `admin.uploads`' bounds before any file of it is
  loaded (each file within the loader's KNOWLEDGE_MAX_DOCUMENT_BYTES, at most
  `MAX_FILES` files, the body within `MAX_FILES` such files and `FORM_SLACK`, declared
  or read); one that breaks off, passes those bounds or names a title for several
  files stores nothing;
- the title (`MAX_TITLE_CHARS`, printable) and the role (one of the prompt library's,
  or none: every role) are checked before any file is read;
- each file is loaded by the loader the CLI uses (`UploadLoader`): stored whole or not
  at all, its outcome (added, replaced, unchanged, failed and why) shown naming it;
- each file loaded (whatever its outcome) and each document deleted is written to the
  audit log with the document's id and the outcome, right after the change committed
  (the knowledge base's writes take no audit entry: a crash between the two leaves a
  change unlogged, never a logged change undone);
- the search is what `consultation-bot knowledge search` prints, for the first
  `MAX_QUERY_CHARS` of the query (what a consultation's search is at most).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from admin.auth import FILES_KEY, MALFORMED_KEY, SESSION_KEY, read_form
from admin.config import PREFIX
from admin.ports import AdminStore, LoadedUpload, UploadLoader
from admin.render import bad_request, not_found, page
from admin.uploads import Refusal, UploadedFile, read_upload
from core.domain.audit import AuditEntry
from core.domain.knowledge import KnowledgeBase, KnowledgeDocument, Passage
from core.turns.engine import Engine

MAX_FILES = 20
"""Files one upload may hold; the ones after are counted, not read."""
MAX_TITLE_CHARS = 200
MAX_QUERY_CHARS = 2000
"""The longest search: as long as a consultation's (`core.prompting.excerpts`)."""
SEARCH_LIMIT = 5
"""Passages a search shows, as `consultation-bot knowledge search` does by default."""
FORM_SLACK = 1_000_000
"""Bytes an upload's body may hold beyond its files' (boundaries, headers, fields)."""
MAX_ID_DIGITS = 18

NO_SUCH_DOCUMENT = "No such document."
BROKEN = "The upload broke off, or a part of it is malformed (a control character in a file name?)."


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """One uploaded file's line on the page: `outcome` is added, replaced, unchanged or
    failed; `source` names the file."""

    source: str
    outcome: str
    document: KnowledgeDocument | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Found:
    """One passage as the search shows it: its label (K1…), where it comes from (title ›
    section) and page, its document, its score and its text."""

    label: str
    place: str
    page: int | None
    document_id: int
    score: str
    text: str


@dataclass(frozen=True, slots=True)
class Search:
    """A search shown: its query (as searched) and role, and what it found: None when
    the knowledge base is empty."""

    query: str
    role: str
    found: list[Found] | None
    cut: bool = False


class KnowledgePages:
    def __init__(
        self,
        store: AdminStore,
        loader: UploadLoader,
        engine: Engine,
        clock: Callable[[], float],
        *,
        knowledge: KnowledgeBase,
    ) -> None:
        self._store = store
        self._knowledge = knowledge  # as consultations search it
        self._loader = loader
        self._engine = engine
        self._clock = clock

    async def show(self, request: web.Request) -> web.StreamResponse:
        return await self._page(request)

    async def upload(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        title = form.get("title", "").strip()
        role = form.get("role", "")
        if len(title) > MAX_TITLE_CHARS or not title.isprintable():
            return bad_request(request, f"A title is up to {MAX_TITLE_CHARS} printable characters.")
        if role and role not in self._roles():
            return bad_request(request, "Choose one of the roles, or every role.")
        limit = self._loader.max_bytes
        max_total = MAX_FILES * limit + FORM_SLACK
        declared = request.content_length
        if declared is not None and declared > max_total:
            return _refused(request, 413, _over_total(max_total, declared))
        pending = request.get(FILES_KEY)
        if pending is None:
            if request.get(MALFORMED_KEY, False):
                return _refused(request, 400, BROKEN)
            return bad_request(request, "Choose one or more files.")
        upload = await read_upload(
            pending, max_bytes=limit, max_files=MAX_FILES, max_total=max_total
        )
        try:
            if upload.refused is Refusal.BROKEN:
                return _refused(request, 400, BROKEN)
            if upload.refused is Refusal.OVER_TOTAL:
                return _refused(request, 413, _over_total(max_total))
            if upload.refused is Refusal.TOO_MANY:
                return _refused(
                    request, 413, f"The upload holds {upload.given} files; at most {MAX_FILES}."
                )
            if not upload.files:
                return bad_request(request, "Choose one or more files.")
            if title and len(upload.files) > 1:
                return bad_request(
                    request,
                    f"A title names one document; {len(upload.files)} files were given: "
                    "nothing added. Upload them without a title, or one at a time.",
                )
            outcomes = [
                await self._load(request, file, title, role or None) for file in upload.files
            ]
        finally:
            upload.close()
        return await self._page(request, outcomes=outcomes)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, "Deleting needs the confirmation box ticked.")
        document = await self._document(request.match_info["document_id"])
        if document is None:
            return not_found(request, NO_SUCH_DOCUMENT)
        if document.id not in await self._knowledge.remove([document.id]):
            return not_found(request, NO_SUCH_DOCUMENT)  # deleted meanwhile
        await self._audit(
            request,
            "knowledge_delete",
            f"document {document.id}",
            f"{document.title} ({document.source}, {_passages(document.chunks)})",
        )
        raise web.HTTPSeeOther(f"{PREFIX}/knowledge")

    async def search(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        text = form.get("q", "")
        role = form.get("role", "") or self._engine.config.default_role
        if role not in self._roles():
            return bad_request(request, "Choose one of the roles.")
        query = text[:MAX_QUERY_CHARS]
        passages = await self._knowledge.search(query, role=role, limit=SEARCH_LIMIT)
        found = None if passages is None else [_found(n, p) for n, p in enumerate(passages, 1)]
        shown = Search(query, role, found, cut=len(text) > MAX_QUERY_CHARS)
        return await self._page(request, search=shown)

    # -- helpers -------------------------------------------------------------------------

    async def _page(
        self,
        request: web.Request,
        *,
        outcomes: Sequence[FileOutcome] = (),
        search: Search | None = None,
    ) -> web.Response:
        roles = self._roles()
        return page(
            request,
            "knowledge.html",
            documents=await self._knowledge.documents(),
            roles=roles,
            default_role=self._engine.config.default_role,
            max_files=MAX_FILES,
            max_mb=f"{self._loader.max_bytes / 1e6:g}",
            kinds=self._loader.suffixes,
            max_query=MAX_QUERY_CHARS,
            outcomes=outcomes,
            search=search,
        )

    async def _load(
        self, request: web.Request, file: UploadedFile, title: str, role: str | None
    ) -> FileOutcome:
        if file.kept is None:
            source = self._loader.source_of(file.name)
            outcome = FileOutcome(
                source, "failed", reason=_too_large(file.size, self._loader.max_bytes)
            )
        else:
            loaded = await self._loader.load_upload(
                await file.data(), name=file.name, title=title, role=role
            )
            outcome = _outcome(loaded)
        await self._audit(request, "knowledge_upload", *_audited(outcome, role))
        return outcome

    async def _audit(self, request: web.Request, action: str, target: str, detail: str) -> None:
        actor = request[SESSION_KEY].actor
        await self._store.add_audit(AuditEntry(self._clock(), actor, action, target, detail))

    async def _document(self, ident: str) -> KnowledgeDocument | None:
        if not ident.isdigit() or len(ident) > MAX_ID_DIGITS:
            return None
        wanted = int(ident)
        return next((d for d in await self._knowledge.documents() if d.id == wanted), None)

    def _roles(self) -> list[str]:
        """The roles a document may serve: the prompt library's, the default among them."""
        roles = set(self._engine.settings.roles()) | {self._engine.config.default_role}
        return sorted(roles)


def _outcome(loaded: LoadedUpload) -> FileOutcome:
    if loaded.problem or loaded.stored is None:
        return FileOutcome(loaded.source, "failed", reason=loaded.problem)
    return FileOutcome(loaded.source, loaded.stored.value, loaded.document, reason=loaded.note)


def _audited(outcome: FileOutcome, role: str | None) -> tuple[str, str]:
    """The audit entry's target (the document) and detail (the outcome, naming the file)."""
    document = outcome.document
    if document is None:
        return "", f"failed {outcome.source}: {outcome.reason}"
    serves = f", role {role}" if role else ""
    return (
        f"document {document.id}",
        f"{outcome.outcome} {outcome.source} as {document.title} "
        f"({_passages(document.chunks)}{serves})",
    )


def _found(number: int, passage: Passage) -> Found:
    place = passage.place
    return Found(
        f"K{number}",
        place,
        passage.page,
        passage.document_id,
        f"{passage.score:.3f}",
        passage.text,
    )


def _too_large(size: int, limit: int) -> str:
    """As the loader words a file over the limit (`media.knowledge_files`)."""
    return (
        f"{size / 1e6:.1f} MB, over KNOWLEDGE_MAX_DOCUMENT_BYTES ({limit / 1e6:g} MB);"
        " split it or raise the limit"
    )


def _over_total(limit: int, size: int | None = None) -> str:
    most = f"{limit / 1e6:g} MB ({MAX_FILES} files of KNOWLEDGE_MAX_DOCUMENT_BYTES)"
    if size is None:
        return f"The upload passed {most}, the most one upload holds."
    return f"The upload is {size / 1e6:.1f} MB; one upload holds at most {most}."


def _refused(request: web.Request, status: int, why: str) -> web.Response:
    """A whole upload refused: nothing of it was stored."""
    return page(
        request,
        "error.html",
        status=status,
        title="Not uploaded",
        message=f"{why} Nothing was added.",
    )


def _passages(count: int) -> str:
    return f"{count} {'passage' if count == 1 else 'passages'}"
