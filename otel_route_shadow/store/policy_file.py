"""Reading a policy file: ``{"policies": [...]}`` with the field names of :class:`RoutingPolicy`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_route_shadow.core import PolicyProblem, RoutingPolicy, parse_policies, validate_policies
from otel_route_shadow.store.strict_json import StrictJSONError, loads_strict

__all__ = [
    "MAX_POLICY_FILE_BYTES",
    "PolicyFile",
    "PolicyFileError",
    "parse_policy_document",
    "read_policy_file",
]

MAX_POLICY_FILE_BYTES = 16 * 1024 * 1024


class PolicyFileError(ValueError):
    """The file cannot be read as a policy document at all (as opposed to holding invalid policies)."""


@dataclass(frozen=True)
class PolicyFile:
    """A parsed policy document: the policies that parsed and every problem the set has."""

    source: str
    policies: tuple[RoutingPolicy, ...]
    problems: tuple[PolicyProblem, ...]

    @property
    def valid(self) -> bool:
        return not self.problems


def parse_policy_document(document: Any, source: str) -> PolicyFile:
    if not isinstance(document, dict) or set(document) - {"policies"} or "policies" not in document:
        raise PolicyFileError(f'{source}: expected an object {{"policies": [...]}} and nothing else')
    raw = document["policies"]
    policies, _ = parse_policies(raw)
    return PolicyFile(source=source, policies=tuple(policies), problems=tuple(validate_policies(raw)))


def read_policy_file(path: str | Path) -> PolicyFile:
    """Read and validate; :class:`PolicyFileError` (one line, naming the file) if unreadable."""
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            # Size first: a 50 MB file is refused without reading 16 MB of it.
            if os.fstat(handle.fileno()).st_size > MAX_POLICY_FILE_BYTES:
                raise PolicyFileError(f"{source}: larger than {MAX_POLICY_FILE_BYTES} bytes")
            data = handle.read(MAX_POLICY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise PolicyFileError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise PolicyFileError(f"{source}: is a directory") from None
    except OSError as exc:
        raise PolicyFileError(f"{source}: cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_POLICY_FILE_BYTES:
        raise PolicyFileError(f"{source}: larger than {MAX_POLICY_FILE_BYTES} bytes")
    try:
        document = loads_strict(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PolicyFileError(f"{source}: not UTF-8 (byte {exc.start})") from None
    except StrictJSONError as exc:
        raise PolicyFileError(f"{source}: {exc}") from None
    return parse_policy_document(document, source)
