"""A knowledge scenario's documents loaded into a variant's store before any run.

Loaded through the same walk, readers and loader as `consultation-bot knowledge add`
(`app.knowledge_cli.load_files`). Invariant: a knowledge base is used whole or not at
all — a missing folder, a folder with no document, or any file that fails to load raises
`ConfigError` naming it, before any model call, so no run reads half a knowledge base.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.knowledge_cli import load_files
from app.settings import Settings
from core.domain.errors import ConfigError
from core.domain.knowledge import KnowledgeBase


async def load_documents(
    settings: Settings, knowledge: KnowledgeBase, folder: Path
) -> dict[int, str]:
    """Every document under `folder` stored in `knowledge`: document id -> its file,
    relative to `folder` (the name a scenario's fact gives it). `folder` is absolute, as
    `evaluation.scenarios` resolves it, so each file's source starts with it."""
    if not await asyncio.to_thread(folder.is_dir):
        raise ConfigError(f"knowledge documents: {folder} is not a folder")
    outcomes = await load_files(settings, knowledge, [folder])
    for outcome in outcomes:
        if outcome.problem:
            raise ConfigError(f"knowledge documents: {outcome.source}: {outcome.problem}")
    if not outcomes:
        raise ConfigError(f"knowledge documents: {folder} holds no document")
    return {
        outcome.document.id: Path(outcome.source).relative_to(folder).as_posix()
        for outcome in outcomes
        if outcome.document is not None
    }
