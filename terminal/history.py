"""The terminal's `/history` and `/export [N] [PATH]`.

Invariants: `/history` lists the terminal's newest consultations numbered as `/export N`
reads them (1 = newest); `/export` writes the latest consultation (or number N) as a
DOCX and a Markdown file into PATH, an existing directory (the current one when not
given), named from its title (`core.prompting.file_names`) and labelled in the language the
consultation is written in (the terminal has no interface language but English; English
when it cannot be told); an existing file is never overwritten: both files take the
first suffix " (2)", " (3)" … that is free for both, and each is created exclusively, so
a file made meanwhile is not overwritten either; a failed write leaves neither file.
The DOCX is built and the files are written in a thread.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.prompting.file_names import readable_stem
from core.turns.engine import Engine
from core.turns.history import numbered, request_line
from core.turns.transcript import render_markdown, transcript_of
from i18n.document_labels import document_labels
from i18n.languages import SOURCE
from i18n.translate import t
from media.export_docx import built_docx

SHOWN_REQUEST_CHARS = 70
MAX_SUFFIX = 1000
"""Suffixes tried before giving up: a folder that full of one title is a mistake."""
_NUMBER = re.compile("[1-9][0-9]{0,3}")


class ExportRefused(Exception):
    """An /export that wrote nothing; the message says why."""


@dataclass(frozen=True, slots=True)
class Written:
    docx: Path
    markdown: Path


async def history_lines(engine: Engine, key: str) -> str:
    """The numbered list, newest first, or a line saying there is none."""
    items = await engine.history.recent(key)
    if not items:
        return "[no consultations yet]"
    lines = []
    for number, item in enumerate(items, 1):
        date = datetime.fromtimestamp(item.created_at, UTC)
        status = t("en", f"history_{item.status.value}")
        rounds = f"{item.current_round} of {item.max_rounds} rounds"
        request = request_line(item.request, SHOWN_REQUEST_CHARS)
        lines.append(f"{number:>2}. {date:%Y-%m-%d %H:%M} UTC  {status}, {rounds}  {request}")
    return "\n".join(lines)


async def export_files(engine: Engine, key: str, argument: str) -> Written:
    """Write the consultation `argument` names ("[N] [PATH]") as DOCX and Markdown;
    `ExportRefused` when there is none or PATH is not a directory, nothing written."""
    number, folder = _parsed(argument)
    if number is None:
        consultation = await engine.history.find(key, None)
    else:
        history = await engine.history.recent(key)
        chosen = numbered(history, number)
        if chosen is None and history:
            raise ExportRefused(f"no consultation number {number}: /history lists 1–{len(history)}")
        consultation = None if chosen is None else await engine.history.find(key, chosen.id)
    if consultation is None:
        raise ExportRefused("nothing to export yet: ask a question first")
    language = engine.history.written_language(consultation) or SOURCE
    transcript = transcript_of(consultation, document_labels(language))
    markdown = render_markdown(transcript).encode()
    stem = readable_stem(transcript.title or transcript.labels.untitled)

    document = await built_docx(transcript)
    return await asyncio.to_thread(_write, folder, stem, document, markdown)


def _parsed(argument: str) -> tuple[int | None, Path]:
    """(N or None, the folder): a first word of digits is N, the rest is PATH."""
    first, _, rest = argument.strip().partition(" ")
    number = None
    if _NUMBER.fullmatch(first):
        number, argument = int(first), rest
    folder = Path(argument.strip() or ".").expanduser().resolve()
    if not folder.is_dir():
        raise ExportRefused(f"{folder} is not a directory: nothing was written")
    return number, folder


def _write(folder: Path, stem: str, docx: bytes, markdown: bytes) -> Written:
    for n in range(1, MAX_SUFFIX + 1):
        name = stem if n == 1 else f"{stem} ({n})"
        pair = Written(folder / f"{name}.docx", folder / f"{name}.md")
        if pair.docx.exists() or pair.markdown.exists():
            continue
        try:
            _create(pair.docx, docx)
        except FileExistsError:  # made meanwhile: the next suffix
            continue
        try:
            _create(pair.markdown, markdown)
        except BaseException as exc:  # no DOCX left without its Markdown
            pair.docx.unlink(missing_ok=True)
            if isinstance(exc, FileExistsError):
                continue
            raise
        return pair
    raise ExportRefused(f"{folder} already holds {MAX_SUFFIX} exports named {stem!r}")


def _create(path: Path, data: bytes) -> None:
    """Write a new file whole, or leave none; `FileExistsError` when the name is taken."""
    with path.open("xb") as file:
        try:
            file.write(data)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
