"""The JSON report: the whole `Report`, every transcript included, readable back.

The file is `dataclasses.asdict(report)` (indent 2, UTF-8 text, not \\u escapes) with the
per-variant numbers of `evaluation.summary` under "summary", so it can be diffed, loaded
by other tools, and read back with `read_json` for a later comparison ("summary" is
computed again from the results, never read back). Reading rebuilds the dataclasses from
their type hints, so a field added to `evaluation.results` with a default still reads
older files; a missing required field is an error naming its path.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from evaluation.results import Report
from evaluation.summary import Summary, summarise

T = TypeVar("T")


def write_json(report: Report, path: str | Path, *, summary: Summary | None = None) -> None:
    summary = summary if summary is not None else summarise(report)
    data = {**dataclasses.asdict(report), "summary": dataclasses.asdict(summary)}
    text = json.dumps(data, indent=2, ensure_ascii=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def read_json(path: str | Path) -> Report:
    """The report written by `write_json`. Raises ValueError naming the bad field."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return _build(Report, data, "")


def _build(cls: type[T], data: Any, where: str) -> T:
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'report'}: expected an object")
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        path = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{path}: missing")
            continue
        values[f.name] = _convert(hints[f.name], data[f.name], path)
    return cls(**values)


def _convert(hint: Any, value: Any, path: str) -> Any:
    origin = get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _convert(inner, value, path)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list")
        (item,) = get_args(hint)
        return [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object")
        _, item = get_args(hint)
        return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if origin is Literal:
        if value not in get_args(hint):
            raise ValueError(f"{path}: {value!r} is not one of {get_args(hint)}")
        return value
    if dataclasses.is_dataclass(hint):
        return _build(typing.cast(type, hint), value, path)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (str, int, float, bool) and not (
        isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    ):
        raise ValueError(f"{path}: expected {hint.__name__}")
    return value
