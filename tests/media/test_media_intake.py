"""Intake: which reader an attachment goes to, the checks before a download, and whole
turns read with the real OpenAITranscriber against the fake transcription server."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docx
import pytest

from app.runtime import open_runtime
from app.settings import Settings, load_settings
from core.domain.attachments import Attachment, Image
from core.domain.errors import AttachmentProblem, AttachmentRefused
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from media.config import IntakeConfig, ReaderConfig, TranscriptionEndpoint
from media.documents import SUPPORTED_DOCUMENTS
from media.intake import Intake
from media.reader_pool import DocumentReaders
from media.transcription import OpenAITranscriber

OGG = b"OggS\x00\x02" + bytes(300)
MP3 = b"ID3\x04\x00\x00" + bytes(300)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(100)
M4A = b"\x00\x00\x00\x20ftypM4A " + bytes(100)
MP4 = b"\x00\x00\x00\x20ftypisom" + bytes(100)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(100)
GIF = b"GIF89a" + bytes(50)
WEBP = b"RIFF\x30\x00\x00\x00WEBPVP8 " + bytes(50)
BMP = b"BM" + bytes(100)


def png() -> bytes:
    """A real 1×1 PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def docx_file() -> bytes:
    document = docx.Document()
    document.add_paragraph("Hello from Word")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.fixture
async def transcriber(
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> AsyncIterator[OpenAITranscriber]:
    endpoint = TranscriptionEndpoint(
        model="whisper-test",
        api_key="sk-test",
        base_url=transcription_server.base_url,
        max_retries=0,
    )
    client = OpenAITranscriber(endpoint)
    yield client
    await client.close()


_READERS: list[DocumentReaders] = []


@pytest.fixture(autouse=True)
async def close_readers() -> AsyncIterator[None]:
    """The document readers `intake()` opened are closed after each test."""
    yield
    while _READERS:
        await _READERS.pop().close()


def intake(transcriber: OpenAITranscriber | None = None, **config: Any) -> Intake:
    readers = DocumentReaders(ReaderConfig())
    _READERS.append(readers)
    return Intake(IntakeConfig(**config), transcriber, readers)


# -- kind_of --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "mime", "data", "hint", "kind"),
    [
        # the edge's hint wins over everything
        ("voice.ogg", "audio/ogg", OGG, "voice", "voice"),
        ("video_note.mp4", "video/mp4", MP4, "voice", "voice"),
        ("photo.jpg", None, JPEG, "photo", "photo"),
        # then the MIME type
        ("x", "audio/ogg", b"", None, "voice"),
        ("x", "audio/mpeg", b"", None, "voice"),
        ("x", "image/png", b"", None, "photo"),
        ("x", "text/plain", b"", None, "document"),
        ("x", "application/json", b"", None, "document"),
        ("x", "application/vnd.api+json", b"", None, "document"),
        ("x", "application/pdf", b"", None, "document"),
        ("x", "video/mp4", MP4, None, "unsupported"),
        ("x", "audio/midi", b"", None, "unsupported"),
        ("notes.txt", "image/jpeg", b"", None, "photo"),
        # then the extension (a vague or missing MIME type has no say)
        ("voice.oga", None, b"", None, "voice"),
        ("talk.m4a", "application/octet-stream", b"", None, "voice"),
        ("scan.JPG", None, b"", None, "photo"),
        ("main.rs", None, b"", None, "document"),
        ("report.docx", None, b"", None, "document"),
        ("Dockerfile", None, b"FROM python", None, "document"),
        ("backup.tar.gz", None, b"", None, "unsupported"),
        ("sheet.xlsx", None, b"", None, "unsupported"),
        ("clip.mp4", None, MP4, None, "unsupported"),
        # then the bytes
        ("upload", None, b"%PDF-1.4\n", None, "document"),
        ("upload", "application/zip", docx_file(), None, "document"),
        ("upload", None, png(), None, "photo"),
        ("upload", None, JPEG, None, "photo"),
        ("upload", None, GIF, None, "photo"),
        ("upload", None, WEBP, None, "photo"),
        ("upload", None, OGG, None, "voice"),
        ("upload", None, MP3, None, "voice"),
        ("upload", None, WAV, None, "voice"),
        ("upload", None, M4A, None, "voice"),
        ("upload", None, MP4, None, "unsupported"),
        ("upload", None, "Привет, это заметка".encode(), None, "document"),
        ("upload", None, "utf-16 text".encode("utf-16"), None, "document"),
        ("upload", None, b"\x7fELF\x02\x01\x01" + bytes(50), None, "unsupported"),
        ("upload", None, bytes(range(1, 32)) * 10, None, "unsupported"),
    ],
)
def test_kind_of(name: str, mime: str | None, data: bytes, hint: str | None, kind: str) -> None:
    assert intake().kind_of(Attachment(name, mime, data, kind_hint=hint)) == kind


# -- check_size -----------------------------------------------------------------------------


