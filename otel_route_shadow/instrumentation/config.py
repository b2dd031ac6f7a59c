"""Settings: ``OTEL_PYTHON_ROUTE_SHADOW_*`` environment variables, each mirrored by an
``instrument()`` keyword (the keyword wins).

| variable | keyword | meaning |
| --- | --- | --- |
| ``OTEL_PYTHON_ROUTE_SHADOW_SEAMS`` | ``seams`` | seams to wrap: ``module:Qual.name,face[,extractor_module:function]`` entries separated by ``;`` |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH`` | ``chain_path`` | decision chain file (default ``route-shadow/chain.jsonl``) |
| ``OTEL_PYTHON_ROUTE_SHADOW_STORE`` | ``store`` | policy snapshot store directory (unset: no policies, an ``absent`` snapshot) |
| ``OTEL_PYTHON_ROUTE_SHADOW_DURABILITY`` | ``durability`` | ``flush`` (default) or ``fsync`` per chain record |
| ``OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS`` | ``snapshot_recheck_ms`` | how long a seam may resolve against the store's last verdict before looking at the store again (default 100; 0: on every call) |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHAIN_HOLD_MS`` | ``chain_hold_ms`` | in a burst of spawns, how long the chain writer may keep the chain's file lock between records (default 50; 0: lock per record) |
| ``OTEL_PYTHON_ROUTE_SHADOW_STRICT`` | ``strict`` | ``true``: a bug in the shadow path raises (for host test suites) |
| ``OTEL_PYTHON_ROUTE_SHADOW_DISABLED`` | ``disabled`` | ``true``: every seam is the bare call (checked live, on every call) |
| (none) | ``settings`` | a host settings object; shadowing runs only while its ``route_shadow_enabled`` is exactly ``True`` |

Empty means unset; a boolean is true only for ``true`` (case-insensitive), as everywhere in OpenTelemetry.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from otel_route_shadow.core import RequestFace, RouteContext
from otel_route_shadow.shadow.record import Spawn

__all__ = [
    "ENV_PREFIX",
    "Extractor",
    "RouteShadowConfig",
    "SeamCall",
    "SeamConfigError",
    "SeamSpec",
    "env_disabled",
    "env_flag",
    "parse_seams",
]

ENV_PREFIX = "OTEL_PYTHON_ROUTE_SHADOW_"
ENV_SEAMS = ENV_PREFIX + "SEAMS"
ENV_CHAIN_PATH = ENV_PREFIX + "CHAIN_PATH"
ENV_STORE = ENV_PREFIX + "STORE"
ENV_DURABILITY = ENV_PREFIX + "DURABILITY"
ENV_STRICT = ENV_PREFIX + "STRICT"
ENV_DISABLED = ENV_PREFIX + "DISABLED"
ENV_SNAPSHOT_RECHECK_MS = ENV_PREFIX + "SNAPSHOT_RECHECK_MS"
ENV_CHAIN_HOLD_MS = ENV_PREFIX + "CHAIN_HOLD_MS"

DEFAULT_CHAIN_PATH = Path("route-shadow") / "chain.jsonl"
DEFAULT_SNAPSHOT_RECHECK_MS = 100
"""A save is seen by every seam call that starts at least this long after it. Under load the store's
stats are then paid once per interval instead of once per spawn; a quiet host (one spawn every
100 ms or more, most factories) still looks on every call."""
DEFAULT_CHAIN_HOLD_MS = 50
"""Only spawns less than a millisecond apart make the writer hold the chain's lock between records;
another process's first record after such a burst may wait up to this long (``RoutingAuditLog``)."""


class SeamConfigError(ValueError):
    """A seam entry cannot be understood; the message names the entry."""


class SeamCall(NamedTuple):
    """What an extractor sees of one seam call (immutable; a named tuple because one is built on
    every call, at a third of a frozen dataclass's cost)."""

    seam: str
    request_face: str
    instance: Any
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


Extractor = Callable[[SeamCall], RouteContext | Mapping[str, Any] | Spawn | None]
"""Builds the route context (with its legacy route) from a seam call; None: not a routed call. A
``Spawn(context, conversation_id)`` also gives the host's conversation id (``gen_ai.conversation.id``)."""


def default_extractor(call: SeamCall) -> RouteContext | Mapping[str, Any] | None:
    """Without an extractor, a seam is routed when the host passes ``route_context=``."""
    value = call.kwargs.get("route_context")
    if isinstance(value, RouteContext | Mapping):
        return value
    return None


