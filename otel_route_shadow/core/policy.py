"""Routing policies (D3): exact-set matches, structural precedence, and write-time validation.

A policy's rung follows from the shape of its match, never from a claim: a rule cannot sit on
"exact repository + exact role" without naming both. Ordering is ``(rung, -priority, id)``; insertion
order never decides anything. Because v1 matches only on exact sets, overlap between two policies is
computable exactly, which is what makes an equal-precedence conflict a checkable error.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, model_validator

from otel_route_shadow.core.canonical import canonical_json, digest_bytes
from otel_route_shadow.core.identity import canonicalize_repo
from otel_route_shadow.core.redaction import redact_text
from otel_route_shadow.core.requirements import model_provider, parse_requirement
from otel_route_shadow.core.vocabulary import (
    PROVIDER_BINDINGS,
    Provider,
    ReasonCode,
    RequestFace,
    RequirementKind,
    WorkerRole,
)

__all__ = [
    "LEGACY_RUNG",
    "WARNING_CODES",
    "PolicyProblem",
    "RoutingAction",
    "RoutingMatch",
    "RoutingPolicy",
    "action_key",
    "member_problems",
    "parse_indexed",
    "parse_policies",
    "policy_set_hash",
    "precedence_level",
    "rung_of_shape",
]

LEGACY_RUNG = 9
"""Legacy compatibility: not a policy, the rung a decision sits on when no policy claims it."""

_PolicyId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]
_Member = Annotated[str, Field(min_length=1, max_length=256)]
_Priority = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]


_COLLECTIONS = (list, tuple, set, frozenset)
_SET_FIELDS = frozenset({"repo_ids", "roles", "principal_ids", "request_faces"})


def _sorted_unique(value: Any) -> Any:
    """Exact sets are stored sorted so their JSON form (and every hash over it) is deterministic."""
    if isinstance(value, _COLLECTIONS):
        if not value:
            return ()
        items = list(value)
        if all(isinstance(item, str) for item in items):
            return tuple(sorted(set(items)))
    return value


class RoutingMatch(BaseModel):
    """Exact sets; an empty set means any value. No globs in v1."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo_ids: tuple[_Member, ...] = ()
    roles: tuple[_Member, ...] = ()
    principal_ids: tuple[_Member, ...] = ()
    request_faces: tuple[_Member, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        # One call per match rather than one per field: loading 8,000 policies calls it 8,000 times.
        if isinstance(data, Mapping):
            return {
                key: _sorted_unique(value) if key in _SET_FIELDS else value for key, value in data.items()
            }
        return data


class RoutingAction(BaseModel):
    """What a policy does when it wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider_lock: _Member | None = None
    """A provider/harness binding (ADR-0110), e.g. ``zai-harness``; the route must use its provider."""
    account_pool: tuple[_Member, ...] = ()
    """Account ids to choose from, in order; empty means every account the host can see."""
    selection: Literal["ordered"] = "ordered"
    """``ordered``: the first eligible account of the pool (the only selection in v1)."""
    requirement_map: dict[_Member, _Member] = Field(default_factory=dict)
    """Requirement (literal family or capability) to model."""
    forbid_direct_bypass: StrictBool = False
    """Recorded, not enforced in this phase."""


class RoutingPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: _PolicyId
    enabled: StrictBool = True
    priority: _Priority = 0
    match: RoutingMatch = Field(default_factory=RoutingMatch)
    action: RoutingAction = Field(default_factory=RoutingAction)


WARNING_CODES = frozenset({ReasonCode.UNREACHABLE_POLICY})
"""Problems that describe a valid but suspicious set: listed by ``policy check``, accepted by
``policy save`` unless ``--strict``. Every other code is an error that blocks a save."""


class PolicyProblem(BaseModel):
    """One problem found by ``validate_policies`` (or, with ``count > 1``, a summary of several)."""

    model_config = ConfigDict(frozen=True)

    code: ReasonCode
    policy_id: str | None = None
    index: int | None = None
    message: str
    related: tuple[str, ...] = ()
    count: int = 1
    """How many problems this entry stands for: 1, or for the summary line that closes a code's
    listed problems once its cap is reached (``... and 15,997 more equal-precedence-conflict``),
    the number not listed."""

    @property
    def warning(self) -> bool:
        """A warning (see :data:`WARNING_CODES`) rather than an error."""
        return self.code in WARNING_CODES

    def scrubbed(self) -> PolicyProblem:
        """This problem with credential-shaped text redacted from its policy id, related ids and message:
        a problem quotes values as typed, and a credential-shaped id is refused, never printed."""
        policy_id = self.policy_id and redact_text(self.policy_id)[0]
        related = tuple(redact_text(r)[0] for r in self.related)
        message = redact_text(self.message)[0]
        if (policy_id, related, message) == (self.policy_id, self.related, self.message):
            return self
        return self.model_copy(update={"policy_id": policy_id, "related": related, "message": message})


def precedence_level(match: RoutingMatch) -> int:
    """The rung, from the match's shape (lower wins). See the ladder in ``docs/core.md``.

    1 repo + principal, 2 repo + role, 3 repo + face, 4 repo, 5 principal, 6 role, 7 face,
    8 catch-all; 9 is legacy compatibility and belongs to no policy.
    """
    return rung_of_shape(
        repo=bool(match.repo_ids),
        role=bool(match.roles),
        principal=bool(match.principal_ids),
        face=bool(match.request_faces),
    )


def rung_of_shape(*, repo: bool, role: bool, principal: bool, face: bool) -> int:
    """The rung of a match that names exactly the given dimensions (see :func:`precedence_level`)."""
    if repo:
        if principal:
            return 1
        if role:
            return 2
        return 3 if face else 4
    if principal:
        return 5
    if role:
        return 6
    return 7 if face else 8


def action_key(action: RoutingAction) -> Hashable:
    """A hashable key equal for two actions exactly when the actions compare equal (field by field;
    the one mapping field as its sorted items). Cheap: validation computes one per policy."""
    return tuple(
        tuple(sorted(value.items())) if isinstance(value, dict) else value
        for value in action.__dict__.values()
    )


def policy_set_hash(policies: Iterable[RoutingPolicy]) -> str:
    """Order-independent content hash of a policy set.

    Each policy is encoded in canonical JSON (``model_dump(mode="json")``, every field present); the
    encodings are sorted bytewise and the SHA-256 is taken over the canonical JSON array of the
    policies in that order. The same set in any order gives the same hash; any field change differs.
    """
    encodings = sorted(canonical_json(policy.model_dump(mode="json")) for policy in policies)
    # The canonical encoding of an array is its elements' encodings joined by commas in brackets.
    return digest_bytes(b"[" + b",".join(encodings) + b"]")


def _validation_message(exc: ValidationError) -> str:
    # Locations and messages only: input values could carry anything, secrets included. A location
    # holds the keys the user typed (an unknown field, a requirement_map key): every problem given out
    # is scrubbed (``PolicyProblem.scrubbed``).
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(item) for item in error.get("loc", ()))
        parts.append(f"{loc or '<policy>'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts[:8]) + (" ..." if len(parts) > 8 else "")


def _shown_id(raw_id: object) -> bool:
    """Whether a malformed policy's own id may name it in a problem (printed to a terminal): a short
    string without a control character; otherwise the problem names the policy by its index."""
    return isinstance(raw_id, str) and len(raw_id) <= 128 and raw_id.isprintable()


def parse_indexed(items: object) -> tuple[list[tuple[int, RoutingPolicy]], list[PolicyProblem]]:
    """Parse raw policy objects, keeping each policy's index in the input."""
    if not isinstance(items, list | tuple):
        return [], [
            PolicyProblem(
                code=ReasonCode.MALFORMED_POLICY, message="policies must be a JSON array of objects"
            )
        ]
    parsed: list[tuple[int, RoutingPolicy]] = []
    problems: list[PolicyProblem] = []
    for index, item in enumerate(items):
        if isinstance(item, RoutingPolicy):
            parsed.append((index, item))
            continue
        try:
            parsed.append((index, RoutingPolicy.model_validate(item)))
        except ValidationError as exc:
            raw_id = item.get("id") if isinstance(item, Mapping) else None
            problems.append(
                PolicyProblem(
                    code=ReasonCode.MALFORMED_POLICY,
                    policy_id=raw_id if _shown_id(raw_id) else None,
                    index=index,
                    message=_validation_message(exc),
                )
            )
        except Exception as exc:
            problems.append(
                PolicyProblem(
                    code=ReasonCode.MALFORMED_POLICY,
                    index=index,
                    message=f"unparseable: {type(exc).__name__}",
                )
            )
    return parsed, problems


def parse_policies(items: object) -> tuple[list[RoutingPolicy], list[PolicyProblem]]:
    """Parse raw policy objects; every malformed one becomes a ``malformed-policy`` problem (scrubbed:
    :meth:`PolicyProblem.scrubbed`)."""
    parsed, problems = parse_indexed(items)
    return [policy for _, policy in parsed], [problem.scrubbed() for problem in problems]


_ROLES = frozenset(role.value for role in WorkerRole)
_FACES = frozenset(face.value for face in RequestFace)

_Found = list[tuple[ReasonCode, str]]


def _repo_problems(match: RoutingMatch) -> _Found:
    found: _Found = []
    for repo in match.repo_ids:
        if canonicalize_repo(repo) != repo:
            glob = " (no globs in v1: exact ids only)" if any(c in repo for c in "*?[") else ""
            found.append(
                (
                    ReasonCode.NON_CANONICAL_REPO_ID,
                    f"repo id {repo!r} is not canonical lower-case owner/repo{glob}",
                )
            )
    return found


def _role_and_face_problems(match: RoutingMatch) -> _Found:
    found: _Found = [
        (ReasonCode.UNKNOWN_ROLE, f"unknown role {role!r} (roles: {', '.join(sorted(_ROLES))})")
        for role in match.roles
        if role not in _ROLES
    ]
    found.extend(
        (ReasonCode.UNKNOWN_REQUEST_FACE, f"unknown request face {face!r}")
        for face in match.request_faces
        if face not in _FACES
    )
    return found


def _mapping_problem(
    key: str, model: str, lock: str | None, locked: Provider | None
) -> tuple[ReasonCode, str] | None:
    """The first rule one ``requirement_map`` entry breaks, if any."""
    requirement = parse_requirement(key)
    provider = model_provider(model)
    if requirement.kind in (RequirementKind.UNRECOGNIZED, RequirementKind.NONE):
        return (
            ReasonCode.UNKNOWN_REQUIREMENT,
            f"requirement_map key {key!r} is not a family or capability",
        )
    if requirement.kind is RequirementKind.LITERAL_FAMILY and not requirement.satisfied_by(model):
        return (
            ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL,
            f"{key} -> {model}: a literal family may only map to an Anthropic {key} model",
        )
    if provider is None:
        return ReasonCode.UNKNOWN_MODEL, f"{key} -> {model}: not a model of a known provider"
    if locked is not None and provider is not locked:
        return (
            ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK,
            f"{key} -> {model}: served by {provider.value}, outside provider_lock {lock}",
        )
    return None


def _action_problems(action: RoutingAction) -> _Found:
    found: _Found = []
    lock = action.provider_lock
    locked = PROVIDER_BINDINGS.get(lock) if lock is not None else None
    if lock is not None and locked is None:
        found.append((ReasonCode.UNKNOWN_PROVIDER_BINDING, f"unknown provider binding {lock!r}"))
    if len(set(action.account_pool)) != len(action.account_pool):
        found.append((ReasonCode.MALFORMED_POLICY, "account_pool names an account more than once"))
    for key, model in sorted(action.requirement_map.items()):
        problem = _mapping_problem(key, model, lock, locked)
        if problem is not None:
            found.append(problem)
    return found


def member_problems(policy: RoutingPolicy, index: int) -> list[PolicyProblem]:
    """Every problem with one policy's own members (match values, binding, pool, requirement map); the
    values are quoted as typed (:meth:`PolicyProblem.scrubbed` takes credential shapes out)."""
    found = [
        *_repo_problems(policy.match),
        *_role_and_face_problems(policy.match),
        *_action_problems(policy.action),
    ]
    return [
        PolicyProblem(code=code, policy_id=policy.id, index=index, message=message) for code, message in found
    ]
