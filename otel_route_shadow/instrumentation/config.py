"""Settings: the ``OTEL_PYTHON_ROUTE_SHADOW_*`` environment variables (named and described in
:mod:`otel_route_shadow.instrumentation.environment_variables`), each mirrored by an ``instrument()``
keyword (the keyword wins), plus the keywords ``settings`` (a host settings object: shadowing runs only
while its ``route_shadow_enabled`` is exactly ``True``), ``tracer_provider`` and ``logger_provider``.

A setting that cannot be understood makes ``instrument()`` log one line and wrap nothing (it never
raises, so ``opentelemetry-instrument`` goes on with the other instrumentors).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from otel_route_shadow.core import RequestFace, RouteContext, ServedRoute
from otel_route_shadow.instrumentation.checkpointing import (
    DEFAULT_EVERY_RECORDS,
    DEFAULT_EVERY_SECONDS,
    DEFAULT_PUSHES_PER_DAY,
    DEFAULT_SEGMENT_SECONDS,
    ScheduledCheckpointer,
    scheduled_checkpointer,
)
from otel_route_shadow.instrumentation.environment_variables import (
    OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS,
    OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH,
    OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS,
    OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS,
    OTEL_PYTHON_ROUTE_SHADOW_DISABLED,
    OTEL_PYTHON_ROUTE_SHADOW_DURABILITY,
    OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT,
    OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS,
    OTEL_PYTHON_ROUTE_SHADOW_ORIGIN,
    OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE,
    OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS,
    OTEL_PYTHON_ROUTE_SHADOW_SEAMS,
    OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES,
    OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS,
    OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY,
    OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS,
    OTEL_PYTHON_ROUTE_SHADOW_STORE,
    OTEL_PYTHON_ROUTE_SHADOW_STRICT,
    OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY,
    OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY,
)
from otel_route_shadow.instrumentation.flag_events import FlagEventSink
from otel_route_shadow.shadow import Spawn

__all__ = [
    "Extractor",
    "ResponseHook",
    "RouteShadowConfig",
    "Seam",
    "SeamCall",
    "SeamConfigError",
    "SeamSpec",
    "env_disabled",
    "env_flag",
    "make_checkpointer",
    "parse_seams",
]

DEFAULT_CHAIN_PATH = Path("route-shadow") / "chain.jsonl"
DEFAULT_SNAPSHOT_RECHECK_MS = 100
"""A save is seen by every seam call that starts at least this long after it. Under load the store's
stats are then paid once per interval instead of once per spawn; a quiet host (one spawn every
100 ms or more, most factories) still looks on every call."""
DEFAULT_CHAIN_LOCK_TIMEOUT_MS = 100
"""A spawn costs seconds; waiting a tenth of that for a reader or another writer is invisible, and
a record that still finds the chain locked is kept, not lost (``DecisionChain.submit``)."""


class SeamConfigError(ValueError):
    """A seam entry cannot be understood; the message names the entry."""


class SeamCall(NamedTuple):
    """What an extractor sees of one seam call (immutable; one is built on every call)."""

    seam: str
    request_face: str
    instance: Any
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


Extractor = Callable[[SeamCall], RouteContext | Mapping[str, Any] | Spawn | None]
"""Builds the route context (with its legacy route) from a seam call; None: not a routed call. A
``Spawn(context, conversation_id)`` also gives the host's conversation id (``gen_ai.conversation.id``)."""


ResponseHook = Callable[[SeamCall, Any, BaseException | None], ServedRoute | Mapping[str, Any] | None]
"""Says what served a spawn once the seam's call is over (the contrib instrumentations' response hook):
called with the seam call, its result (None when it raised; a coroutine's or generator's return
value) and the exception it raised (or None); returns a ``ServedRoute``, a mapping of its fields
(``provider``, ``model``, ``fallback``), or None when it knows nothing. It runs in the host's thread
after the host's call, before the seam span ends; it must not block. A hook that raises or returns
anything else is contained (logged once per cause, the host's result untouched), and the record's
served route is ``unknown``."""


def default_extractor(call: SeamCall) -> RouteContext | Mapping[str, Any] | None:
    """Without an extractor, a seam is routed when the host passes ``route_context=``."""
    value = call.kwargs.get("route_context")
    if isinstance(value, RouteContext | Mapping):
        return value
    return None


