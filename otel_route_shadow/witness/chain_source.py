"""Read the decision chain's payloads as ``(seq, payload)`` pairs, streaming, for the cross-check.

Until the chain package's streaming reader lands this is a minimal reader of the documented line shape
(``{"v": 1, "seq": N, "payload": {...}, ...}``, one JSON object per line). It checks no hashes: hash
linkage is ``otel-route-shadow verify``'s job; the audit holds the *content* against the witness.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ChainReadError", "iter_chain_payloads"]

_MAX_LINE_BYTES = 16 * 1024 * 1024
_VERIFY = "; `otel-route-shadow verify` checks the chain itself"


class ChainReadError(Exception):
    """The chain file cannot be read as chain records; the message names the file and line."""


def iter_chain_payloads(path: str | Path) -> Iterator[tuple[int, object]]:
    p = Path(path)
    try:
        handle = p.open("rb")
    except FileNotFoundError:
        raise ChainReadError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ChainReadError(f"{p}: is a directory") from None
    except OSError as exc:
        raise ChainReadError(f"{p}: cannot read: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(_MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > _MAX_LINE_BYTES:
                raise ChainReadError(f"{p}:{number}: line longer than {_MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as exc:
                raise ChainReadError(f"{p}:{number}: not a JSON record ({exc}){_VERIFY}") from None
            if not isinstance(record, dict):
                raise ChainReadError(f"{p}:{number}: record is not a JSON object{_VERIFY}")
            seq = record.get("seq")
            if isinstance(seq, bool) or not isinstance(seq, int):
                raise ChainReadError(f"{p}:{number}: record has no integer seq{_VERIFY}")
            yield seq, record.get("payload")
