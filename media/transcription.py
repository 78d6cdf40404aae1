"""Speech to text through an OpenAI-compatible `audio/transcriptions` service.

Invariants: every failure of the service, once the SDK's own retries are spent, surfaces
as `AttachmentRefused(TRANSCRIPTION_FAILED)` with the cause in `detail` (for the log,
never for the user); a language is sent only as a two-letter ISO-639-1 code, since
services refuse anything else; what the service reports having billed (tokens, or the
audio's seconds) comes back with the text, to be charged.
"""

from __future__ import annotations

import logging
import re

import openai
from openai import AsyncOpenAI, omit
from openai.types.audio.transcription import Transcription as TranscriptionResult
from openai.types.audio.transcription import UsageDuration, UsageTokens

from core.domain.attachments import Transcription
from core.domain.consultation import Usage
from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.config import TranscriptionEndpoint

log = logging.getLogger(__name__)

_ISO_639_1 = re.compile(r"[a-z]{2}")


def iso_639_1(language: str | None) -> str | None:
    """ "ru" for "ru", "RU" or "ru-RU"; None for None or what is not such a code."""
    if not language:
        return None
    code = re.split(r"[-_]", language.strip().lower(), maxsplit=1)[0]
    return code if _ISO_639_1.fullmatch(code) else None


class OpenAITranscriber:
    """`core.domain.ports.Transcriber` backed by `openai.AsyncOpenAI` (one connection pool)."""

    def __init__(self, endpoint: TranscriptionEndpoint, *, client: AsyncOpenAI | None = None):
        self.model = endpoint.model
        self._owns_client = client is None
        self._client = client or AsyncOpenAI(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout_seconds,
            max_retries=endpoint.max_retries,
        )

    async def transcribe(
        self, audio: bytes, *, filename: str, language: str | None = None
    ) -> Transcription:
        code = iso_639_1(language)
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.model, file=(filename, audio), language=omit if code is None else code
            )
        except openai.APIError as exc:
            status = getattr(exc, "status_code", None)
            cause = f"HTTP {status}: {exc.message}" if status else f"{type(exc).__name__}: {exc}"
            log.warning("transcription of %s (%d bytes) failed: %s", filename, len(audio), cause)
            raise AttachmentRefused(
                AttachmentProblem.TRANSCRIPTION_FAILED, cause, name=filename
            ) from None
        return _billed(result, self.model)

    async def close(self) -> None:
        """Close the connection pool if this transcriber created it."""
        if self._owns_client:
            await self._client.close()


def _billed(result: TranscriptionResult, model: str) -> Transcription:
    """The text with the usage the service reported: tokens, seconds of audio, or none
    (older services and local servers report nothing)."""
    reported = getattr(result, "usage", None)
    if isinstance(reported, UsageTokens):
        usage = Usage(reported.input_tokens, reported.output_tokens)
        return Transcription(result.text, model, usage=usage)
    if isinstance(reported, UsageDuration):
        return Transcription(result.text, model, seconds=max(reported.seconds, 0.0))
    return Transcription(result.text, model)
