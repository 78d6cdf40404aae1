"""What of the knowledge base's retrieval the product bot imports at start, read from
`python -X importtime -m bot` with an empty knowledge base.

A deployment without a knowledge base must not pay for one: the document splitter
(semantic-text-splitter), the loader of files and the CLI are the `knowledge add`
command's, and embeddings' libraries belong to the deployments that set a model for them.
What the bot needs to find out that its knowledge base is empty (the store's search
module and the query's word splitter) is small and imported with the store. Pure: the
bot is run by `bench.runs.Bench.startup_imports`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETRIEVAL_MODULES = (
    "semantic_text_splitter",
    "numpy",
    "core.domain.chunking",
    "media.knowledge_files",
    "app.knowledge_cli",
    "storage.knowledge",
    "storage.sqlite.knowledge",
    "core.domain.search_terms",
    "core.domain.knowledge",
    "core.turns.knowledge_reading",
    "core.prompting.excerpts",
)
"""The modules of retrieval the report names, imported at start or not."""
NOT_AT_START = ("semantic_text_splitter", "numpy", "core.domain.chunking",
                "media.knowledge_files", "app.knowledge_cli")  # fmt: skip
"""Of them, those the bot must not import before it is asked for their work."""


@dataclass(frozen=True)
class Imported:
    module: str
    self_us: int
    cumulative_us: int


def parse_importtime(log: str) -> dict[str, Imported]:
    """Each module `-X importtime` reported (the first time it was imported), by name."""
    found: dict[str, Imported] = {}
    for line in log.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the heading line
        name = fields[2].strip()
        found.setdefault(name, Imported(name, int(fields[0]), int(fields[1])))
    return found


def retrieval_at_start(imported: dict[str, Imported]) -> dict[str, Any]:
    """Which retrieval modules were imported (with their cumulative import time, µs),
    which were not, and which of those imported must not have been."""
    loaded = {name: imported[name].cumulative_us for name in RETRIEVAL_MODULES if name in imported}
    return {
        "modules": len(imported),
        "loaded_us": loaded,
        "not_loaded": [name for name in RETRIEVAL_MODULES if name not in imported],
        "unwanted": [name for name in NOT_AT_START if name in imported],
    }
