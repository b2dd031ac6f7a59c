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
see :mod:`otel_route_shadow.instrumentation.environment_variables`.

The instrumentor owns its runtime (``ShadowRuntime``: configuration, tracer, chain, checkpoints): it
makes it in ``_instrument``, each ``wrapt`` wrapper holds it, and ``_uninstrument`` closes it.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from otel_route_shadow.instrumentation import environment_variables
from otel_route_shadow.instrumentation.config import (
    ResponseHook,
    RouteShadowConfig,
    Seam,
    SeamCall,
    SeamConfigError,
    SeamSpec,
    default_extractor,
    env_disabled,
)
from otel_route_shadow.instrumentation.error_text import exception_summary
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter
from otel_route_shadow.instrumentation.package import SCHEMA_URL, SCOPE_NAME, _instruments
from otel_route_shadow.instrumentation.processor import RouteShadowSpanProcessor
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.instrumentation.seams import (
    SeamKind,
    current_runtime,
    invoke,
    retire_default_runtime,
    seam_kind,
    shadow_seam,
    shadow_spawn,
)
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = [
    "SCHEMA_URL",
    "SCOPE_NAME",
    "ResponseHook",
    "RouteShadowChainExporter",
    "RouteShadowConfig",
    "RouteShadowInstrumentor",
    "RouteShadowSpanProcessor",
    "Seam",
    "SeamCall",
    "SeamConfigError",
    "SeamSpec",
    "ShadowRuntime",
    "current_runtime",
    "default_extractor",
    "env_disabled",
    "environment_variables",
    "shadow_seam",
    "shadow_spawn",
]


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
    """Wraps the configured spawn seams in spans enriched with the shadow routing decision.

    A setting that cannot be understood (a seam naming a missing module or attribute, a malformed
    number, an unknown keyword), or a tracer or logger provider that raises while the runtime is made
    and attached, is logged as one line, nothing is wrapped and what was started is closed:
    ``_instrument`` never raises, so ``opentelemetry-instrument`` goes on loading the instrumentors and
    hooks after this one, and ``instrument`` uninstruments again, so a corrected ``instrument()`` call
    may follow.
    """

    # BaseInstrumentor is a singleton whose __init__ runs on every construction: state lives in
    # attributes set by _instrument, never reset by a constructor.
    _wrapped: tuple[tuple[Any, str], ...] = ()
    runtime: ShadowRuntime | None = None
    """The runtime this instrumentation made and its wrappers hold, while instrumented."""
    refused: str | None = None
    """Why the last ``instrument()`` wrapped nothing (the line it logged), or None."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def instrument(self, **kwargs: Any) -> Any:
        result = super().instrument(**kwargs)
        if self.refused is not None and self.is_instrumented_by_opentelemetry:
            self.uninstrument()  # nothing was wrapped: leave the instrumentor free for a corrected call
        return result

    def _instrument(self, **kwargs: Any) -> None:
        self.refused = None
        retire_default_runtime()  # the decorators follow this instrumentor now, even if it refuses
        tracer_provider = kwargs.pop("tracer_provider", None)
        logger_provider = kwargs.pop("logger_provider", None)
        try:
            config = RouteShadowConfig.resolve(**kwargs)
            targets = [(spec, *_resolve_parent(spec)) for spec in config.seams]
        except Exception as exc:  # a bad setting must not stop the host or the other instrumentors
            self._refuse(exc)
            return
        runtime: ShadowRuntime | None = None
        wrapped: list[tuple[Any, str]] = []
        try:  # the host's tracer and logger providers may raise too: refused as a bad setting
            runtime = ShadowRuntime(config, tracer_provider, logger_provider)
            runtime.attach()
            for spec, parent, attribute in targets:
                kind = seam_kind(getattr(parent, attribute))
                wrapt.wrap_function_wrapper(parent, attribute, _seam_wrapper(runtime, spec.seam, kind))
                wrapped.append((parent, attribute))
        except Exception as exc:
            for parent, attribute in reversed(wrapped):
                unwrap(parent, attribute)
            if runtime is not None:
                runtime.close()
            self._refuse(exc)
            return
        self.runtime = runtime
        self._wrapped = tuple(wrapped)

    def _uninstrument(self, **kwargs: Any) -> None:
        for parent, attribute in reversed(self._wrapped):
            unwrap(parent, attribute)
        self._wrapped = ()
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            runtime.close()

    def _refuse(self, exc: Exception) -> None:
        self.refused = _refusal(exc)
        _LOG.error("%s", self.refused)


def _refusal(exc: Exception) -> str:
    """One line naming the bad setting (multi-line messages folded, no input value quoted: ``error_text``)."""
    return (
        f"route shadow not instrumented (nothing wrapped; the host runs unshadowed): {exception_summary(exc)}"
    )


def _seam_wrapper(runtime: ShadowRuntime, seam: Seam, kind: SeamKind) -> Any:
    """The ``wrapt`` wrapper of one seam, holding the runtime it records into."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return invoke(runtime, seam, kind, wrapped, instance, args, kwargs)

    return wrapper
