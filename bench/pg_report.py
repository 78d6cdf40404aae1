"""The PostgreSQL phase's table: medians over the sets, one column per kind of run."""

from __future__ import annotations

import statistics
from typing import Any

ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("throughput, rounds/s", ("throughput",), "{:.1f}"),
    ("idle: complete p50, ms", ("idle", "done", "p50"), "{:.1f}"),
    ("idle: complete p99, ms", ("idle", "done", "p99"), "{:.1f}"),
    ("load: complete p50, ms", ("load", "done", "p50"), "{:.1f}"),
    ("load: complete p99, ms", ("load", "done", "p99"), "{:.1f}"),
    ("workers' CPU per round, ms", ("cpu_ms_per_round",), "{:.2f}"),
    ("PostgreSQL backends' CPU per round, ms", ("pg_backend_cpu_ms_per_round",), "{:.2f}"),
    ("SQLite statements per round", ("client_per_round", "sqlite"), "{:.1f}"),
    ("SQLite store operations per round", ("client_per_round", "sqlite_ops"), "{:.1f}"),
    ("SQLite thread hops per round", ("client_per_round", "sqlite_hops"), "{:.1f}"),
    ("PostgreSQL requests per round (client)", ("client_per_round", "pg"), "{:.1f}"),
    ("PostgreSQL transactions per round (server)", ("pg_xacts_per_round",), "{:.1f}"),
    ("connections open after the load (all workers)", ("pg_connections",), "{:.0f}"),
    ("WAL bytes per round (whole server)", ("pg_wal_bytes_per_round",), "{:.0f}"),
]


def value_at(run: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = run
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else None


def median_at(runs: list[dict[str, Any]], path: tuple[str, ...]) -> float:
    values = [v for v in (value_at(r, path) for r in runs) if v is not None]
    return statistics.median(values) if values else float("nan")


def pg_table(runs: dict[str, list[dict[str, Any]]]) -> str:
    kinds = list(runs)
    lines = [f"{'metric (median of sets)':<46}" + "".join(f"{k:>11}" for k in kinds)]
    for label, path, form in ROWS:
        cells = []
        for kind in kinds:
            value = median_at(runs[kind], path)
            cells.append(f"{'-' if value != value else form.format(value):>11}")
        lines.append(f"{label:<46}" + "".join(cells))
    for kind in kinds:
        last = runs[kind][-1] if runs[kind] else {}
        lines.append(f"\n{kind}, statements per round (last set):")
        for statement, count in sorted(
            last.get("statements_per_round", {}).items(), key=lambda item: -item[1]
        ):
            if count >= 0.05:
                lines.append(f"  {count:6.2f}  {statement}")
        for table, (ins, upd, dele) in last.get("pg_rows_per_round", {}).items():
            if ins or upd or dele:
                lines.append(f"  rows/round {table}: +{ins} ~{upd} -{dele}")
    return "\n".join(lines)