class Seam(NamedTuple):
    """One seam as its wrapper sees it: the name on its spans and records, its request face, the
    extractor of its calls and its response hook (None: the served route comes from the run's own
    spans, when it runs in process, or is ``unknown``). The instrumentor makes one per ``SeamSpec``;
    ``shadow_seam`` makes one per decorated function."""

    name: str
    request_face: str
    extractor: Extractor = default_extractor
    response_hook: ResponseHook | None = None


@dataclass(frozen=True, slots=True)
class SeamSpec:
    """One seam: a dotted target, its request face, the extractor for its arguments, and its
    response hook (``ResponseHook``)."""

    target: str
    request_face: str
    extractor: Extractor = default_extractor
    name: str = ""
    response_hook: ResponseHook | None = None
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
    def seam(self) -> Seam:
        return Seam(self._resolved_name, self.request_face, self.extractor, self.response_hook)


def _import_callable(path: str, what: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep:
        raise SeamConfigError(f"{what} {path!r}: expected module:function")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SeamConfigError(f"{what} {path!r}: cannot import ({type(exc).__name__})") from None
    if not callable(obj):
        raise SeamConfigError(f"{what} {path!r}: not callable")
    return obj


def parse_seams(value: str) -> tuple[SeamSpec, ...]:
    """Parse ``module:Qual.name,face[,extractor[,response_hook]]`` entries separated by ``;`` (an
    empty extractor is the default one, an empty hook none)."""
    specs = []
    for number, raw in enumerate(value.split(";"), start=1):
        entry = raw.strip()
        if not entry:
            continue
        parts = [part.strip() for part in entry.split(",")]
        if len(parts) not in (2, 3, 4):
            raise SeamConfigError(f"seam entry {number}: expected target,face[,extractor[,response_hook]]")
        extractor: Extractor = (
            _import_callable(parts[2], "extractor") if len(parts) > 2 and parts[2] else default_extractor
        )
        hook: ResponseHook | None = (
            _import_callable(parts[3], "response hook") if len(parts) == 4 and parts[3] else None
        )
        specs.append(
            SeamSpec(target=parts[0], request_face=parts[1], extractor=extractor, response_hook=hook)
        )
    return tuple(specs)


def env_flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def env_disabled() -> bool:
    """``OTEL_PYTHON_ROUTE_SHADOW_DISABLED``, read from ``os.environ`` on every call (every seam asks)."""
    return env_flag(os.environ.get(OTEL_PYTHON_ROUTE_SHADOW_DISABLED))


def _env(environ: Mapping[str, str], name: str) -> str | None:
    """A variable's value without surrounding whitespace (the CR of a CRLF env file, say); None when blank."""
    return environ.get(name, "").strip() or None


class RouteShadowConfig(BaseModel):
    """Resolved settings of one instrumentation."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    seams: tuple[SeamSpec, ...] = ()
    chain_path: Path = Field(default=DEFAULT_CHAIN_PATH, validate_default=True)
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
    segment_bytes: int | None = Field(default=None, ge=0, le=1 << 50, strict=True)
    """None: ``DEFAULT_SEGMENT_BYTES``, or with a retention a cut every 1/16 of it (``segment_schedule``)."""
    segment_seconds: float = Field(default=DEFAULT_SEGMENT_SECONDS, ge=0, le=100 * 365 * 86_400)
    retention_records: int = Field(default=0, ge=0, le=1 << 62, strict=True)
    retention_delete: bool = False
    witness_policy: Path | None = None
    witness_pushes_per_day: float = Field(default=DEFAULT_PUSHES_PER_DAY, gt=0, le=8_640_000)
    flag_event: FlagEventSink = "log"
    in_process_seams: tuple[str, ...] = ()
    settings: Any = Field(default=None, exclude=True)

    @field_validator("chain_path", "store", "signing_key", "witness_policy")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        """A relative path is taken from the working directory at ``instrument()``: a host that changes
        directory later still writes the same chain and reads the same store."""
        if path is not None and "\0" in str(path):  # no file has such a name: a setting, not a bug
            raise ValueError("a path holds a NUL character")
        return None if path is None else path.absolute()

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RouteShadowConfig:
        """Environment first, ``instrument()`` keywords over it; unknown keywords are errors. A keyword
        given as a string is read as its environment variable's value is (:data:`_SETTINGS`)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for key, setting in _SETTINGS.items():
            text = _env(env, setting.variable)
            if text is not None:
                values[key] = setting.read(text, setting.variable)
        # OTEL_PYTHON_ROUTE_SHADOW_DISABLED is not copied into ``disabled``: the runtime reads it on every call
        # (``env_disabled``), so unsetting it turns shadowing back on without a restart.
        unknown = set(overrides) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown route-shadow settings: {', '.join(sorted(unknown))}")
        for key, given in overrides.items():
            value = given
            if isinstance(given, str) and key in _KEYWORD_TEXT:
                text = given.strip() or None  # blank, as the variable: not given
                value = None if text is None else _KEYWORD_TEXT[key].read(text, key)
            if value is None and key != "settings":
                continue
            values[key] = value
        try:
            return cls(**values)
        except ValidationError as exc:  # named, never quoted: a setting's value may be a pasted key
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            problems = "; ".join(f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in errors)
            raise ValueError(f"route-shadow settings: {problems}") from None


def _names(value: str) -> tuple[str, ...]:
    """Comma-separated names, stripped, the empty ones left out."""
    return tuple(name for name in (part.strip() for part in value.split(",")) if name)


class _Setting(NamedTuple):
    """How a setting's text (its variable's value, or its keyword given as a string) is read."""

    variable: str
    parse: Callable[[str], Any]
    expected: str = ""
    """What a value ``parse`` refuses should have been; empty: ``parse``'s own message says it."""

    def read(self, text: str, name: str) -> Any:
        """``text`` (stripped, not blank) parsed; a refusal is an error naming ``name``, never quoting it."""
        try:
            return self.parse(text)
        except ValueError:
            if not self.expected:
                raise
            raise ValueError(f"{name}: expected {self.expected}") from None


_MS: Final = "a whole number of milliseconds"
_SETTINGS: Final[Mapping[str, _Setting]] = {
    "seams": _Setting(OTEL_PYTHON_ROUTE_SHADOW_SEAMS, parse_seams),
    "chain_path": _Setting(OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH, Path),
    "store": _Setting(OTEL_PYTHON_ROUTE_SHADOW_STORE, Path),
    "durability": _Setting(OTEL_PYTHON_ROUTE_SHADOW_DURABILITY, str.lower),
    "flag_event": _Setting(OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT, str.lower),
    "in_process_seams": _Setting(OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS, _names),
    "snapshot_recheck_ms": _Setting(OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS, int, _MS),
    "chain_lock_timeout_ms": _Setting(OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS, int, _MS),
    "origin": _Setting(OTEL_PYTHON_ROUTE_SHADOW_ORIGIN, str),
    "signing_key": _Setting(OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY, Path),
    "checkpoint_records": _Setting(OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS, int, "a whole number"),
    "checkpoint_seconds": _Setting(OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS, float, "a number of seconds"),
    "segment_bytes": _Setting(OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES, int, "a whole number of bytes"),
    "segment_seconds": _Setting(OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS, float, "a number of seconds"),
    "retention_records": _Setting(
        OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS, int, "a whole number of records"
    ),
    "retention_delete": _Setting(OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE, env_flag),
    "witness_policy": _Setting(OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY, Path),
    "witness_pushes_per_day": _Setting(
        OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY, float, "a number per day"
    ),
    "strict": _Setting(OTEL_PYTHON_ROUTE_SHADOW_STRICT, env_flag),
}
"""Each setting read from the environment: its keyword, its variable and how its value is read (a value
``parse`` refuses is an error naming the variable; a path, an enum or a number the model then refuses is
one naming the keyword)."""

_KEYWORD_TEXT: Final[Mapping[str, _Setting]] = {
    **_SETTINGS,
    "disabled": _Setting(OTEL_PYTHON_ROUTE_SHADOW_DISABLED, env_flag),
}
"""The keywords that, given as a string, are read as their variable's value is (``disabled`` too, whose
variable the runtime reads on every call instead)."""


def make_checkpointer(config: RouteShadowConfig) -> ScheduledCheckpointer:
    """The chain's checkpointer (``checkpointing.scheduled_checkpointer``): a key or a witness policy that
    cannot be used is logged and left out, so the host is never stopped by it."""
    return scheduled_checkpointer(
        str(config.chain_path),
        origin=config.origin,
        signing_key=None if config.signing_key is None else str(config.signing_key),
        every_records=config.checkpoint_records,
        every_seconds=config.checkpoint_seconds,
        segment_bytes=config.segment_bytes,
        segment_seconds=config.segment_seconds,
        retention_records=config.retention_records,
        retention_delete=config.retention_delete,
        witness_policy=None if config.witness_policy is None else str(config.witness_policy),
        pushes_per_day=config.witness_pushes_per_day,
    )
