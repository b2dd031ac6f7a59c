"""Integrity of a what-if replay: a record replayed against the snapshot it cites must reproduce its
decision id and its decision fields exactly (ADR-0139 D5, D6). A mismatch is an integrity finding,
never a difference; a record whose cited snapshot cannot be had is counted as not checked, with the
reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.changes import FIELD_KEYS
from otel_route_shadow.analysis.groups import label
from otel_route_shadow.analysis.replaying import Replayed
from otel_route_shadow.analysis.tally import sorted_counts
from otel_route_shadow.core import DECISION_FIELDS
from otel_route_shadow.shadow import attributes as attr

__all__ = ["MAX_FINDING_EXAMPLES", "IntegrityReport", "reproduces"]

MAX_FINDING_EXAMPLES: Final = 20


@dataclass
class IntegrityReport:
    checked: int = 0
    passed: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    not_checked: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(self.findings.values())

    @property
    def unchecked(self) -> int:
        return sum(self.not_checked.values())

    def skip(self, reason: str) -> None:
        self.not_checked[reason] = self.not_checked.get(reason, 0) + 1

    def find(self, kind: str, detail: str, seq: int, payload: dict[str, Any]) -> None:
        self.findings[kind] = self.findings.get(kind, 0) + 1
        if len(self.examples) < MAX_FINDING_EXAMPLES:
            self.examples.append(
                {
                    "seq": seq,
                    "kind": kind,
                    "trace_id": payload.get("trace_id"),
                    "span_id": payload.get("span_id"),
                    "detail": detail,
                }
            )

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "passed": self.passed,
            "failed": self.failed,
            "findings": dict(sorted_counts(self.findings)),
            "not_checked": self.unchecked,
            "not_checked_reasons": dict(sorted_counts(self.not_checked)),
            "examples": self.examples,
        }


def reproduces(reference: Replayed, attributes: dict[str, Any]) -> tuple[str, str] | None:
    """None when the replay against the cited snapshot reproduces the record; else the finding."""
    recorded_id = attributes.get(attr.DECISION_ID)
    if reference.decision_id != recorded_id:
        return (
            "decision-id-mismatch",
            f"recorded {label(recorded_id)}, replay gives {reference.decision_id}",
        )
    recorded = tuple(map(attributes.get, FIELD_KEYS))
    if reference.fields != recorded:
        differing = [n for n, a, b in zip(DECISION_FIELDS, reference.fields, recorded, strict=True) if a != b]
        return (
            "decision-fields-mismatch",
            "recorded fields differ from the replayed decision: " + ", ".join(differing),
        )
    return None
