"""The text of a contained exception, as the plugin logs it: never a value of the host's input.

A pydantic ``ValidationError`` quotes each input value (``input_value=...``), shortened when long to
``start...end``: redacting that text afterwards recognises the start of a credential and leaves its
end printed. So a validation error is written from its locations, messages and types only
(``errors(include_input=False)``), the way ``config`` and ``core.policy`` already name a bad setting
or policy; every other exception keeps its own text. The result is redacted of credential-shaped
strings (a location names the keys the host typed, a host's message may quote anything).
"""

from __future__ import annotations

import textwrap
import traceback
from typing import Final

from pydantic import ValidationError

from otel_route_shadow.core import redact_text
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = ["exception_line", "exception_summary", "exception_trace", "log_contained"]


_CAUSE: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"
_GROUP_DEPTH: Final = 10
_GROUP_WIDTH: Final = 15
"""How deep and how wide the exceptions of an exception group are shown, as ``traceback`` does."""


def _validation_text(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    lines = [f"{len(errors)} validation error{'s' if len(errors) != 1 else ''} for {exc.title}"]
    for error in errors:
        loc = ".".join(str(item) for item in error["loc"]) or "(value)"
        lines.append(f"{loc}\n  {error['msg']} [type={error['type']}]")
    return "\n".join(lines)


def _only(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return f"{type(exc).__module__}.{type(exc).__qualname__}: {_validation_text(exc)}\n"
    if isinstance(exc, BaseExceptionGroup):  # ``traceback`` would walk every member each time it is met
        module, name = type(exc).__module__, type(exc).__qualname__
        notes = getattr(exc, "__notes__", None)
        lines = [name if module == "builtins" else f"{module}.{name}", f": {_str(exc)}\n"]
        lines += [f"{note}\n" for note in notes if isinstance(note, str)] if isinstance(notes, list) else []
        return "".join(lines)
    return "".join(traceback.format_exception_only(type(exc), exc))


def _str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # as ``traceback`` says it
        return "<exception str() failed>"


def exception_summary(exc: BaseException) -> str:
    """The exception's message alone, on one line (a validation error without its input), redacted."""
    text = _validation_text(exc) if isinstance(exc, ValidationError) else _str(exc)
    return redact_text(" ".join(text.split()))[0]


def exception_line(exc: BaseException) -> str:
    """``traceback.format_exception_only`` of ``exc``, stripped, a validation error without its input; redacted."""
    return redact_text(_only(exc).strip())[0]


def exception_trace(exc: BaseException) -> str:
    """``traceback.format_exception`` of ``exc`` with its causes and contexts, and the exceptions of
    each exception group among them (as deep and as wide as ``traceback`` shows them), each validation
    error without its input; redacted."""
    return redact_text(_trace(exc, 0, set()))[0]


def _members(group: BaseExceptionGroup[BaseException], depth: int, seen: set[int]) -> str:
    if depth >= _GROUP_DEPTH:
        return f"| ... (the exceptions of groups nested more than {_GROUP_DEPTH} deep are not shown)\n"
    parts: list[str] = []
    for number, inner in enumerate(group.exceptions[:_GROUP_WIDTH], 1):
        parts.append(f"+---------------- {number} ----------------\n")
        shown = "(shown above)\n" if id(inner) in seen else _trace(inner, depth + 1, seen)
        parts.append(textwrap.indent(shown, "| ", lambda line: True))
    if len(group.exceptions) > _GROUP_WIDTH:
        parts.append(
            f"+---------------- ... ----------------\n| and {len(group.exceptions) - _GROUP_WIDTH} more\n"
        )
    return "".join(parts)


def _trace(exc: BaseException, depth: int, seen: set[int]) -> str:
    """The trace of ``exc``; an exception already in ``seen`` (shown elsewhere in it) is not shown
    again, so a cycle through a group's members costs no more than the members."""
    chain: list[tuple[BaseException, str]] = []
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for item, link in reversed(chain):
        if item.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_tb(item.__traceback__))
        parts.append(_only(item))
        if isinstance(item, BaseExceptionGroup):
            parts.append(_members(item, depth, seen))
        parts.append(link)
    return "".join(parts)


def log_contained(exc: BaseException, where: str, *, plausible: bool, raising: bool, strict: bool) -> None:
    """The one log line for a cause, saying truly what happens to it; a validation error without the
    host's input values (``error_text``)."""
    text = exception_line(exc)
    if plausible:
        _LOG.warning("route shadow %s failed, the spawn proceeds: %s", where, text)
        return
    if raising:
        what = "raised before the host runs (OTEL_PYTHON_ROUTE_SHADOW_STRICT=true)"
    elif strict:
        what = "contained: the host already ran, and strict mode raises only before it runs"
    else:
        what = "contained; set OTEL_PYTHON_ROUTE_SHADOW_STRICT=true to raise it before the host runs"
    _LOG.error("route shadow bug in %s (%s):\n%s", where, what, exception_trace(exc))
