"""`/admin/`: the console's front page, showing the figures of whatever source the
deployment plugs in (`FigureSource`); without one it links to the console's sections."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from admin.render import page


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on the dashboard: what it counts, its value as shown, a note (the
    period, or what it leaves out)."""

    title: str
    value: str
    note: str = ""


class FigureSource(Protocol):
    async def figures(self) -> Sequence[Figure]: ...


class Dashboard:
    def __init__(self, source: FigureSource | None = None) -> None:
        self._source = source

    async def show(self, request: web.Request) -> web.StreamResponse:
        figures = await self._source.figures() if self._source is not None else ()
        return page(request, "dashboard.html", figures=figures)