@dataclass(frozen=True, slots=True)
class SeamSpec:
    """One seam: a dotted target, its request face, and the extractor for its arguments."""

    target: str
    request_face: str
    extractor: Extractor = default_extractor
    name: str = ""
    _resolved_name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        module, sep, qualname = self.target.partition(":")
        if not sep or not module or not qualname:
            raise SeamConfigError(f"seam {self.target!r}: expected module:Qualified.name")
        if self.request_face not in {face.value for face in RequestFace}:
            raise SeamConfigError(f"seam {self.target!r}: unknown request face {self.request_face!r}")
        object.__setattr__(self, "_resolved_name", self.name or qualname)

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.target.partition(":")[2]

    @property
    def seam_name(self) -> str:
        return self._resolved_name


def _import_callable(path: str) -> Extractor:
    module_name, sep, attr = path.partition(":")
    if not sep:
        raise SeamConfigError(f"extractor {path!r}: expected module:function")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SeamConfigError(f"extractor {path!r}: cannot import ({type(exc).__name__})") from None
    if not callable(obj):
        raise SeamConfigError(f"extractor {path!r}: not callable")
    extractor: Extractor = obj
    return extractor


def parse_seams(value: str) -> tuple[SeamSpec, ...]:
    """Parse ``module:Qual.name,face[,extractor]`` entries separated by ``;``."""
    specs = []
    for raw in value.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        parts = [part.strip() for part in entry.split(",")]
        if len(parts) not in (2, 3):
            raise SeamConfigError(f"seam entry {entry!r}: expected target,face[,extractor]")
        extractor = _import_callable(parts[2]) if len(parts) == 3 else default_extractor
        specs.append(SeamSpec(target=parts[0], request_face=parts[1], extractor=extractor))
    return tuple(specs)


def env_flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


_ENVIRON = os.environ
_ENVIRON_DATA: Any = getattr(os.environ, "_data", None)
_DISABLED_KEY: Any = getattr(os.environ, "encodekey", lambda key: None)(ENV_DISABLED)
if not isinstance(_ENVIRON_DATA, dict) or _DISABLED_KEY is None:
    _ENVIRON_DATA = None


def env_disabled() -> bool:
    """``OTEL_PYTHON_ROUTE_SHADOW_DISABLED``, read live: every seam call asks.

    ``os.environ.get`` of an unset name encodes the key and raises and catches a ``KeyError``, about
    a microsecond on every spawn. CPython's ``os.environ`` keeps its encoded entries in a dict that
    each of its writes updates (``os.environ[...] =``, ``del``, ``monkeypatch.setenv``), so the same
    answer is one dict lookup. Anything else in place of ``os.environ`` is asked the usual way.
    """
    environ = os.environ
    if environ is _ENVIRON and _ENVIRON_DATA is not None:
        raw = _ENVIRON_DATA.get(_DISABLED_KEY)
        return raw is not None and env_flag(environ.decodevalue(raw))
    return env_flag(environ.get(ENV_DISABLED))


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    return value if value else None


class RouteShadowConfig(BaseModel):
    """Resolved settings of one instrumentation."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    seams: tuple[SeamSpec, ...] = ()
    chain_path: Path = DEFAULT_CHAIN_PATH
    store: Path | None = None
    durability: Literal["flush", "fsync"] = "flush"
    strict: bool = False
    disabled: bool = False
    snapshot_recheck_ms: int = Field(default=DEFAULT_SNAPSHOT_RECHECK_MS, ge=0, le=3_600_000, strict=True)
    chain_hold_ms: int = Field(default=DEFAULT_CHAIN_HOLD_MS, ge=0, le=1000, strict=True)
    settings: Any = Field(default=None, exclude=True)

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RouteShadowConfig:
        """Environment first, ``instrument()`` keywords over it; unknown keywords are errors."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        seams = _env(env, ENV_SEAMS)
        if seams is not None:
            values["seams"] = parse_seams(seams)
        chain = _env(env, ENV_CHAIN_PATH)
        if chain is not None:
            values["chain_path"] = Path(chain)
        store = _env(env, ENV_STORE)
        if store is not None:
            values["store"] = Path(store)
        durability = _env(env, ENV_DURABILITY)
        if durability is not None:
            values["durability"] = durability.strip().lower()
        for name, key in (
            (ENV_SNAPSHOT_RECHECK_MS, "snapshot_recheck_ms"),
            (ENV_CHAIN_HOLD_MS, "chain_hold_ms"),
        ):
            milliseconds = _env(env, name)
            if milliseconds is not None:
                try:
                    values[key] = int(milliseconds.strip())
                except ValueError:
                    raise ValueError(
                        f"{name}={milliseconds!r}: expected a whole number of milliseconds"
                    ) from None
        values["strict"] = env_flag(_env(env, ENV_STRICT))
        values["disabled"] = env_flag(_env(env, ENV_DISABLED))
        unknown = set(overrides) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown route-shadow settings: {', '.join(sorted(unknown))}")
        for key, value in overrides.items():
            if value is None and key != "settings":
                continue
            values[key] = parse_seams(value) if key == "seams" and isinstance(value, str) else value
        return cls(**values)
