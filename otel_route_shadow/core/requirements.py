"""Model requirements (ADR-0137) and the provenance allow-list ``satisfied_by``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from otel_route_shadow.core.vocabulary import Capability, ModelFamily, Provider, RequirementKind

__all__ = ["ModelRequirement", "model_provider", "parse_requirement"]

_FAMILIES: Mapping[str, ModelFamily] = MappingProxyType({family.value: family for family in ModelFamily})
_CAPABILITIES: Mapping[str, Capability] = MappingProxyType({cap.value: cap for cap in Capability})
_NONE_SPELLINGS = frozenset({"", "none"})


def model_provider(model: object) -> Provider | None:
    """Which provider serves a model name, by its published prefix; None when unknown."""
    if not isinstance(model, str):
        return None
    if model.startswith("claude-"):
        return Provider.ANTHROPIC
    if model.startswith("glm-"):
        return Provider.ZAI
    return None


class ModelRequirement(BaseModel):
    """What a spawn needs from a model: nothing, a literal family, or a provider-neutral capability."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: RequirementKind
    name: str = "none"

    def satisfied_by(self, model: object) -> bool:
        """The provenance allow-list.

        A literal family is satisfied only by an Anthropic model of that family: a GLM model that
        benchmarks like Opus is still not Opus, and the caller asked for Opus by name. A capability is
        satisfied by any model of a known provider: the explicit ``requirement_map`` is its authority.
        """
        if not isinstance(model, str):
            return False
        if self.kind is RequirementKind.NONE:
            return True
        if self.kind is RequirementKind.LITERAL_FAMILY:
            return model_provider(model) is Provider.ANTHROPIC and (
                model == self.name or model.startswith(self.name + "-")
            )
        if self.kind is RequirementKind.CAPABILITY:
            return model_provider(model) is not None
        return False


def parse_requirement(raw: object) -> ModelRequirement:
    """Interpret a requirement as given by a host; never raises (unknown text is ``unrecognized``)."""
    if raw is None:
        return ModelRequirement(kind=RequirementKind.NONE)
    if not isinstance(raw, str):
        return ModelRequirement(kind=RequirementKind.UNRECOGNIZED, name="")
    if raw in _NONE_SPELLINGS:
        return ModelRequirement(kind=RequirementKind.NONE)
    if raw in _FAMILIES:
        return ModelRequirement(kind=RequirementKind.LITERAL_FAMILY, name=raw)
    if raw in _CAPABILITIES:
        return ModelRequirement(kind=RequirementKind.CAPABILITY, name=raw)
    return ModelRequirement(kind=RequirementKind.UNRECOGNIZED, name=raw)
