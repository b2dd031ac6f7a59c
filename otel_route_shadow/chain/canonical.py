"""The canonical JSON encoding of chain values (``docs/chain-format.md`` section 3).

Every value a record can hold is restricted so that RFC 8785 (JCS) and a plain sorted-keys JSON encoder
produce the same bytes: no floats, integers within +-(2**53-1), ASCII object keys, strings that are
valid Unicode. Under those rules the ``orjson`` encoding used here is byte-identical to
:func:`otel_route_shadow.core.canonical.canonical_json` (pinned by a property test), so an auditor can
re-derive every digest with the standard library alone.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

__all__ = ["CANONICAL_OPTIONS", "MAX_SAFE_INTEGER", "canonical_bytes"]

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Largest magnitude of an integer in a record."""

CANONICAL_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
"""``orjson`` options of the canonical form: sorted keys, integers limited to +-(2**53-1)."""


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON form of a record value.

    Byte-identical to ``core.canonical.canonical_json`` for every value a record can hold; raises
    ``TypeError`` (``orjson.JSONEncodeError``) for integers outside +-(2**53-1) and lone surrogates.
    """
    return orjson.dumps(value, option=CANONICAL_OPTIONS)
