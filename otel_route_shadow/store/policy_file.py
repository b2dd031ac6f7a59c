"""Reading a policy file: ``{"policies": [...]}`` with the field names of :class:`RoutingPolicy`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_route_shadow.core import PolicyProblem, RoutingPolicy, blocking, parse_policies, validate_policies
from otel_route_shadow.files import FileRefused, read_text
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "MAX_POLICY_FILE_BYTES",
    "PolicyFile",
    "PolicyFileError",
    "parse_policy_document",
    "read_policy_file",
]

MAX_POLICY_FILE_BYTES = 64 * 1024 * 1024
"""About 200,000 policies in compact JSON."""


class PolicyFileError(ValueError):
    """The file cannot be read as a policy document at all (as opposed to holding invalid policies)."""


@dataclass(frozen=True)
class PolicyFile:
    """A parsed policy document: the policies that parsed, the set's errors and its warnings.

    ``problems`` holds the errors only (what refuses a save, and makes ``explain`` refuse the file);
    ``warnings`` the ``unreachable-policy`` findings, which ``policy check`` lists too.
    """

    source: str
    policies: tuple[RoutingPolicy, ...]
    problems: tuple[PolicyProblem, ...]
    warnings: tuple[PolicyProblem, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.problems


def parse_policy_document(document: Any, source: str) -> PolicyFile:
    if not isinstance(document, dict) or set(document) - {"policies"} or "policies" not in document:
        raise PolicyFileError(f'{source}: expected an object {{"policies": [...]}} and nothing else')
    raw = document["policies"]
    policies, _ = parse_policies(raw)
    found = validate_policies(raw)
    errors = blocking(found)
    warnings = tuple(problem for problem in found if problem.warning)
    return PolicyFile(source=source, policies=tuple(policies), problems=tuple(errors), warnings=warnings)


def read_policy_file(path: str | Path) -> PolicyFile:
    """Read and validate; :class:`PolicyFileError` (one line, naming the file) if unreadable."""
    source = str(path)
    try:
        document = loads_strict(read_text(path, MAX_POLICY_FILE_BYTES))
    except FileNotFoundError:
        raise PolicyFileError(f"{source}: no such file") from None
    except FileRefused as exc:
        raise PolicyFileError(str(exc)) from None
    except StrictJSONError as exc:
        raise PolicyFileError(f"{source}: {exc}") from None
    return parse_policy_document(document, source)
