"""Shared pieces of the command line: exit codes, errors and input readers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from otel_route_shadow.core import PolicyProblem
from otel_route_shadow.store.strict_json import StrictJSONError, loads_strict

__all__ = [
    "EXIT_FINDING",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "parse_json_text",
    "problem_line",
    "read_json_file",
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
    if path == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
    else:
        p = Path(path)
        try:
            with p.open("rb") as handle:
                data = handle.read(max_bytes + 1)
        except FileNotFoundError:
            raise CliError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise CliError(f"{path}: is a directory") from None
        except OSError as exc:
            raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise CliError(f"{path}: larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_json_file(path: str) -> Any:
    return parse_json_text(read_text_file(path), path)


def problem_line(source: str, problem: PolicyProblem) -> str:
    """One policy problem as the CLI prints it: ``FILE: [code] policy ID: message``."""
    if problem.policy_id is not None:
        subject = f"policy {problem.policy_id}: "
    elif problem.index is not None:
        subject = f"policy at index {problem.index}: "
    else:
        subject = ""
    return f"{source}: [{problem.code.value}] {subject}{problem.message}"
