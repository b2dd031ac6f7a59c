"""``validate_policies``: every problem of a policy set, in time close to linear and bounded output.

The checks, in order: each item parses as a policy (``malformed-policy``); no id is credential-shaped
(``credential-shaped-id``: it would be redacted wherever a decision is recorded); ids are unique
(``duplicate-policy-id``); each policy's own members are valid (``member_problems``); no two
policies conflict at equal precedence (:mod:`otel_route_shadow.core.conflicts`); and, as a warning,
no enabled policy is unreachable (:mod:`otel_route_shadow.core.reachability`).

Output is bounded: at most ``limit_per_code`` problems of each code are listed, and a summary entry
(``count`` > 1) closes each code that had more, so 8,000 conflicting policies give a few dozen lines,
not sixteen million. No problem carries credential-shaped text: ids, related ids and messages are
scrubbed (``redaction.redact_text``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from otel_route_shadow.core.conflicts import find_conflicts
from otel_route_shadow.core.policy import PolicyProblem, RoutingPolicy, member_problems, parse_indexed
from otel_route_shadow.core.reachability import find_unreachable
from otel_route_shadow.core.redaction import REDACTED, redact_text
from otel_route_shadow.core.vocabulary import ReasonCode

__all__ = ["DEFAULT_LIMIT_PER_CODE", "blocking", "validate_policies"]

DEFAULT_LIMIT_PER_CODE = 20
"""Problems listed per code before the rest are summarised by a count."""


def blocking(problems: Sequence[PolicyProblem]) -> list[PolicyProblem]:
    """The errors among ``problems``: what refuses a save (warnings are listed, not refused)."""
    return [problem for problem in problems if not problem.warning]


def _duplicates(indexed: Sequence[tuple[int, RoutingPolicy]]) -> list[PolicyProblem]:
    seen: dict[str, int] = {}
    problems: list[PolicyProblem] = []
    for index, policy in indexed:
        first = seen.setdefault(policy.id, index)
        if first != index:
            problems.append(
                PolicyProblem(
                    code=ReasonCode.DUPLICATE_POLICY_ID,
                    policy_id=policy.id,
                    index=index,
                    message=f"policy id {policy.id!r} also used at index {first}",
                )
            )
    return problems


def _credential_shaped(indexed: Sequence[tuple[int, RoutingPolicy]]) -> list[PolicyProblem]:
    """The policies whose id is credential-shaped: it would be redacted wherever a decision is exported
    or hashed (span attributes, the chain), so the records could not name the policy that decided."""
    return [
        PolicyProblem(
            code=ReasonCode.CREDENTIAL_SHAPED_ID,
            policy_id=REDACTED,
            index=index,
            message=f"the id of the policy at index {index} looks like a credential, and would be redacted "
            "wherever a decision is recorded: give it another id",
        )
        for index, policy in indexed
        if redact_text(policy.id)[1]
    ]


def _sort_key(problem: PolicyProblem) -> tuple[int, str, tuple[str, ...], str]:
    return (
        problem.index if problem.index is not None else -1,
        problem.code.value,
        problem.related,
        problem.message,
    )


def _summary(code: ReasonCode, count: int, exact: bool = True) -> PolicyProblem:
    if not exact and not count:  # nothing past the listed ones found, but the search did not finish
        message = f"{code.value}: the search stopped at its work bound, so the set is not shown free of them"
        return PolicyProblem(code=code, message=message, count=0)
    more = f"{count:,} more" if exact else f"at least {count:,} more"
    note = "" if exact else " (the count stopped at its work bound)"
    return PolicyProblem(code=code, message=f"... and {more} {code.value}{note}", count=count)


def _capped(
    problems: list[PolicyProblem], limit: int, omitted: Counter[ReasonCode], inexact: set[ReasonCode]
) -> list[PolicyProblem]:
    """The first ``limit`` problems of each code in sort order, then one summary per capped code."""
    kept: list[PolicyProblem] = []
    shown: Counter[ReasonCode] = Counter()
    for problem in sorted(problems, key=_sort_key):
        if shown[problem.code] < limit:
            shown[problem.code] += 1
            kept.append(problem)
        else:
            omitted[problem.code] += 1
    kept.extend(
        _summary(code, count, code not in inexact)
        for code, count in sorted(omitted.items())
        if count > 0 or code in inexact  # an unfinished search is said even when it found none past the list
    )
    return kept


def _validate(items: object, limit: int) -> list[PolicyProblem]:
    indexed, problems = parse_indexed(items)
    problems.extend(_credential_shaped(indexed))
    problems.extend(_duplicates(indexed))
    for index, policy in indexed:
        problems.extend(member_problems(policy, index))
    omitted: Counter[ReasonCode] = Counter()
    inexact: set[ReasonCode] = set()
    conflicts = find_conflicts(indexed, limit=limit)
    problems.extend(conflicts.listed)
    omitted[ReasonCode.EQUAL_PRECEDENCE_CONFLICT] += conflicts.total - len(conflicts.listed)
    if not conflicts.exact:
        inexact.add(ReasonCode.EQUAL_PRECEDENCE_CONFLICT)
    problems.extend(find_unreachable(indexed).problems)
    return [problem.scrubbed() for problem in _capped(problems, limit, omitted, inexact)]


def validate_policies(items: object, *, limit_per_code: int = DEFAULT_LIMIT_PER_CODE) -> list[PolicyProblem]:
    """Every problem in a policy set, each with its code; never raises.

    Errors and warnings (``PolicyProblem.warning``: ``unreachable-policy``) together, sorted by
    index; at most ``limit_per_code`` of each code, then a summary entry whose ``count`` says how
    many more there are. :func:`blocking` keeps the errors.
    """
    try:
        return _validate(items, max(1, limit_per_code))
    except Exception as exc:
        return [
            PolicyProblem(
                code=ReasonCode.MALFORMED_POLICY, message=f"validation failed: {type(exc).__name__}"
            )
        ]