def check(checker: Intake, kind: str, size: int | None) -> AttachmentRefused | None:
    try:
        checker.check_size(kind, size, name="file")
    except AttachmentRefused as refused:
        return refused
    return None


def test_voice_is_off_without_a_transcriber_whatever_its_size() -> None:
    for size in (None, 10):
        refused = check(intake(), "voice", size)
        assert refused is not None and refused.problem is AttachmentProblem.VOICE_OFF


def test_photos_are_off_when_the_model_cannot_see_images() -> None:
    refused = check(intake(vision=False), "photo", None)
    assert refused is not None and refused.problem is AttachmentProblem.VISION_OFF
    assert check(intake(vision=True), "photo", None) is None


@pytest.mark.parametrize(
    ("kind", "setting"),
    [
        ("voice", "max_voice_bytes"),
        ("document", "max_document_bytes"),
        ("photo", "max_image_bytes"),
    ],
)
def test_each_kind_has_its_byte_limit(
    transcriber: OpenAITranscriber, kind: str, setting: str
) -> None:
    checker = intake(transcriber, vision=True, **{setting: 1000})

    assert check(checker, kind, 1000) is None
    assert check(checker, kind, None) is None  # unknown: only the on/off checks
    refused = check(checker, kind, 1001)
    assert refused is not None
    assert (refused.problem, refused.limit, refused.name) == (
        AttachmentProblem.TOO_LARGE,
        1000,
        "file",
    )


def test_an_unsupported_kind_is_refused_naming_what_is_supported() -> None:
    refused = check(intake(), "unsupported", 10)
    assert refused is not None and refused.problem is AttachmentProblem.UNSUPPORTED
    assert SUPPORTED_DOCUMENTS in refused.detail


# -- voice ----------------------------------------------------------------------------------


