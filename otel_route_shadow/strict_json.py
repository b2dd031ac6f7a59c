"""Strict, depth-limited JSON for every file the package reads.

``json.loads`` silently keeps the last of two duplicate keys and accepts NaN; in a policy file either
is a way to smuggle a value past review, so both are errors here. Nesting is bounded
(:data:`MAX_JSON_DEPTH` unless the caller says otherwise): a file nested 50,000 deep is one
:class:`StrictJSONError`, never a ``RecursionError`` in the caller. :func:`read_json` reads a file
through :func:`otel_route_shadow.files.read_regular` (no FIFO, no device, a bounded read) first;
:func:`schema_problem` says in one line why a document does not fit its schema.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from otel_route_shadow.core import redact_text
from otel_route_shadow.files import FileRefused, read_regular

__all__ = ["MAX_JSON_DEPTH", "StrictJSONError", "loads_strict", "read_json", "read_model", "schema_problem"]

Model = TypeVar("Model", bound=BaseModel)

MAX_JSON_DEPTH: Final = 64
"""The deepest nesting (arrays and objects) accepted by default."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")

StrictJSONKind = Literal["syntax", "duplicate-key", "constant", "too-deep", "other"]


class StrictJSONError(ValueError):
    """The text is not strict JSON; the message says where and why, never echoing values (a
    duplicate key it names is scrubbed of credential shapes).

    ``kind`` lets a caller that must not echo even a key name (the snapshot store, whose problems
    reach logs and spans) describe the failure without the message.
    """

    def __init__(self, message: str, kind: StrictJSONKind = "other") -> None:
        super().__init__(message)
        self.kind: StrictJSONKind = kind


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # The key as the file holds it, scrubbed of credential shapes before it is cut.
            raise StrictJSONError(f"duplicate key {redact_text(key)[0][:64]!r}", "duplicate-key")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise StrictJSONError(f"non-standard JSON constant {name}", "constant")


def _lone_surrogate(value: Any) -> bool:
    """True when a string anywhere in ``value`` (keys included) holds a lone surrogate (no valid
    Unicode text does: a pair of ``\\u`` escapes decodes to one character)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


def loads_strict(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse strict JSON: no duplicate keys, no NaN/Infinity, no lone surrogate escapes, and no
    nesting deeper than ``max_depth``."""
    value = _loads(text)
    _check_depth(value, max_depth)
    escaped = text if isinstance(text, str) else text.decode("utf-8", "replace")
    if _SURROGATE_ESCAPE.search(escaped) and _lone_surrogate(value):
        raise StrictJSONError("invalid JSON: a lone surrogate escape (not valid Unicode text)", "syntax")
    return value


def _loads(text: str | bytes) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_no_constants)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", "syntax"
        ) from None
    except RecursionError:
        raise StrictJSONError("invalid JSON: nested too deeply", "too-deep") from None
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8 (byte {exc.start})", "syntax") from None
    except ValueError as exc:  # (a bare ValueError) an integer longer than int() takes
        if type(exc) is ValueError:
            limit = sys.get_int_max_str_digits()
            raise StrictJSONError(f"invalid JSON: an integer of more than {limit} digits", "syntax") from None
        raise StrictJSONError(f"invalid JSON: {type(exc).__name__}") from None


def _check_depth(value: Any, max_depth: int) -> None:
    """Walk ``value`` without recursion; raise when an array or object is nested below ``max_depth``."""
    level: list[Any] = [value]
    depth = 0
    while level:
        containers = [v for v in level if isinstance(v, dict | list)]
        if not containers:
            return
        depth += 1
        if depth > max_depth:
            raise StrictJSONError(f"invalid JSON: nested deeper than {max_depth} levels", "too-deep")
        level = [item for c in containers for item in (c.values() if isinstance(c, dict) else c)]


def read_json(path: str | os.PathLike[str], max_bytes: int, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The strict JSON document in the regular file ``path`` of at most ``max_bytes`` bytes.

    ``FileNotFoundError`` passes through; a file that cannot be taken is a
    :class:`~otel_route_shadow.files.FileRefused`; content that is not strict JSON (or not UTF-8) a
    :class:`StrictJSONError` whose message names the path.
    """
    data = read_regular(path, max_bytes)
    try:
        return loads_strict(data.decode("utf-8"), max_depth=max_depth)
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"{os.fspath(path)}: not UTF-8 (byte {exc.start})", "syntax") from None
    except StrictJSONError as exc:
        raise StrictJSONError(f"{os.fspath(path)}: {exc}", exc.kind) from None


def read_model(
    path: str | os.PathLike[str],
    model: type[Model],
    max_bytes: int,
    error: type[Exception],
    what: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
) -> Model | None:
    """The document in the file ``path`` (:func:`read_json`) as ``model``; None when there is no such
    file. A file that cannot be taken, is not strict JSON or is not ``what`` raises ``error`` with a
    message naming the path."""
    try:
        raw = read_json(path, max_bytes, max_depth=max_depth)
    except FileNotFoundError:
        return None
    except (FileRefused, StrictJSONError) as exc:
        raise error(str(exc)) from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise error(f"{os.fspath(path)}: not {what}: {schema_problem(exc)}") from None


def schema_problem(exc: ValidationError) -> str:
    """The first thing a document gets wrong against its pydantic schema, as ``where: what`` (one line,
    never the value; a key the document names in ``where`` is scrubbed of credential shapes)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "document"
    return redact_text(f"{where}: {first.get('msg', 'invalid')}")[0]
