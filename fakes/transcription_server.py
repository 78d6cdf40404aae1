"""A fake OpenAI-compatible speech-to-text server on 127.0.0.1.

Serves `POST /v1/audio/transcriptions` (multipart: file, model, language,
response_format) as the real service does, so the real openai SDK talks to it.

Invariant: every request is recorded in `calls` before it is answered, and scripted
answers are used strictly in FIFO order — `script(text)` queues a transcript,
`fail(status, times=n)` queues n errors; with nothing queued the answer is
`default_text`. Usage::

    async def test_voice(transcription_server: FakeTranscriptionServer) -> None:
        transcription_server.script("what was said")
        ...  # point a TranscriptionEndpoint at transcription_server.base_url
        assert transcription_server.calls[0].filename == "voice.ogg"
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from fakes.serving import LocalServer

DEFAULT_TEXT = "This is what the voice note says."


@dataclass(frozen=True, slots=True)
class TranscriptionCall:
    """One request as the server received it."""

    filename: str | None
    content_type: str | None
    model: str | None
    language: str | None  # None when the client sent none
    response_format: str | None
    size: int  # bytes of audio
    data: bytes


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str = ""
    status: int | None = None  # an OpenAI-style error with this HTTP status


class FakeTranscriptionServer:
    """Scripted `audio/transcriptions` endpoint; read `calls` afterwards."""

    def __init__(self, *, port: int = 0) -> None:
        self.default_text = DEFAULT_TEXT
        # What the answers report as billed, as services do: {"type": "tokens",
        # "input_tokens": …, "output_tokens": …, "total_tokens": …} or {"type": "duration",
        # "seconds": …}; None: no usage field (older services, local servers).
        self.usage: dict[str, object] | None = None
        self.calls: list[TranscriptionCall] = []
        self._answers: deque[_Answer] = deque()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._server = LocalServer(app, port=port)

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (`TranscriptionEndpoint.base_url`), ending in /v1."""
        return f"{self._server.base_url}/v1"

    def script(self, text: str) -> None:
        """The next call answers `text` (may be empty, as for silence)."""
        self._answers.append(_Answer(text))

    def fail(self, status: int = 500, *, times: int = 1) -> None:
        """The next `times` calls answer an error with HTTP `status`."""
        self._answers.extend(_Answer(status=status) for _ in range(times))

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        data = upload.file.read() if isinstance(upload, web.FileField) else b""
        self.calls.append(
            TranscriptionCall(
                filename=upload.filename if isinstance(upload, web.FileField) else None,
                content_type=upload.content_type if isinstance(upload, web.FileField) else None,
                model=_field(form.get("model")),
                language=_field(form.get("language")),
                response_format=_field(form.get("response_format")),
                size=len(data),
                data=data,
            )
        )
        answer = self._answers.popleft() if self._answers else _Answer(self.default_text)
        if answer.status is not None:
            error = {"message": f"fake failure {answer.status}", "type": "server_error"}
            return web.json_response({"error": error}, status=answer.status)
        if _field(form.get("response_format")) == "text":
            return web.Response(text=answer.text)
        body: dict[str, object] = {"text": answer.text}
        if self.usage is not None:
            body["usage"] = self.usage
        return web.json_response(body)


def _field(value: object) -> str | None:
    return value if isinstance(value, str) else None


@pytest.fixture
async def transcription_server() -> AsyncIterator[FakeTranscriptionServer]:
    """A started fake transcription server, stopped after the test."""
    server = FakeTranscriptionServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
