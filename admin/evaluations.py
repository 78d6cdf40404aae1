"""`/admin/evaluations`: the evaluator's reports in EVAL_REPORTS_DIR, and one report.

Invariants: a report is named by its folder (one run, `<dir>/<name>/report.json`); a name
is accepted only as one plain path segment (letters, digits, `.`, `_`, `-`; not `.` or
`..`) whose resolved folder is inside the reports folder, so no request reads anything
else (a symbolic link out of it is refused too); at most `MAX_REPORTS` folders are listed
and a report larger than `MAX_REPORT_BYTES` is not opened; a report that does not read
as one is shown as unreadable, never as an error of the console. The file is read on a
worker thread. Everything shown is escaped by the templates.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from admin.render import not_found, page

REPORT_FILE = "report.json"
MAX_REPORTS = 200
MAX_REPORT_BYTES = 32_000_000
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True, slots=True)
class ReportEntry:
    name: str
    size: int
    modified: float


def report_path(reports_dir: Path, name: str) -> Path | None:
    """The report file of the run `name`, or None when the name is not one plain folder
    inside `reports_dir` holding a report."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        return None
    try:
        root = reports_dir.resolve()
        path = (root / name / REPORT_FILE).resolve()
    except (OSError, RuntimeError):
        return None
    if not path.is_relative_to(root) or path.parent.parent != root or not path.is_file():
        return None
    return path


def list_reports(reports_dir: Path) -> list[ReportEntry]:
    """The runs with a report, newest first (by folder name: the evaluator names them by
    UTC time), at most `MAX_REPORTS`."""
    try:
        names = sorted((p.name for p in reports_dir.iterdir() if p.is_dir()), reverse=True)
    except OSError:
        return []
    entries = []
    for name in names:
        path = report_path(reports_dir, name)
        if path is None:
            continue
        stat = path.stat()
        entries.append(ReportEntry(name, stat.st_size, stat.st_mtime))
        if len(entries) >= MAX_REPORTS:
            break
    return entries


def read_report(path: Path) -> dict[str, Any] | None:
    """The report's JSON object, or None for one too large or not a JSON object."""
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            return None
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _rows(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class EvaluationPages:
    def __init__(self, reports_dir: Path) -> None:
        self._dir = reports_dir

    async def list(self, request: web.Request) -> web.StreamResponse:
        reports = await asyncio.to_thread(list_reports, self._dir)
        return page(request, "evaluations.html", reports=reports, folder=str(self._dir))

    async def show(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = await asyncio.to_thread(report_path, self._dir, name)
        if path is None:
            return not_found(request, "No such report.")
        report = await asyncio.to_thread(read_report, path)
        if report is None:
            return page(
                request,
                "error.html",
                status=422,
                title="Unreadable",
                message="This report is not a report the evaluator wrote, or is too large.",
            )
        summary = report.get("summary")
        models = report.get("models")
        return page(
            request,
            "evaluation.html",
            name=name,
            started_at=str(report.get("started_at", "")),
            models=models if isinstance(models, dict) else {},
            variants=_rows(summary.get("variants") if isinstance(summary, dict) else None),
            results=_rows(report.get("results")),
        )
