"""Grouping dimensions shared by ``report`` and ``whatif``: which attribute each ``--by`` name reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "DEFAULT_BY",
    "DIMENSIONS",
    "HOST_KEY",
    "NONE_LABEL",
    "GroupSpec",
    "GroupingError",
    "as_specs",
    "key_label",
    "label",
    "parse_by",
    "spec_name",
]

HOST_KEY: Final = "route_shadow.fleet.host"
"""The attribute a fleet report sets on every observation it reads: the origin of the log it came from
(reserved: the fleet reader overwrites it; a single chain's records carry none)."""

DIMENSIONS: Final[dict[str, str]] = {
    "repo": attr.REPO,
    "role": attr.ROLE,
    "principal": attr.PRINCIPAL,
    "mechanism": attr.LEGACY_MECHANISM,
    "transport": attr.TRANSPORT,
    "outcome": attr.OUTCOME,
    "host": HOST_KEY,
}
"""``--by`` name -> the span attribute (chain payload attribute) it groups on."""

DEFAULT_BY: Final[tuple[tuple[str, ...], ...]] = (("repo",), ("role",), ("mechanism",), ("transport",))

GroupSpec = tuple[str, ...]
"""One breakdown: a single dimension (``repo``) or a cross of several (``repo+role``)."""

NONE_LABEL: Final = "(none)"


class GroupingError(ValueError):
    pass


def parse_by(values: Iterable[str] | None) -> tuple[GroupSpec, ...]:
    """``--by`` values: each may be comma-separated; ``a+b`` crosses two dimensions in one breakdown."""
    if values is None:
        return DEFAULT_BY
    specs: list[GroupSpec] = []
    for value in values:
        for raw in value.split(","):
            item = raw.strip()
            if not item:
                continue
            names = tuple(part.strip() for part in item.split("+"))
            unknown = [name for name in names if name not in DIMENSIONS]
            if unknown:
                raise GroupingError(
                    f"unknown --by dimension {unknown[0]!r} (choose from {', '.join(DIMENSIONS)}; "
                    "cross two with '+', e.g. repo+role)"
                )
            if len(set(names)) != len(names):
                raise GroupingError(f"--by {item!r} names a dimension twice")
            if names not in specs:
                specs.append(names)
    if not specs:
        raise GroupingError("--by needs at least one dimension")
    return tuple(specs)


def as_specs(by: Sequence[GroupSpec] | Sequence[str] | None) -> tuple[GroupSpec, ...]:
    """Parsed specs (``[("repo",), ("repo", "role")]``) or ``--by`` strings (``["repo+role"]``)."""
    if by is None:
        return parse_by(None)
    if all(isinstance(item, str) for item in by):
        return parse_by([item for item in by if isinstance(item, str)])
    return tuple(tuple(item) for item in by)


def spec_name(spec: GroupSpec) -> str:
    return "+".join(spec)


def label(value: object) -> str:
    """How a group key value is shown: absent attributes are ``(none)``."""
    if value is None:
        return NONE_LABEL
    return str(value)


def key_label(key: Sequence[object]) -> str:
    return " / ".join(label(value) for value in key)
