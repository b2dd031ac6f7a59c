"""Seam wrappers: the instrumentor's ``wrapt`` wrapper, the decorator and the context manager.

All three share one lifecycle: extract the context, start the span (the processor enriches it),
call the host inside the span, append the chain record, end the span. The host's call is made
exactly once, with its own arguments, and its result or exception object goes back untouched.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_route_shadow.core import RouteContext
from otel_route_shadow.instrumentation.config import Extractor, RouteShadowConfig, SeamCall, default_extractor
from otel_route_shadow.instrumentation.processor import RouteShadowSpanProcessor
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.shadow.record import ShadowRecord, Spawn

__all__ = ["activate", "current_runtime", "deactivate", "shadow_seam", "shadow_spawn"]

F = TypeVar("F", bound=Callable[..., Any])

_state_lock = threading.Lock()
_active: ShadowRuntime | None = None
_default: ShadowRuntime | None = None
_processors: weakref.WeakKeyDictionary[Any, RouteShadowSpanProcessor] = weakref.WeakKeyDictionary()


def _attach_processor(runtime: ShadowRuntime, tracer_provider: Any) -> None:
    """Add the processor to an SDK provider once; a later runtime takes the same processor over
    (the SDK cannot remove a processor again)."""
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        return  # not an SDK provider: the seam wrapper resolves and records by itself
    with _state_lock:
        processor = _processors.get(provider)
        if processor is None:
            processor = RouteShadowSpanProcessor(runtime)
            _processors[provider] = processor
            add(processor)
        else:
            processor.runtime = runtime


def activate(config: RouteShadowConfig, tracer_provider: Any = None) -> ShadowRuntime:
    """Make ``config`` the active instrumentation (called by ``RouteShadowInstrumentor``)."""
    global _active
    runtime = ShadowRuntime(config, tracer_provider)
    _attach_processor(runtime, tracer_provider)
    with _state_lock:
        _active = runtime
    return runtime


def deactivate() -> None:
    global _active
    with _state_lock:
        runtime, _active = _active, None
        for processor in _processors.values():
            if processor.runtime is runtime:
                processor.runtime = None


def current_runtime() -> ShadowRuntime:
    """The instrumentor's runtime, or (for decorator and context-manager users who never called
    ``instrument()``) one configured from the environment on first use."""
    global _default
    runtime = _active
    if runtime is not None:
        return runtime
    with _state_lock:
        if _default is None:
            _default = ShadowRuntime(RouteShadowConfig.resolve())
            created = True
        else:
            created = False
        runtime = _default
    if created:
        _attach_processor(runtime, None)
    return runtime


def _bare(runtime: ShadowRuntime | None) -> bool:
    return runtime is None or not is_instrumentation_enabled() or not runtime.enabled()


def invoke(
    runtime: ShadowRuntime | None,
    seam: str,
    request_face: str,
    extractor: Extractor,
    wrapped: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    is_async: bool | None = None,
) -> Any:
    """Call ``wrapped`` as a shadowed seam (or bare, when switched off or suppressed).

    ``is_async``: whether ``wrapped`` is a coroutine function, when the caller already knows (the
    instrumentor and the decorator decide it once, not on every call).
    """
    if runtime is None or not is_instrumentation_enabled() or not runtime.enabled():
        return wrapped(*args, **kwargs)
    context = runtime.extract(SeamCall(seam, request_face, instance, args, kwargs), extractor)
    begun = runtime.begin(seam, request_face, context)
    if begun is None:
        return wrapped(*args, **kwargs)
    span, observation = begun
    if is_async if is_async is not None else inspect.iscoroutinefunction(wrapped):
        return _ainvoke(runtime, span, observation, wrapped, args, kwargs)
    # What trace.use_span(span) does with record_exception and set_status_on_exception off, minus
    # its generator: the span is current while the host runs, and the host's exception is not
    # recorded (runtime.finish marks only its type).
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        otel_context.detach(token)
        runtime.finish(span, observation, exc)
        raise
    otel_context.detach(token)
    runtime.finish(span, observation, None)
    return result


async def _ainvoke(
    runtime: ShadowRuntime,
    span: Any,
    observation: Any,
    wrapped: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        runtime.finish(span, observation, exc)
        raise
    runtime.finish(span, observation, None)
    return result


def shadow_seam(
    request_face: str, extractor: Extractor = default_extractor, *, name: str | None = None
) -> Callable[[F], F]:
    """Decorate a host function as a spawn seam (manual instrumentation)."""
    import functools

    def decorate(fn: F) -> F:
        seam = name or fn.__qualname__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return invoke(current_runtime(), seam, request_face, extractor, fn, None, args, kwargs, False)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await invoke(
                    current_runtime(), seam, request_face, extractor, fn, None, args, kwargs, True
                )

            return awrapper  # type: ignore[return-value]
        return wrapper  # type: ignore[return-value]

    return decorate


@contextmanager
def shadow_spawn(
    context: RouteContext | Mapping[str, Any],
    *,
    seam: str,
    request_face: str | None = None,
    conversation_id: str | None = None,
) -> Iterator[ShadowRecord | None]:
    """Shadow a block of host code that performs one spawn; yields the record (or None when off).

    The record is for looking at, never for routing: nothing in it feeds back into the spawn.
    ``conversation_id`` goes on the span as ``gen_ai.conversation.id`` (not into the decision).
    """
    runtime = current_runtime()
    if _bare(runtime):
        yield None
        return
    if request_face is None:
        request_face = (
            context.request_face
            if isinstance(context, RouteContext)
            else str(context.get("request_face", ""))
        )
    begun = runtime.begin(seam, request_face, Spawn(context, conversation_id))
    if begun is None:
        yield None
        return
    span, observation = begun
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield observation.record
    except BaseException as exc:
        runtime.finish(span, observation, exc)
        raise
    runtime.finish(span, observation, None)
