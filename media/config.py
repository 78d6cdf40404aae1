"""The limits and switches of reading attachments, built from the settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IntakeConfig:
    """`voice`: a transcription model is configured; `vision`: the chat model sees images.

    Byte limits are checked before a file is downloaded or decoded where its size is
    known; `max_document_chars` is the text budget of all documents of one turn.
    """

    vision: bool = False
    voice: bool = False
    max_voice_bytes: int = 20_000_000
    max_document_bytes: int = 10_000_000
    max_document_chars: int = 30_000
    max_image_bytes: int = 5_000_000


@dataclass(frozen=True, slots=True)
class TranscriptionEndpoint:
    """An OpenAI-compatible `audio/transcriptions` service."""

    model: str
    api_key: str
    base_url: str | None = None
    timeout_seconds: float = 120.0
    max_retries: int = 2


@dataclass(frozen=True, slots=True)
class ReaderConfig:
    """The reader processes PDF and DOCX documents are parsed in (`media.reader_pool`):
    how many at once, and each document's wall-clock deadline and memory (the CPU time
    it may use is the deadline's)."""

    processes: int = 2
    timeout_seconds: float = 15.0
    memory_mb: int = 512


@dataclass(frozen=True, slots=True)
class EmbeddingEndpoint:
    """An OpenAI-compatible `embeddings` service: `dimensions` is asked of models that
    take it (OpenAI's text-embedding-3), None for the model's own; `batch` texts go in
    one request; `query_seconds` bounds a search's wait for its query's vector."""

    model: str
    api_key: str
    base_url: str | None = None
    dimensions: int | None = None
    batch: int = 64
    timeout_seconds: float = 30.0
    max_retries: int = 2
    query_seconds: float = 5.0
