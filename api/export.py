"""`GET /api/sessions/{id}/export?format=docx|md&language=…`: a session as a file to keep.

Invariants: any session, whatever its status, can be exported (reading it never changes
it); the file is the session's transcript (`core.turns.transcript`) as Markdown or DOCX, sent
as an attachment named after its title with safe characters only (the title itself,
percent-encoded, as `filename*`); only a session of the bot `?bot=` names (`api.bots`) is
found; a format other than
`docx` or `md` is VALIDATION_ERROR, an unknown or malformed id SESSION_NOT_FOUND. A DOCX
is built in a thread, so a long answer never holds up the event loop.

Its labels are in one of the languages given (`TranscriptLanguages`): the `language`
parameter's (a language it does not name is VALIDATION_ERROR), else the first of
`Accept-Language` it names (by weight, then order), else the language the session's user
writes in, else English. A tag names a language by its code (`pt-BR`, `pt_br`) or its base
(`pt`, `zh-TW`, `de-AT` name `pt_BR`, `zh_Hans`, `de`), as a Telegram client's does.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

from aiohttp import web

from api.bots import BotEngines, query_bot, served
from api.errors import ApiError
from core.domain.errors import ConsultationError
from core.prompting.file_names import ascii_stem, readable_stem
from core.turns.transcript import TranscriptLanguages, render_markdown, transcript_of
from media.export_docx import MEDIA_TYPE, built_docx

FORMATS = ("docx", "md")
MAX_NAME_CHARS = 60
MAX_ACCEPTED = 32
"""Accept-Language entries read at most: a header is a few; more is noise, not a wish."""


class ExportEndpoint:
    """Serves a session's transcript as a file."""

    def __init__(self, bots: BotEngines, languages: TranscriptLanguages) -> None:
        self._bots = bots
        self._languages = languages

    async def export(self, request: web.Request) -> web.Response:
        """The session as `format` (docx or md), as an attachment."""
        kind = request.query.get("format", "docx")
        if kind not in FORMATS:
            raise ApiError("VALIDATION_ERROR", "format: must be docx or md")
        asked = request.query.get("language")
        codes = self._languages.codes
        if asked is not None and offered_language(asked, codes) is None:
            raise ApiError("VALIDATION_ERROR", f"language: must be one of {', '.join(codes)}")
        engine = (await served(self._bots, request, query_bot(request))).engine
        try:
            session_id = str(uuid.UUID(request.match_info["session_id"]))
            consultation = await engine.sessions.get_session(session_id)
        except (ValueError, ConsultationError):
            raise ApiError("SESSION_NOT_FOUND", "session not found") from None
        language = document_language(
            asked,
            request.headers.get("Accept-Language"),
            engine.history.written_language(consultation),
            codes,
        )
        transcript = transcript_of(consultation, self._languages.labels(language))
        stem = ascii_stem(transcript.title, MAX_NAME_CHARS)
        if kind == "md":
            body = render_markdown(transcript).encode()
            content_type = "text/markdown; charset=utf-8"
        else:
            body = await built_docx(transcript)
            content_type = MEDIA_TYPE
        return web.Response(
            body=body,
            headers={
                "Content-Type": content_type,
                "Content-Language": language.replace("_", "-"),
                "Content-Disposition": f'attachment; filename="{stem}.{kind}"; '
                f"filename*=UTF-8''{quote(readable_stem(transcript.title, MAX_NAME_CHARS))}.{kind}",
            },
        )


def document_language(
    asked: str | None, accept_language: str | None, written: str | None, codes: tuple[str, ...]
) -> str:
    """The code of the language a document is labelled in (see the module's docstring);
    `codes` lists the languages there are, English first."""
    for tag in ([asked] if asked is not None else []) + accepted(accept_language):
        found = offered_language(tag, codes)
        if found is not None:
            return found
    return written if written in codes else codes[0]


def accepted(header: str | None) -> list[str]:
    """The language tags of an Accept-Language header, the most wanted first (a `q` of 0,
    a malformed one, and `*` left out)."""
    weighted: list[tuple[float, int, str]] = []
    for order, entry in enumerate((header or "").split(",")[:MAX_ACCEPTED]):
        tag, _, parameters = entry.partition(";")
        weight = 1.0
        for parameter in parameters.split(";"):
            name, _, value = parameter.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        tag = tag.strip()
        if tag and tag != "*" and 0 < weight <= 1:
            weighted.append((-weight, order, tag))
    return [tag for _, _, tag in sorted(weighted)]


def offered_language(tag: str, codes: tuple[str, ...]) -> str | None:
    """The code among `codes` that a language tag names: the code itself in any case or
    separator, else the first code of its base language; None for none."""
    wanted = tag.strip().lower().replace("_", "-")
    for code in codes:
        if code.lower().replace("_", "-") == wanted:
            return code
    base = wanted.split("-")[0]
    return (
        next((code for code in codes if code.lower().split("_")[0] == base), None) if base else None
    )
