"""Shared pieces of the command line: exit codes, errors and input readers."""

from __future__ import annotations

import sys
from typing import Any

from otel_route_shadow.core import PolicyProblem
from otel_route_shadow.store.strict_json import (
    InputFileError,
    StrictJSONError,
    loads_strict,
    read_text_bounded,
)

__all__ = [
    "EXIT_FINDING",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "parse_json_text",
    "problem_line",
    "read_text_file",
]

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2

_MAX_INPUT_BYTES = 64 * 1024 * 1024


class CliError(Exception):
    """A problem with the user's input: printed as one line, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_json_text(text: str, source: str) -> Any:
    """Parse JSON strictly: duplicate keys and NaN/Infinity are errors, not silent last-one-wins."""
    try:
        return loads_strict(text)
    except StrictJSONError as exc:
        raise CliError(f"{source}: {exc}") from None


def read_text_file(path: str, *, max_bytes: int = _MAX_INPUT_BYTES) -> str:
    """Read a UTF-8 text file (or ``-`` for stdin) with a size bound and one-line errors."""
    if path != "-":
        try:
            return read_text_bounded(path, max_bytes)
        except InputFileError as exc:
            raise CliError(str(exc)) from None
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CliError(f"{path}: larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 (byte {exc.start})") from None


def problem_line(source: str, problem: PolicyProblem) -> str:
    """One policy problem as the CLI prints it: ``FILE: [code] policy ID: message``."""
    if problem.policy_id is not None:
        subject = f"policy {problem.policy_id}: "
    elif problem.index is not None:
        subject = f"policy at index {problem.index}: "
    else:
        subject = ""
    return f"{source}: [{problem.code.value}] {subject}{problem.message}"
