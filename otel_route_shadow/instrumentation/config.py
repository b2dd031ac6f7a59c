"""Settings: ``OTEL_PYTHON_ROUTE_SHADOW_*`` environment variables, each mirrored by an
``instrument()`` keyword (the keyword wins).

| variable | keyword | meaning |
| --- | --- | --- |
| ``OTEL_PYTHON_ROUTE_SHADOW_SEAMS`` | ``seams`` | seams to wrap: ``module:Qual.name,face[,extractor_module:function]`` entries separated by ``;`` |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH`` | ``chain_path`` | decision chain file (default ``route-shadow/chain.jsonl``) |
| ``OTEL_PYTHON_ROUTE_SHADOW_STORE`` | ``store`` | policy snapshot store directory (unset: no policies, an ``absent`` snapshot) |
| ``OTEL_PYTHON_ROUTE_SHADOW_DURABILITY`` | ``durability`` | ``flush`` (default) or ``fsync`` per chain record |
| ``OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS`` | ``snapshot_recheck_ms`` | how long a seam may resolve against the store's last verdict before looking at the store again (default 100; 0: on every call) |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS`` | ``chain_lock_timeout_ms`` | longest a spawn waits for another process holding the chain's lock (default 100); a record that waits longer is kept in memory and written with the next one |
| ``OTEL_PYTHON_ROUTE_SHADOW_ORIGIN`` | ``origin`` | the log's name in its checkpoints (default ``<host>/route-shadow/<16 hex of SHA-256(absolute chain path)>``) |
| ``OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY`` | ``signing_key`` | path of the checkpoint signing key file (``otel-route-shadow key generate``); unset: checkpoints unsigned |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS`` | ``checkpoint_records`` | checkpoint at least every this many records (default 1000) |
| ``OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS`` | ``checkpoint_seconds`` | ... or on the first record this many seconds after the last checkpoint (default 10; also at shutdown) |
| ``OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY`` | ``witness_policy`` | a C2SP tlog-policy file: signed checkpoints are pushed to its witnesses that have a URL |
| ``OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY`` | ``witness_pushes_per_day`` | most pushes a day to each witness (default 1440: one a minute) |
| ``OTEL_PYTHON_ROUTE_SHADOW_STRICT`` | ``strict`` | ``true``: a bug in the shadow path raises (for host test suites) |
| ``OTEL_PYTHON_ROUTE_SHADOW_DISABLED`` | ``disabled`` | ``true``: every seam is the bare call. The variable is read live on every call, in both directions; the keyword switches off for the instrumentation's life |
| (none) | ``settings`` | a host settings object; shadowing runs only while its ``route_shadow_enabled`` is exactly ``True`` |

Empty means unset; a boolean is true only for ``true`` (case-insensitive), as everywhere in OpenTelemetry.
A setting that cannot be understood makes ``instrument()`` log one line and wrap nothing (it never
raises, so ``opentelemetry-instrument`` goes on with the other instrumentors).
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
from otel_route_shadow.instrumentation.checkpointing import (
    DEFAULT_EVERY_RECORDS,
    DEFAULT_EVERY_SECONDS,
    DEFAULT_PUSHES_PER_DAY,
    ScheduledCheckpointer,
    scheduled_checkpointer,
)
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
    "make_checkpointer",
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
ENV_CHAIN_LOCK_TIMEOUT_MS = ENV_PREFIX + "CHAIN_LOCK_TIMEOUT_MS"
ENV_ORIGIN = ENV_PREFIX + "ORIGIN"
ENV_SIGNING_KEY = ENV_PREFIX + "SIGNING_KEY"
ENV_CHECKPOINT_RECORDS = ENV_PREFIX + "CHECKPOINT_RECORDS"
ENV_CHECKPOINT_SECONDS = ENV_PREFIX + "CHECKPOINT_SECONDS"
ENV_WITNESS_POLICY = ENV_PREFIX + "WITNESS_POLICY"
ENV_WITNESS_PUSHES_PER_DAY = ENV_PREFIX + "WITNESS_PUSHES_PER_DAY"

DEFAULT_CHAIN_PATH = Path("route-shadow") / "chain.jsonl"
DEFAULT_SNAPSHOT_RECHECK_MS = 100
"""A save is seen by every seam call that starts at least this long after it. Under load the store's
stats are then paid once per interval instead of once per spawn; a quiet host (one spawn every
100 ms or more, most factories) still looks on every call."""
DEFAULT_CHAIN_LOCK_TIMEOUT_MS = 100
"""A spawn costs seconds; waiting a tenth of that for a reader or another writer is invisible, and
a record that still finds the chain locked is kept, not lost (``RoutingAuditLog.submit``)."""


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
    chain_lock_timeout_ms: int = Field(default=DEFAULT_CHAIN_LOCK_TIMEOUT_MS, ge=0, le=60_000, strict=True)
    origin: str | None = None
    signing_key: Path | None = Field(default=None, repr=False)
    checkpoint_records: int = Field(default=DEFAULT_EVERY_RECORDS, ge=1, le=100_000_000, strict=True)
    checkpoint_seconds: float = Field(default=DEFAULT_EVERY_SECONDS, gt=0, le=86_400)
    witness_policy: Path | None = None
    witness_pushes_per_day: float = Field(default=DEFAULT_PUSHES_PER_DAY, gt=0, le=8_640_000)
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
            (ENV_CHAIN_LOCK_TIMEOUT_MS, "chain_lock_timeout_ms"),
        ):
            milliseconds = _env(env, name)
            if milliseconds is not None:
                try:
                    values[key] = int(milliseconds.strip())
                except ValueError:
                    raise ValueError(
                        f"{name}={milliseconds!r}: expected a whole number of milliseconds"
                    ) from None
        values.update(_checkpoint_settings(env))
        values["strict"] = env_flag(_env(env, ENV_STRICT))
        # ENV_DISABLED is not copied into ``disabled``: the runtime reads it live on every call
        # (``env_disabled``), so unsetting it turns shadowing back on without a restart.
        unknown = set(overrides) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown route-shadow settings: {', '.join(sorted(unknown))}")
        for key, value in overrides.items():
            if value is None and key != "settings":
                continue
            values[key] = parse_seams(value) if key == "seams" and isinstance(value, str) else value
        return cls(**values)


def _checkpoint_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The four checkpoint settings from the environment (malformed numbers are errors naming the variable)."""
    values: dict[str, Any] = {}
    origin = _env(env, ENV_ORIGIN)
    if origin is not None:
        values["origin"] = origin.strip()
    key = _env(env, ENV_SIGNING_KEY)
    if key is not None:
        values["signing_key"] = Path(key)
    records = _env(env, ENV_CHECKPOINT_RECORDS)
    if records is not None:
        try:
            values["checkpoint_records"] = int(records.strip())
        except ValueError:
            raise ValueError(f"{ENV_CHECKPOINT_RECORDS}={records!r}: expected a whole number") from None
    seconds = _env(env, ENV_CHECKPOINT_SECONDS)
    if seconds is not None:
        try:
            values["checkpoint_seconds"] = float(seconds.strip())
        except ValueError:
            raise ValueError(f"{ENV_CHECKPOINT_SECONDS}={seconds!r}: expected a number of seconds") from None
    policy = _env(env, ENV_WITNESS_POLICY)
    if policy is not None:
        values["witness_policy"] = Path(policy)
    pushes = _env(env, ENV_WITNESS_PUSHES_PER_DAY)
    if pushes is not None:
        try:
            values["witness_pushes_per_day"] = float(pushes.strip())
        except ValueError:
            raise ValueError(f"{ENV_WITNESS_PUSHES_PER_DAY}={pushes!r}: expected a number per day") from None
    return values


def make_checkpointer(config: RouteShadowConfig) -> ScheduledCheckpointer:
    """The chain's checkpointer (``checkpointing.scheduled_checkpointer``): a key or a witness policy that
    cannot be used is logged and left out, so the host is never stopped by it."""
    return scheduled_checkpointer(
        str(config.chain_path),
        origin=config.origin,
        signing_key=None if config.signing_key is None else str(config.signing_key),
        every_records=config.checkpoint_records,
        every_seconds=config.checkpoint_seconds,
        witness_policy=None if config.witness_policy is None else str(config.witness_policy),
        pushes_per_day=config.witness_pushes_per_day,
    )
