"""OpenTelemetry instrumentation for route shadowing.

Usage::

    from otel_route_shadow.instrumentation import RouteShadowInstrumentor

    RouteShadowInstrumentor().instrument(
        seams="factory.runner:Runner.execute,agentic,factory.shadow:extract_execute",
        store="/var/lib/factory/policies",
        chain_path="/var/lib/factory/route-shadow/chain.jsonl",
    )

or, with no code change, ``OTEL_PYTHON_ROUTE_SHADOW_SEAMS=... opentelemetry-instrument python app.py``.
Every setting is an ``OTEL_PYTHON_ROUTE_SHADOW_*`` variable mirrored by an ``instrument()`` keyword;
see :mod:`otel_route_shadow.instrumentation.config`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from otel_route_shadow.instrumentation.config import (
    RouteShadowConfig,
    SeamCall,
    SeamConfigError,
    SeamSpec,
    default_extractor,
)
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter
from otel_route_shadow.instrumentation.processor import RouteShadowSpanProcessor
from otel_route_shadow.instrumentation.runtime import SCHEMA_URL, SCOPE_NAME, ShadowRuntime
from otel_route_shadow.instrumentation.seams import (
    activate,
    current_runtime,
    deactivate,
    invoke,
    shadow_seam,
    shadow_spawn,
)

__all__ = [
    "SCHEMA_URL",
    "SCOPE_NAME",
    "RouteShadowChainExporter",
    "RouteShadowConfig",
    "RouteShadowInstrumentor",
    "RouteShadowSpanProcessor",
    "SeamCall",
    "SeamConfigError",
    "SeamSpec",
    "ShadowRuntime",
    "current_runtime",
    "default_extractor",
    "shadow_seam",
    "shadow_spawn",
]

_instruments: tuple[str, ...] = ()
"""The seams are host code named by configuration: no third-party package is required."""


def _resolve_parent(spec: SeamSpec) -> tuple[Any, str]:
    try:
        parent: Any = importlib.import_module(spec.module)
    except ImportError as exc:
        raise SeamConfigError(f"seam {spec.target!r}: cannot import {spec.module!r} ({exc})") from None
    *path, attribute = spec.qualname.split(".")
    for part in path:
        try:
            parent = getattr(parent, part)
        except AttributeError:
            raise SeamConfigError(f"seam {spec.target!r}: {part!r} not found") from None
    if not hasattr(parent, attribute):
        raise SeamConfigError(f"seam {spec.target!r}: {attribute!r} not found")
    if not callable(getattr(parent, attribute)):
        raise SeamConfigError(f"seam {spec.target!r}: not callable")
    return parent, attribute


class RouteShadowInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Wraps the configured spawn seams in spans enriched with the shadow routing decision."""

    # BaseInstrumentor is a singleton whose __init__ runs on every construction: state lives in
    # attributes set by _instrument, never reset by a constructor.
    _wrapped: tuple[tuple[Any, str], ...] = ()
    runtime: ShadowRuntime | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        tracer_provider = kwargs.pop("tracer_provider", None)
        config = RouteShadowConfig.resolve(**kwargs)
        targets = [(spec, *_resolve_parent(spec)) for spec in config.seams]
        runtime = activate(config, tracer_provider)
        self.runtime = runtime
        wrapped: list[tuple[Any, str]] = []
        try:
            for spec, parent, attribute in targets:
                is_async = inspect.iscoroutinefunction(getattr(parent, attribute))
                wrapt.wrap_function_wrapper(parent, attribute, _seam_wrapper(spec, is_async))
                wrapped.append((parent, attribute))
        except Exception:
            for parent, attribute in reversed(wrapped):
                unwrap(parent, attribute)
            deactivate()
            raise
        self._wrapped = tuple(wrapped)

    def _uninstrument(self, **kwargs: Any) -> None:
        for parent, attribute in reversed(self._wrapped):
            unwrap(parent, attribute)
        self._wrapped = ()
        deactivate()
        self.runtime = None


def _seam_wrapper(spec: SeamSpec, is_async: bool) -> Any:
    seam, face, extractor = spec.seam_name, spec.request_face, spec.extractor

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return invoke(current_runtime(), seam, face, extractor, wrapped, instance, args, kwargs, is_async)

    return wrapper