async def test_a_voice_note_becomes_the_transcript_of_the_message(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    transcription_server.script("  Как перенести базу на новый сервер?  ")

    message_input = await intake(transcriber).read(
        "", [Attachment("voice.ogg", "audio/ogg", OGG, kind_hint="voice")], language="ru"
    )

    assert message_input.transcript == "Как перенести базу на новый сервер?"
    assert message_input.stored_text == "[voice] Как перенести базу на новый сервер?"
    [call] = transcription_server.calls
    assert (call.filename, call.model, call.language, call.data) == (
        "voice.ogg",
        "whisper-test",
        "ru",
        OGG,
    )


@pytest.mark.parametrize(
    ("name", "data", "sent"),
    [
        ("voice.oga", OGG, "voice.ogg"),
        ("memo.mp3", MP3, "memo.mp3"),
        ("", OGG, "voice.ogg"),
        ("recording", WAV, "recording.wav"),
        ("video_note.mp4", MP4, "video_note.mp4"),
    ],
)
async def test_the_service_gets_a_file_name_whose_extension_names_the_format(
    transcription_server: FakeTranscriptionServer,  # noqa: F811
    transcriber: OpenAITranscriber,
    name: str,
    data: bytes,
    sent: str,
) -> None:
    await intake(transcriber).read("", [Attachment(name, None, data, kind_hint="voice")])

    assert transcription_server.calls[0].filename == sent


async def test_a_caption_stays_beside_the_transcript(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    transcription_server.script("the spoken part")

    message_input = await intake(transcriber).read(
        "the typed part", [Attachment("voice.ogg", None, OGG, kind_hint="voice")]
    )

    assert message_input.stored_text == "[voice] the spoken part\n\nthe typed part"


async def test_a_failing_service_refuses_the_voice_note(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    transcription_server.fail(500)

    with pytest.raises(AttachmentRefused) as refused:
        await intake(transcriber).read("", [Attachment("voice.ogg", None, OGG, kind_hint="voice")])

    assert refused.value.problem is AttachmentProblem.TRANSCRIPTION_FAILED


async def test_silence_has_no_text(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    transcription_server.script(" \n ")

    with pytest.raises(AttachmentRefused) as refused:
        await intake(transcriber).read("", [Attachment("voice.ogg", None, OGG, kind_hint="voice")])

    assert (refused.value.problem, refused.value.name) == (AttachmentProblem.NO_TEXT, "voice.ogg")


async def test_voice_without_a_transcriber_is_off() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        await intake().read("", [Attachment("voice.ogg", None, OGG, kind_hint="voice")])

    assert refused.value.problem is AttachmentProblem.VOICE_OFF


async def test_one_voice_note_per_message(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    voices = [Attachment(f"v{n}.ogg", None, OGG, kind_hint="voice") for n in (1, 2)]

    with pytest.raises(AttachmentRefused) as refused:
        await intake(transcriber).read("", voices)

    assert refused.value.problem is AttachmentProblem.UNSUPPORTED
    assert transcription_server.calls == []


@pytest.mark.parametrize(
    "bad",
    [
        Attachment("archive.zip", None, b"PK\x03\x04" + bytes(40)),
        Attachment("broken.pdf", "application/pdf", b"not a pdf"),
        Attachment("huge.txt", None, b"x" * 2000),
    ],
    ids=["unsupported", "unreadable", "too-large"],
)
async def test_a_message_refused_for_another_file_pays_for_no_transcription(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
    bad: Attachment,
) -> None:
    voice = Attachment("voice.ogg", None, OGG, kind_hint="voice")

    with pytest.raises(AttachmentRefused):
        await intake(transcriber, max_document_bytes=1000).read("", [voice, bad])

    assert transcription_server.calls == []


# -- photos ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime"),
    [(png(), "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
async def test_a_photo_becomes_an_image_typed_by_its_bytes(data: bytes, mime: str) -> None:
    # The name and MIME type claim JPEG; the bytes decide.
    message_input = await intake(vision=True).read(
        "What is this?", [Attachment("x.jpg", "image/jpeg", data)]
    )

    assert message_input.images == (Image(mime, data),)
    assert message_input.stored_text == "[photo]\n\nWhat is this?"


async def test_an_image_sent_as_a_file_is_a_photo() -> None:
    message_input = await intake(vision=True).read("", [Attachment("diagram.png", None, png())])

    assert message_input.images == (Image("image/png", png()),)


async def test_a_photo_the_model_cannot_see_is_refused() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        await intake(vision=False).read("", [Attachment("x.png", None, png(), kind_hint="photo")])

    assert refused.value.problem is AttachmentProblem.VISION_OFF


async def test_a_photo_over_the_image_limit_is_too_large() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        await intake(vision=True, max_image_bytes=100).read("", [Attachment("x.jpg", None, JPEG)])

    assert (refused.value.problem, refused.value.limit) == (AttachmentProblem.TOO_LARGE, 100)


async def test_an_image_format_the_model_does_not_take_is_unsupported() -> None:
    with pytest.raises(AttachmentRefused) as refused:
        await intake(vision=True).read("", [Attachment("scan.bmp", "image/bmp", BMP)])

    assert refused.value.problem is AttachmentProblem.UNSUPPORTED


# -- whole turns ----------------------------------------------------------------------------


async def test_photos_and_documents_together() -> None:
    files = [
        Attachment("a.png", None, png()),
        Attachment("b.jpg", None, JPEG),
        Attachment("notes.md", "text/markdown", b"# Notes\nall good"),
        Attachment("letter.docx", None, docx_file()),
    ]

    message_input = await intake(vision=True).read("Compare these", files)

    assert [image.mime for image in message_input.images] == ["image/png", "image/jpeg"]
    assert message_input.stored_text == (
        "[photo] ×2\n\nCompare these\n\n"
        '<document name="notes.md">\n# Notes\nall good\n</document>\n\n'
        '<document name="letter.docx">\nHello from Word\n</document>'
    )


async def test_voice_and_a_document_in_one_message(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    transcriber: OpenAITranscriber,
) -> None:
    transcription_server.script("please check the attached config")
    files = [
        Attachment("nginx.conf", None, b"server { listen 80; }"),
        Attachment("voice.ogg", None, OGG, kind_hint="voice"),
    ]

    message_input = await intake(transcriber).read("", files)

    assert message_input.stored_text == (
        "[voice] please check the attached config\n\n"
        '<document name="nginx.conf">\nserver { listen 80; }\n</document>'
    )


async def test_words_alone_are_the_message() -> None:
    message_input = await intake().read("just text", [])

    assert message_input.stored_text == "just text"
    assert (message_input.transcript, message_input.documents, message_input.images) == (
        None,
        (),
        (),
    )


# -- the runtime ----------------------------------------------------------------------------


def runtime_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(
        openai_api_key="test-key",
        openai_base_url="http://127.0.0.1:9/v1",  # never called here
        llm_model="test-model",
        db_path=tmp_path / "runtime.sqlite3",
        llm_max_retries=0,
        _env_file=None,
        **overrides,
    )


async def test_the_runtime_reads_voice_through_the_configured_transcription_model(
    tmp_path: Path,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    settings = runtime_settings(
        tmp_path,
        transcription_model="whisper-runtime",
        transcription_base_url=transcription_server.base_url,
        llm_vision=True,
        max_document_chars=5000,
    )
    voice = Attachment("voice.ogg", None, OGG, kind_hint="voice")

    async with open_runtime(settings, background=False) as runtime:
        message_input = await runtime.intake.read("", [voice])

    assert message_input.transcript == transcription_server.default_text
    assert transcription_server.calls[0].model == "whisper-runtime"
    assert (runtime.intake.config.vision, runtime.intake.config.max_document_chars) == (True, 5000)


async def test_without_a_transcription_model_the_runtime_has_voice_off(tmp_path: Path) -> None:
    async with open_runtime(runtime_settings(tmp_path), background=False) as runtime:
        with pytest.raises(AttachmentRefused) as refused:
            runtime.intake.check_size("voice", 100)

    assert refused.value.problem is AttachmentProblem.VOICE_OFF
