"""The console's uploads loaded into the knowledge base exactly as the CLI loads files.

`ConsoleUploads` is the console's `admin.ports.UploadLoader`: `media.knowledge_files`'
loader (its kinds, its size limit, its `upload:` sources) as the runtime makes it
(`app.runtime.Runtime.knowledge_loader`: its one reader pool, its embedder).
"""

from __future__ import annotations

from media.knowledge_files import SUFFIXES, KnowledgeLoader, Loaded, upload_source


class ConsoleUploads:
    """The console's `admin.ports.UploadLoader`: uploads loaded as the CLI loads files."""

    def __init__(self, loader: KnowledgeLoader, *, max_bytes: int) -> None:
        self._loader = loader
        self._max_bytes = max_bytes

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def suffixes(self) -> tuple[str, ...]:
        return SUFFIXES

    def source_of(self, name: str) -> str:
        return upload_source(name)

    async def load_upload(
        self, data: bytes, *, name: str, title: str = "", role: str | None = None
    ) -> Loaded:
        return await self._loader.load_upload(data, name=name, title=title, role=role)
