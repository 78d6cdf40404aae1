"""OpenAITranscriber: the real openai SDK against the fake transcription server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from core.domain.attachments import Transcription
from core.domain.consultation import Usage
from core.domain.errors import AttachmentProblem, AttachmentRefused
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from media.config import TranscriptionEndpoint
from media.transcription import OpenAITranscriber, iso_639_1

OGG = b"OggS\x00\x02" + bytes(200)

Make = Callable[..., OpenAITranscriber]


@pytest.fixture
async def make_transcriber(
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> AsyncIterator[Make]:
    """Transcribers pointed at the fake server, closed after the test."""
    made: list[OpenAITranscriber] = []

    def make(*, max_retries: int = 0, base_url: str | None = None) -> OpenAITranscriber:
        endpoint = TranscriptionEndpoint(
            model="whisper-test",
            api_key="sk-test",
            base_url=base_url or transcription_server.base_url,
            timeout_seconds=10,
            max_retries=max_retries,
        )
        made.append(OpenAITranscriber(endpoint))
        return made[-1]

    yield make
    for transcriber in made:
        await transcriber.close()


async def test_the_audio_goes_up_with_its_name_and_model_and_the_text_comes_back(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    transcription_server.script("Как настроить резервное копирование?")

    heard = await make_transcriber().transcribe(OGG, filename="voice.ogg")

    assert heard == Transcription("Как настроить резервное копирование?", "whisper-test")
    [call] = transcription_server.calls
    assert (call.filename, call.model, call.size, call.data) == (
        "voice.ogg",
        "whisper-test",
        len(OGG),
        OGG,
    )
    assert call.language is None


@pytest.mark.parametrize(
    ("given", "sent"), [("ru", "ru"), ("ru-RU", "ru"), ("EN_us", "en"), ("russian", None)]
)
async def test_a_language_is_sent_as_a_two_letter_code_or_not_at_all(
    transcription_server: FakeTranscriptionServer,  # noqa: F811
    make_transcriber: Make,
    given: str,
    sent: str | None,
) -> None:
    await make_transcriber().transcribe(OGG, filename="voice.ogg", language=given)

    assert transcription_server.calls[0].language == sent


async def test_tokens_the_service_reports_come_back_with_the_text(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    transcription_server.usage = {
        "type": "tokens",
        "input_tokens": 120,
        "output_tokens": 9,
        "total_tokens": 129,
    }

    heard = await make_transcriber().transcribe(OGG, filename="voice.ogg")

    assert (heard.usage, heard.seconds) == (Usage(120, 9), None)


async def test_seconds_the_service_reports_come_back_with_the_text(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    transcription_server.usage = {"type": "duration", "seconds": 42.5}

    heard = await make_transcriber().transcribe(OGG, filename="voice.ogg")

    assert (heard.usage, heard.seconds) == (None, 42.5)


def test_iso_639_1_of_nothing_is_nothing() -> None:
    assert iso_639_1(None) is None
    assert iso_639_1("") is None


async def test_a_server_error_is_a_transcription_failure_with_the_status_in_the_detail(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    transcription_server.fail(500)

    with pytest.raises(AttachmentRefused) as refused:
        await make_transcriber().transcribe(OGG, filename="voice.ogg")

    assert refused.value.problem is AttachmentProblem.TRANSCRIPTION_FAILED
    assert "500" in refused.value.detail
    assert len(transcription_server.calls) == 1


async def test_the_sdk_retries_a_failure_before_giving_up(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    transcription_server.fail(503, times=1)
    transcription_server.script("second time lucky")

    heard = await make_transcriber(max_retries=1).transcribe(OGG, filename="voice.ogg")

    assert heard.text == "second time lucky"
    assert len(transcription_server.calls) == 2


async def test_a_service_that_cannot_be_reached_is_a_transcription_failure(
    transcription_server: FakeTranscriptionServer,  # noqa: F811 - the fixture imported above
    make_transcriber: Make,
) -> None:
    gone = transcription_server.base_url
    await transcription_server.stop()

    with pytest.raises(AttachmentRefused) as refused:
        await make_transcriber(base_url=gone).transcribe(OGG, filename="voice.ogg")

    assert refused.value.problem is AttachmentProblem.TRANSCRIPTION_FAILED
    assert "Connection" in refused.value.detail
