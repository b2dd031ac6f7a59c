"""What the resolver is asked about: a spawn's route context, its accounts and its legacy route.

Fields hold the host's values as given (strings), not enums: a context is an observation, and a
garbage value must reach ``explain`` to be explained, not be rejected at the door. The legacy route's
``mechanism`` and ``transport`` are derived by :mod:`otel_route_shadow.core.legacy`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool

__all__ = ["MAX_ACCOUNTS", "Account", "LegacyRoute", "LegacyStage", "RouteContext"]

_Text = Annotated[str, Field(max_length=4096)]
MAX_ACCOUNTS = 1024
"""The most accounts a context holds: resolving and explaining cost grows with them (a context of
1,024 accounts is explained in 0.15 s; docs/benchmarks.md, row 2c), and no host sees more."""
MAX_STAGES = 64
"""The most legacy stages a route holds (a seam applies a handful)."""


class Account(BaseModel):
    """An account this host can see (ADR-0138): identity, provider and state; never a credential."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: _Text
    provider: _Text
    state: _Text = "available"


class LegacyStage(BaseModel):
    """One legacy mechanism as a seam applied it, and where the route stood afterwards."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mechanism: _Text
    provider: _Text
    model: _Text | None = None
    gateway: StrictBool = False
    detail: _Text | None = None


class LegacyRoute(BaseModel):
    """The route that actually ran, and the mechanism that decided it (D7)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: _Text
    model: _Text | None = None
    account: _Text | None = None
    transport: _Text
    mechanism: _Text
    mechanism_detail: _Text | None = None
    stages: Annotated[tuple[LegacyStage, ...], Field(max_length=MAX_STAGES)] = ()


class RouteContext(BaseModel):
    """One spawn as the resolver sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: _Text | None = None
    repo_slug: _Text | None = None
    role: _Text | None = None
    principal_id: _Text | None = None
    request_face: _Text
    requirement: _Text | None = None
    accounts: Annotated[tuple[Account, ...], Field(max_length=MAX_ACCOUNTS)] = ()
    legacy_route: LegacyRoute
