"""The route that served a spawn, held against the route its legacy mechanism chose.

A gateway or a provider client may fall back on its own: the spawn the legacy mechanism sent to one
provider and model is then served by another. That is the silent routing the shadow phase exists to
expose, so a served route that differs is a finding (``served-differs``), never agreement; a spawn
whose host reported nothing is ``unknown``, never agreement either.

The comparison, one rule a function:

* a reported gateway fallback (``fallback``) differs, whatever else is known;
* a provider is the same when both names fold to the same letters and digits (``z.ai``, ``Z_AI`` and
  ``zai`` are one provider);
* a model is the same when both fold to the same name once a ``provider/`` path is taken off, or when
  the served one is the chosen one with a dated version after it (``claude-opus-4-5-20251101``,
  ``claude-opus-4-5@20251101``: providers answer with the snapshot they ran);
* what is known decides: ``same`` when everything reported matches, ``differs`` when anything does
  not, ``unknown`` when nothing comparable was reported (no provider, and no model, or a model where
  the legacy route named none).

Why a served route differs (``served_why``), first rule that applies:

* ``fallback``: a gateway reported falling back, or an attempt before the one that served failed;
* ``load-balance``: the gateway says the model group it served from is the model asked for, and
  another provider served (another deployment of that group);
* ``alias``: the same, with the provider asked for (or none reported): the name asked for is an
  alias of the model that served;
* ``unknown``: nothing says why.

Only a ``fallback`` is a disagreement (the ``served-differs`` finding): aliases, load balancing,
weights, experiments and residency change the served name without the gateway routing away from
what was chosen.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from otel_route_shadow.core.context import LegacyRoute
from otel_route_shadow.core.vocabulary import ServedStatus, ServedWhy

__all__ = [
    "ATTEMPTS_MAX",
    "SERVED_DIFFERS",
    "Attempt",
    "ServedRoute",
    "same_model",
    "same_provider",
    "served_status",
    "served_why",
    "with_finding",
]

SERVED_DIFFERS: Final = "served-differs"
"""The finding: the route that served the spawn is not the route its legacy mechanism chose."""


_Text = Annotated[str, Field(max_length=4096)]


ATTEMPTS_MAX: Final = 64
"""The most attempts a served route holds (a host's list beyond it is refused as a whole)."""


class Attempt(BaseModel):
    """One attempt a gateway or client made for a spawn: the provider and model it tried (when
    known) and, for an attempt that failed, the type of its error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: _Text | None = None
    model: _Text | None = None
    error_type: _Text | None = None


class ServedRoute(BaseModel):
    """What served a spawn, as the host reports it: any of the provider, the model, whether a
    gateway reported falling back (LiteLLM's ``x-litellm-attempted-fallbacks``), the gateway's model
    group it served from (LiteLLM's ``x-litellm-model-group``), and the attempts, in order, the last
    being the one that served. All unset: nothing was reported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: _Text | None = None
    model: _Text | None = None
    fallback: StrictBool = False
    model_group: _Text | None = None
    attempts: Annotated[tuple[Attempt, ...], Field(max_length=ATTEMPTS_MAX)] = ()

    @property
    def reported(self) -> bool:
        return self.provider is not None or self.model is not None or self.fallback or bool(self.attempts)

    @property
    def failed_before(self) -> bool:
        """An attempt before the last one failed."""
        return any(attempt.error_type is not None for attempt in self.attempts[:-1])


_NOT_NAME: Final = re.compile(r"[^0-9a-z]")
_DATED: Final = re.compile(r"[-@](?:[0-9]{8}|[0-9]{4}-[0-9]{2}-[0-9]{2})(?:-v[0-9]+(?::[0-9]+)?)?")
"""What may follow a chosen model's name in the served one: a dated snapshot, and a version. Its
digits are ASCII only (a ``\\d`` would take other scripts' digits too); it is matched whole, with
``fullmatch``."""


def same_provider(chosen: str, served: str) -> bool:
    return _NOT_NAME.sub("", chosen.casefold()) == _NOT_NAME.sub("", served.casefold())


def _model_name(model: str) -> str:
    return model.casefold().rsplit("/", 1)[-1]


def same_model(chosen: str, served: str) -> bool:
    name, answered = _model_name(chosen), _model_name(served)
    if answered == name:
        return True
    return answered.startswith(name) and _DATED.fullmatch(answered, len(name)) is not None


def served_status(legacy: LegacyRoute, served: ServedRoute | None) -> ServedStatus:
    """The served route against the legacy route (see the module rules)."""
    if served is None:
        return ServedStatus.UNKNOWN
    if served.fallback:
        return ServedStatus.DIFFERS
    checks = []
    if served.provider is not None:
        checks.append(same_provider(legacy.provider, served.provider))
    if served.model is not None and legacy.model is not None:
        checks.append(same_model(legacy.model, served.model))
    if not checks:
        return ServedStatus.UNKNOWN
    return ServedStatus.SAME if all(checks) else ServedStatus.DIFFERS


def served_why(legacy: LegacyRoute, served: ServedRoute | None) -> ServedWhy | None:
    """Why ``served`` differs from the legacy route (see the module rules); None when it does not."""
    if served is None or served_status(legacy, served) is not ServedStatus.DIFFERS:
        return None
    if served.fallback or served.failed_before:
        return ServedWhy.FALLBACK
    group = served.model_group
    if group is None or legacy.model is None or not same_model(legacy.model, group):
        return ServedWhy.UNKNOWN
    if served.provider is not None and not same_provider(legacy.provider, served.provider):
        return ServedWhy.LOAD_BALANCE
    return ServedWhy.ALIAS


def with_finding(finding: str | None, code: str) -> str:
    """``route_shadow.finding`` with ``code`` added: the codes comma-separated, sorted, each once."""
    codes = {part for part in (finding or "").split(",") if part}
    return ",".join(sorted(codes | {code}))
