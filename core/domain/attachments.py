"""What a user brings besides typed words: a voice note, a document, a photo.

Every edge (Telegram, HTTP API, terminal) reduces its attachments to these values with
`media.intake`; the engine only ever sees a `MessageInput`. Invariants:

- A user message is stored as text alone (`MessageInput.stored_text`), so every later round, the
  context budget and both stores stay text-only and bounded. A transcript becomes the
  user's words with a `[voice]` marker; a document's text sits in a delimited block
  carrying its file name; a photo leaves a `[photo]` placeholder.
- Images reach the model only in the round they were sent (as content parts next to the
  stored text); later rounds see the placeholder.
- The document block's format is fixed here and parsed back by `without_document_bodies`,
  so the final round can quote the original request's own words and refer to its
  documents by name instead of repeating them.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from dataclasses import dataclass

from core.domain.consultation import Usage

VOICE_MARKER = "[voice]"
PHOTO_MARKER = "[photo]"
_DOCUMENT_OPEN = '<document name="{name}">'
_DOCUMENT_CLOSE = "</document>"
DOCUMENT_BLOCK = re.compile(r'<document name="([^"\n]*)">\n.*?\n</document>', re.DOTALL)
"""One document block of a stored user message (group 1: the file's name)."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file as the user sent it, before it is read: bytes, a name and a MIME type
    (either may be missing or wrong; `media.intake` decides what the bytes are)."""

    name: str
    mime: str | None
    data: bytes
    kind_hint: str | None = None  # "voice" / "photo" when the edge knows it (Telegram does)


@dataclass(frozen=True, slots=True)
class Transcription:
    """What a transcription service heard, and what it billed for it: tokens (`usage`)
    or the audio's length (`seconds`), whichever it reports; neither when it reports
    nothing (then `core.domain.usage.transcription_usage` estimates)."""

    text: str
    model: str
    usage: Usage | None = None
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """An image for a model that sees images, sent as a data URL."""

    mime: str
    data: bytes

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class DocumentText:
    """The text read from one document; `omitted_chars` were cut to fit the text budget.
    `complete` is False when reading stopped early (a cap on pages, paragraphs, cells or
    characters): more of the document was never read, so `omitted_chars` understates the cut."""

    name: str
    text: str
    omitted_chars: int = 0
    complete: bool = True

    @property
    def cut(self) -> bool:
        return bool(self.omitted_chars) or not self.complete


@dataclass(frozen=True, slots=True)
class MessageInput:
    """One user message: typed words (a caption counts as words), a transcript, documents,
    images. At least one of them is non-empty for a message worth storing."""

    words: str = ""
    transcript: str | None = None
    documents: tuple[DocumentText, ...] = ()
    images: tuple[Image, ...] = ()
    transcription: Transcription | None = None  # what the transcript cost, to be charged

    @property
    def stored_text(self) -> str:
        """The message as the store keeps it and later rounds show it to the model."""
        parts: list[str] = []
        if self.transcript is not None:
            parts.append(f"{VOICE_MARKER} {self.transcript.strip()}")
        if self.images:
            parts.append(
                PHOTO_MARKER if len(self.images) == 1 else f"{PHOTO_MARKER} ×{len(self.images)}"
            )
        if self.words.strip():
            parts.append(self.words.strip())
        for document in self.documents:
            parts.append(document_block(document))
        return "\n\n".join(parts)

    @property
    def omitted_chars(self) -> int:
        return sum(document.omitted_chars for document in self.documents)

    @property
    def documents_cut(self) -> bool:
        """Some document's text is not all there: cut to the budget, or not read to its end."""
        return any(document.cut for document in self.documents)


def document_block(document: DocumentText) -> str:
    """A document's text between delimiters naming it (and saying if it was cut).

    Neither the name nor the text can end the block early: a close tag inside the text
    would let the rest pass for the user's own words, and the name keeps no control or
    format character (a line break, NUL, ESC, a direction override)."""
    name = "".join(_printable(char) for char in document.name.replace('"', "'")).strip()
    body = document.text.strip("\n").replace(_DOCUMENT_CLOSE, "</ document>")
    if not document.complete:
        body += "\n[… the rest of this document was cut: it is longer than could be read]"
    elif document.omitted_chars:
        body += f"\n[… {document.omitted_chars} more characters of this document were cut]"
    return f"{_DOCUMENT_OPEN.format(name=name)}\n{body}\n{_DOCUMENT_CLOSE}"


def _printable(char: str) -> str:
    """`char`, or nothing for a control or format character (as the API drops them)."""
    return "" if unicodedata.category(char) in ("Cc", "Cf") else char


def without_document_bodies(text: str) -> str:
    """`text` with each document block replaced by a one-line reference to it by name."""
    return DOCUMENT_BLOCK.sub(lambda match: f'[document "{match.group(1)}" attached]', text)


def document_names(text: str) -> list[str]:
    """The names of the documents attached in a stored user message, in order."""
    return [match.group(1) for match in DOCUMENT_BLOCK.finditer(text)]
