"""`consultation-bot knowledge add|list|remove|search|reindex`: the operator's knowledge base,
in the database the bot uses (DB_PATH, or DATABASE_URL).

`add PATH... [--title TEXT] [--role NAME]` loads files and folders (recursively: .md,
.txt, .html, .pdf, .docx) through the bot's document readers (`media.knowledge_files`);
adding a source again replaces it when it changed and costs nothing when it did not.
`list` prints each document; `remove ID...` deletes documents; `search QUERY [--role NAME]`
prints the passages a consultation of that role would receive, best first, with their
scores; `reindex` reads every document again from its source and cuts it anew. Each
file's outcome is one line naming it; the exit code is 1 when any file, id or source
failed (the others are done), 2 for a wrong command or setting.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

from app.knowledge_base import open_knowledge
from app.settings import Settings
from app.stores import open_store
from core.domain.knowledge import KnowledgeBase, KnowledgeDocument, Passage, Stored
from media.knowledge_files import KnowledgeLoader, Loaded, files_in, is_upload
from media.reader_pool import DocumentReaders

EXIT_FAILED = 1
SEARCH_LIMIT = 5


def parser() -> argparse.ArgumentParser:
    parsing = argparse.ArgumentParser(
        prog="consultation-bot knowledge",
        description="The knowledge base: documents the expert reads before it asks and answers.",
    )
    commands = parsing.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add files and folders (.md .txt .html .pdf .docx)")
    add.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    add.add_argument("--title", default="", help="the document's title (one file only)")
    add.add_argument("--role", default=None, help="serve only this role's consultations")
    commands.add_parser("list", help="the documents stored")
    remove = commands.add_parser("remove", help="delete documents by id")
    remove.add_argument("ids", nargs="+", type=int, metavar="ID")
    search = commands.add_parser("search", help="the passages a consultation would receive")
    search.add_argument("query")
    search.add_argument("--role", default=None, help="as a consultation of this role")
    search.add_argument("--limit", type=int, default=SEARCH_LIMIT)
    commands.add_parser("reindex", help="read every document again from its source")
    return parsing


async def run_knowledge(settings: Settings, arguments: argparse.Namespace) -> int:
    """Run one parsed command on the configured store; its exit code."""
    async with contextlib.AsyncExitStack() as closing:
        store = await open_store(settings)
        closing.push_async_callback(store.close)
        opened = open_knowledge(settings, store)  # hybrid with EMBEDDING_MODEL
        closing.push_async_callback(opened.close)
        knowledge = opened.knowledge
        if arguments.command == "list":
            return list_documents(await knowledge.documents())
        if arguments.command == "remove":
            return await remove(knowledge, arguments.ids)
        if arguments.command == "search":
            found = await knowledge.search(
                arguments.query, role=arguments.role, limit=arguments.limit
            )
            return show_passages(found)
        readers = await closing.enter_async_context(DocumentReaders(settings.reader_config()))
        loader = KnowledgeLoader(
            knowledge,
            readers,
            max_bytes=settings.knowledge_max_document_bytes,
            embedder=opened.embedder,
        )
        if arguments.command == "add":
            return await add(loader, arguments.paths, arguments.title, arguments.role)
        return await reindex(knowledge, loader)


async def load_files(
    settings: Settings, knowledge: KnowledgeBase, paths: Sequence[Path]
) -> list[Loaded]:
    """Load files and folders into `knowledge` as `add` does — the same walk of the
    folders, document readers and loader — printing nothing: each path's outcome, in
    order, a failure as a `Loaded` with its problem."""
    files, outcomes = files_in(paths)
    async with DocumentReaders(settings.reader_config()) as readers:
        loader = KnowledgeLoader(
            knowledge, readers, max_bytes=settings.knowledge_max_document_bytes
        )
        for path in files:
            outcomes.append(await loader.load(path))
    return outcomes


async def add(loader: KnowledgeLoader, paths: Sequence[Path], title: str, role: str | None) -> int:
    files, outcomes = files_in(paths)
    for problem in outcomes:
        print(line_of(problem))
    if title and len(files) > 1:
        print(f"--title names one document; {len(files)} files were given: nothing added")
        return EXIT_FAILED
    for path in files:
        loaded = await loader.load(path, title=title, role=role or None)
        print(line_of(loaded))
        outcomes.append(loaded)
    print(summary(outcomes))
    return EXIT_FAILED if any(o.problem for o in outcomes) or not outcomes else 0


async def reindex(knowledge: KnowledgeBase, loader: KnowledgeLoader) -> int:
    outcomes = []
    for document in await knowledge.documents():
        if is_upload(document.source):
            loaded = Loaded(document.source, problem="uploaded, not a file: upload it again")
            print(line_of(loaded))
            outcomes.append(loaded)
            continue
        loaded = await loader.load(
            Path(document.source), title=document.title, role=document.role, again=True
        )
        print(line_of(loaded))
        outcomes.append(loaded)
    print(summary(outcomes))
    return EXIT_FAILED if any(o.problem for o in outcomes) else 0


async def remove(knowledge: KnowledgeBase, ids: Sequence[int]) -> int:
    removed = await knowledge.remove(ids)
    for document_id in ids:
        done = document_id in removed
        print(f"removed #{document_id}" if done else f"no document #{document_id}")
    return 0 if set(removed) == set(ids) else EXIT_FAILED


def list_documents(documents: Sequence[KnowledgeDocument]) -> int:
    if not documents:
        print("The knowledge base is empty: add documents with `consultation-bot knowledge add`.")
        return 0
    for document in documents:
        added = time.strftime("%Y-%m-%d %H:%M", time.gmtime(document.added_at))
        role = f"  role {document.role}" if document.role else ""
        print(
            f"#{document.id}  {document.title}  {document.source}  {document.chunks} passages"
            f"  added {added} UTC{role}"
        )
    return 0


def show_passages(passages: Sequence[Passage] | None) -> int:
    if passages is None:
        print("The knowledge base is empty: add documents with `consultation-bot knowledge add`.")
        return 0
    if not passages:
        print("No passage matches.")
        return 0
    for number, passage in enumerate(passages, start=1):
        place = passage.place
        page = f", page {passage.page}" if passage.page is not None else ""
        print(
            f"[K{number}] {place}{page}"
            f"  (document #{passage.document_id}, score {passage.score:.3f})"
        )
        print("    " + passage.text.replace("\n", "\n    "))
    return 0


def line_of(loaded: Loaded) -> str:
    """One file's outcome, naming it."""
    if loaded.problem:
        return f"failed     {loaded.source}: {loaded.problem}"
    assert loaded.document is not None and loaded.stored is not None
    document = loaded.document
    note = f"; {loaded.note}" if loaded.note else ""
    return (
        f"{loaded.stored.value:<10} #{document.id} {document.title}  {loaded.source}"
        f"  ({document.chunks} {'passage' if document.chunks == 1 else 'passages'}{note})"
    )


def summary(outcomes: Sequence[Loaded]) -> str:
    if not outcomes:
        return "No file to load."
    counts = {kind: sum(1 for o in outcomes if o.stored is kind) for kind in Stored}
    failed = sum(1 for o in outcomes if o.problem)
    parts = [f"{counts[kind]} {kind.value}" for kind in Stored] + [f"{failed} failed"]
    return ", ".join(parts)
