"""Run by the chDB environment's Python (the standard library and chdb only; never the package):
``python chdb_query.py SCHEMA ROWS QUERY`` creates a table from the SQL file SCHEMA in a fresh chDB
session, inserts the JSONEachRow file ROWS into ``otel_traces``, runs the SQL file QUERY and prints its
result as JSON lines.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from chdb import session


def main(schema: Path, rows: Path, query: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="chdb-") as state:
        db = session.Session(state)
        try:
            db.query(schema.read_text(encoding="utf-8"))
            db.query("INSERT INTO otel_traces FORMAT JSONEachRow\n" + rows.read_text(encoding="utf-8"))
            sys.stdout.write(str(db.query(query.read_text(encoding="utf-8"), "JSONEachRow")))
        finally:
            db.close()


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:4]))
