"""The effective-route matrix as a table, CSV or JSON."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson

from otel_route_shadow.analysis import COLUMNS, Matrix, label
from otel_route_shadow.core import printable

__all__ = ["render_csv", "render_json", "render_table"]


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def render_table(matrix: Matrix) -> str:
    rows = [
        [label(row.as_dict()[c]) if c != "provider" or not row.legacy else "(legacy dials)" for c in COLUMNS]
        for row in matrix.rows
    ]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(COLUMNS)]
    snap = matrix.snapshot
    lines = [
        f"effective-route matrix: {snap['source']} (revision {snap['revision']}, hash {snap['content_hash']}, "
        f"{snap['policies']} policies{'' if snap['available'] else ', UNAVAILABLE'}); {len(rows)} rows",
        "  ".join(c.ljust(widths[i]) for i, c in enumerate(COLUMNS)).rstrip(),
    ]
    lines.extend("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)
    return "\n".join(map(printable, lines)) + "\n"


def render_csv(matrix: Matrix) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in matrix.rows:
        data = row.as_dict()
        writer.writerow([_cell(data[c]) for c in COLUMNS])
    return buffer.getvalue()


def render_json(matrix: Matrix) -> str:
    return orjson.dumps(matrix.as_dict(), option=orjson.OPT_INDENT_2).decode("utf-8") + "\n"
