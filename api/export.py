"""`GET /api/sessions/{id}/export?format=docx|md`: a session as a file to keep.

Invariants: any session, whatever its status, can be exported (reading it never changes
it); the file is the session's transcript (`core.transcript`) as Markdown or DOCX, sent
as an attachment named after its title with safe characters only (the title itself,
percent-encoded, as `filename*`); a format other than
`docx` or `md` is VALIDATION_ERROR, an unknown or malformed id SESSION_NOT_FOUND. A DOCX
is built in a thread, so a long answer never holds up the event loop.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

from aiohttp import web

from api.errors import ApiError
from core.errors import ConsultationError
from core.file_names import ascii_stem, readable_stem
from core.service import ConsultationService
from core.transcript import render_markdown
from media.export_docx import MEDIA_TYPE, built_docx

FORMATS = ("docx", "md")
MAX_NAME_CHARS = 60


class ExportEndpoint:
    """Serves a session's transcript as a file."""

    def __init__(self, service: ConsultationService) -> None:
        self._service = service

    async def export(self, request: web.Request) -> web.Response:
        """The session as `format` (docx or md), as an attachment."""
        kind = request.query.get("format", "docx")
        if kind not in FORMATS:
            raise ApiError("VALIDATION_ERROR", "format: must be docx or md")
        try:
            session_id = str(uuid.UUID(request.match_info["session_id"]))
            consultation = await self._service.sessions.get_session(session_id)
        except (ValueError, ConsultationError):
            raise ApiError("SESSION_NOT_FOUND", "session not found") from None
        transcript = self._service.transcript(consultation)
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
                "Content-Disposition": f'attachment; filename="{stem}.{kind}"; '
                f"filename*=UTF-8''{quote(readable_stem(transcript.title, MAX_NAME_CHARS))}.{kind}",
            },
        )
