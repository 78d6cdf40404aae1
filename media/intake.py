"""One user message's attachments read into a `MessageInput`: transcript, document texts, images.

Invariants: every attachment is classified and size-checked before any is read, and the
voice note (the one read that costs money) is transcribed last, so a message refused for
one file never pays for another's transcription; documents are read by the reader pool
(`media.reader_pool`: PDF and DOCX in processes of their own, within a deadline and a
memory limit), so a large or hostile file never stalls the event loop nor grows this
process; all documents of a message share `config.max_document_chars` (see
`media.text.share_budget`), each cut one reporting how much was left out or that it was
not read to its end. A refusal is an `AttachmentRefused` naming the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import PurePath

from core.domain.attachments import Attachment, DocumentText, Image, MessageInput, Transcription
from core.domain.errors import AttachmentProblem, AttachmentRefused
from core.domain.ports import Transcriber
from media import kinds
from media.config import IntakeConfig
from media.documents import SUPPORTED_DOCUMENTS
from media.reader_pool import DocumentReaders
from media.sniff import AUDIO_FORMATS, IMAGE_MIMES, sniff
from media.text import cut, share_budget

SUPPORTED_IMAGES = "JPEG, PNG, WEBP, GIF"
DEFAULT_VOICE_NAME = "voice"
_RENAMED_SUFFIXES = {".oga": ".ogg"}  # some services refuse .oga, none refuses .ogg


class Intake:
    """Reads attachments within `config`'s limits, documents with `readers`; voice only
    with a `transcriber`."""

    def __init__(
        self, config: IntakeConfig, transcriber: Transcriber | None, readers: DocumentReaders
    ) -> None:
        self.config = config
        self.transcriber = transcriber
        self.readers = readers

    def check_size(self, kind: str, size: int | None, *, name: str | None = None) -> None:
        """Refuse before a download: voice without a transcriber (VOICE_OFF), a photo the
        model cannot see (VISION_OFF), a file over its kind's byte limit (TOO_LARGE)."""
        if kind == kinds.UNSUPPORTED:
            raise AttachmentRefused(
                AttachmentProblem.UNSUPPORTED,
                f"supported documents: {SUPPORTED_DOCUMENTS}",
                name=name,
            )
        if kind == kinds.VOICE and self.transcriber is None:
            raise AttachmentRefused(
                AttachmentProblem.VOICE_OFF, "no transcription model", name=name
            )
        if kind == kinds.PHOTO and not self.config.vision:
            raise AttachmentRefused(AttachmentProblem.VISION_OFF, "LLM_VISION is off", name=name)
        limit = self._limit(kind)
        if size is not None and size > limit:
            raise AttachmentRefused(
                AttachmentProblem.TOO_LARGE, f"{kind} of {size} bytes", limit=limit, name=name
            )

    def byte_limit(self, kind: str) -> int:
        """The most bytes a file of `kind` ("voice", "document", "photo") may have: what a
        download of a file of unknown size stops at."""
        return self._limit(kind)

    def check_head(self, head: Attachment, size: int) -> None:
        """`check_size` for a file known by its first bytes and its full size, before it is
        read whole. A head alone cannot prove a DOCX (a ZIP is known by its contents), so
        one that says "unsupported" is held to the document limit and the full read decides."""
        kind = self.kind_of(head)
        checked = kinds.DOCUMENT if kind == kinds.UNSUPPORTED else kind
        self.check_size(checked, size, name=head.name)

    def declared_kind(self, name: str, mime: str | None) -> str | None:
        """What a file's name and MIME type say it is, before it is fetched (None: its
        bytes must tell; see `media.kinds.declared_kind`)."""
        return kinds.declared_kind(name, mime)

    def kind_of(self, attachment: Attachment) -> str:
        """ "voice", "document", "photo" or "unsupported" (see `media.kinds`)."""
        return kinds.kind_of(attachment)

    async def read(
        self,
        words: str,
        attachments: Sequence[Attachment],
        *,
        language: str | None = None,
        owner: str | None = None,
    ) -> MessageInput:
        """The message `words` and `attachments` make; raises `AttachmentRefused`. `owner`
        (who sent them) bounds how many document readers they take at once (None: no
        per-owner bound; see `media.reader_shares`)."""
        sorted_out: dict[str, list[Attachment]] = {kind: [] for kind in kinds.KINDS}
        for attachment in attachments:
            kind = self.kind_of(attachment)
            self.check_size(kind, len(attachment.data), name=attachment.name or None)
            sorted_out[kind].append(attachment)
        voices = sorted_out[kinds.VOICE]
        if len(voices) > 1:
            raise AttachmentRefused(
                AttachmentProblem.UNSUPPORTED,
                "one voice note per message",
                name=voices[1].name or None,
            )
        images = tuple(_image(photo) for photo in sorted_out[kinds.PHOTO])
        documents = await self._documents(sorted_out[kinds.DOCUMENT], owner)
        heard = await self._transcribe(voices[0], language) if voices else None
        return MessageInput(
            words=words,
            transcript=None if heard is None else heard.text,
            documents=documents,
            images=images,
            transcription=heard,
        )

    def _limit(self, kind: str) -> int:
        limits = {
            kinds.VOICE: self.config.max_voice_bytes,
            kinds.DOCUMENT: self.config.max_document_bytes,
            kinds.PHOTO: self.config.max_image_bytes,
        }
        if kind not in limits:
            raise ValueError(f"unknown attachment kind {kind!r}")
        return limits[kind]

    async def _documents(
        self, files: list[Attachment], owner: str | None
    ) -> tuple[DocumentText, ...]:
        budget = self.config.max_document_chars
        found = [
            await self.readers.read(
                file.data,
                name=file.name,
                mime=file.mime,
                max_bytes=self.config.max_document_bytes,
                max_chars=budget,
                owner=owner,
            )
            for file in files
        ]
        allowed = share_budget([len(one.text) for one in found], budget)
        documents = []
        for file, one, limit in zip(files, found, allowed, strict=True):
            kept, omitted = cut(one.text, limit)
            name = file.name or "document"
            documents.append(DocumentText(name, kept, omitted, complete=one.complete))
        return tuple(documents)

    async def _transcribe(self, voice: Attachment, language: str | None) -> Transcription:
        """The voice note heard, its text stripped. An empty transcript is refused
        (NO_TEXT) though it was billed: the message it refuses is never charged, so silence
        costs its sender nothing."""
        assert self.transcriber is not None  # check_size refused voice without one
        filename = voice_filename(voice.name, voice.data)
        heard = await self.transcriber.transcribe(voice.data, filename=filename, language=language)
        if not heard.text.strip():
            raise AttachmentRefused(
                AttachmentProblem.NO_TEXT, "empty transcript", name=voice.name or None
            )
        return dataclasses.replace(heard, text=heard.text.strip())


def voice_filename(name: str, data: bytes) -> str:
    """The name the transcription service gets: its extension names the format, so a
    missing one comes from the bytes, and .oga becomes .ogg."""
    path = PurePath(name or DEFAULT_VOICE_NAME)
    found = sniff(data)
    if not path.suffix and found in AUDIO_FORMATS:
        return f"{path.name}.{found}"
    suffix = _RENAMED_SUFFIXES.get(path.suffix.lower(), path.suffix)
    return path.stem + suffix


def _image(photo: Attachment) -> Image:
    """The photo as an image the model can see; its MIME type comes from its bytes."""
    mime = IMAGE_MIMES.get(sniff(photo.data) or "")
    if mime is None:
        raise AttachmentRefused(
            AttachmentProblem.UNSUPPORTED,
            f"an image that is not {SUPPORTED_IMAGES}",
            name=photo.name or None,
        )
    return Image(mime, photo.data)
