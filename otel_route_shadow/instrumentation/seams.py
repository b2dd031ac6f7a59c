"""Seam wrappers: the instrumentor's ``wrapt`` wrapper, the decorator and the context manager.

All three share one lifecycle: extract the context, start the span (the processor enriches it),
call the host inside the span, append the chain record, end the span. The host's call is made
exactly once, with its own arguments, and its result or exception object goes back untouched.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_route_shadow.core import RouteContext
from otel_route_shadow.instrumentation.checkpoint_spans import CheckpointSpans, attach_checkpoint_spans
from otel_route_shadow.instrumentation.config import Extractor, RouteShadowConfig, SeamCall, default_extractor
from otel_route_shadow.instrumentation.processor import RouteShadowSpanProcessor
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.shadow.record import ShadowRecord, Spawn

__all__ = [
    "SeamKind",
    "activate",
    "current_runtime",
    "deactivate",
    "invoke",
    "seam_kind",
    "shadow_seam",
    "shadow_spawn",
]

F = TypeVar("F", bound=Callable[..., Any])

_state_lock = threading.Lock()
_active: ShadowRuntime | None = None
_default: ShadowRuntime | None = None
_processors: weakref.WeakKeyDictionary[Any, RouteShadowSpanProcessor] = weakref.WeakKeyDictionary()
_emitters: weakref.WeakKeyDictionary[ShadowRuntime, CheckpointSpans] = weakref.WeakKeyDictionary()


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


def _attach_checkpoint_spans(runtime: ShadowRuntime, tracer_provider: Any) -> None:
    emitter = attach_checkpoint_spans(runtime.checkpointer, tracer_provider)
    if emitter is not None:
        _emitters[runtime] = emitter


def activate(config: RouteShadowConfig, tracer_provider: Any = None) -> ShadowRuntime:
    """Make ``config`` the active instrumentation (called by ``RouteShadowInstrumentor``)."""
    global _active
    runtime = ShadowRuntime(config, tracer_provider)
    runtime.start_prefetch()
    _attach_processor(runtime, tracer_provider)
    _attach_checkpoint_spans(runtime, tracer_provider)
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
    if runtime is not None:
        runtime.checkpoint_now()
        emitter = _emitters.pop(runtime, None)
        if emitter is not None:
            emitter.stop()  # sends that last checkpoint in the background, then its thread ends
        runtime.close()


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
        _attach_checkpoint_spans(runtime, None)
    return runtime


def _bare(runtime: ShadowRuntime) -> bool:
    """The seam is the host's bare call: instrumentation suppressed, or switched off."""
    return not is_instrumentation_enabled() or not runtime.enabled()


SeamKind = Literal["call", "coroutine", "generator", "asyncgen"]


def seam_kind(fn: Callable[..., Any]) -> SeamKind:
    """How the host's code runs when ``fn`` is called: at once (``call``), or step by step later,
    when the coroutine is awaited or the generator iterated."""
    if inspect.iscoroutinefunction(fn):
        return "coroutine"
    if inspect.isasyncgenfunction(fn):
        return "asyncgen"
    if inspect.isgeneratorfunction(fn):
        return "generator"
    return "call"


def invoke(
    runtime: ShadowRuntime | None,
    seam: str,
    request_face: str,
    extractor: Extractor,
    wrapped: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    kind: SeamKind | None = None,
) -> Any:
    """Call ``wrapped`` as a shadowed seam (or bare, when switched off or suppressed).

    ``kind``: ``seam_kind(wrapped)`` when the caller already knows it (the instrumentor and the
    decorator decide it once, not on every call). A coroutine or generator seam is shadowed over
    its whole life: see ``_deferred``.
    """
    if runtime is None or _bare(runtime):
        return wrapped(*args, **kwargs)
    call = SeamCall(seam, request_face, instance, args, kwargs)
    kind = kind or seam_kind(wrapped)
    if kind != "call":
        return _deferred(runtime, call, extractor, wrapped, kind)
    begun = runtime.begin(seam, request_face, runtime.extract(call, extractor))
    if begun is None:
        return wrapped(*args, **kwargs)
    span, observation = begun
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


# -- coroutine and generator seams ------------------------------------------------------------------
# The contrib convention for streaming calls: the span (and the chain record) covers the host's
# whole run. Calling a coroutine or generator function runs none of the host's code, so the span
# begins at the first step (the first await, next() or asend()) and ends when the coroutine
# returns or raises, or when the generator is exhausted, raises, is closed or is garbage-collected.
# An error raised while iterating is marked on the span and in the record, and propagates as the
# very same object. Values yielded, sent and thrown pass through untouched; the seam span is
# current while the host's code runs each step. A coroutine or generator dropped before its first
# step ran no host code: it has no span and no record (nothing was spawned) and is counted in
# ``ShadowRuntime.never_awaited``.


class _FirstStep:
    """Whether a deferred seam took its first step (read by the finalizer that counts the others)."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = False


def _count_if_never_started(runtime: ShadowRuntime, first: _FirstStep) -> None:
    if not first.taken:
        runtime.count_never_started()


def _deferred(
    runtime: ShadowRuntime, call: SeamCall, extractor: Extractor, wrapped: Callable[..., Any], kind: SeamKind
) -> Any:
    first = _FirstStep()
    body = _COROUTINE_BODIES[kind](runtime, call, extractor, wrapped, first)
    weakref.finalize(body, _count_if_never_started, runtime, first)
    return body


def _start(
    runtime: ShadowRuntime, call: SeamCall, extractor: Extractor, first: _FirstStep
) -> tuple[Any, Any] | None:
    first.taken = True
    return runtime.begin(call.seam, call.request_face, runtime.extract(call, extractor))


async def _coroutine(
    runtime: ShadowRuntime,
    call: SeamCall,
    extractor: Extractor,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> Any:
    begun = _start(runtime, call, extractor, first)
    if begun is None:
        return await wrapped(*call.args, **call.kwargs)
    span, observation = begun
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            result = await wrapped(*call.args, **call.kwargs)
    except BaseException as exc:
        runtime.finish(span, observation, exc)
        raise
    runtime.finish(span, observation, None)
    return result


def _generator(
    runtime: ShadowRuntime,
    call: SeamCall,
    extractor: Extractor,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> Generator[Any, Any, Any]:
    begun = _start(runtime, call, extractor, first)
    if begun is None:
        return (yield from wrapped(*call.args, **call.kwargs))
    span, observation = begun
    try:
        result = yield from _steps(wrapped(*call.args, **call.kwargs), span)
    except GeneratorExit:  # closed early or garbage-collected: the consumer stopped, not an error
        runtime.finish(span, observation, None)
        raise
    except BaseException as exc:
        runtime.finish(span, observation, exc)
        raise
    runtime.finish(span, observation, None)
    return result


def _steps(host: Generator[Any, Any, Any], span: Any) -> Generator[Any, Any, Any]:
    """``yield from host`` (PEP 380), with ``span`` current while the host's code runs each step."""
    value: Any = None
    thrown: BaseException | None = None
    while True:
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            item = host.send(value) if thrown is None else host.throw(thrown)
        except StopIteration as stop:
            return stop.value
        finally:
            otel_context.detach(token)
        try:
            value, thrown = (yield item), None
        except GeneratorExit:
            host.close()
            raise
        except BaseException as exc:
            value, thrown = None, exc


async def _async_generator(
    runtime: ShadowRuntime,
    call: SeamCall,
    extractor: Extractor,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> AsyncGenerator[Any, Any]:
    """``_generator`` for async generators, whose protocol (``asend``, ``athrow``, ``aclose``) has
    no ``yield from``: the steps are written out."""
    begun = _start(runtime, call, extractor, first)
    host = wrapped(*call.args, **call.kwargs)
    current = trace.set_span_in_context(begun[0]) if begun is not None else otel_context.get_current()
    value: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            token = otel_context.attach(current)
            try:
                item = await (host.asend(value) if thrown is None else host.athrow(thrown))
            except StopAsyncIteration:
                break
            finally:
                otel_context.detach(token)
            try:
                value, thrown = (yield item), None
            except GeneratorExit:
                await host.aclose()
                raise
            except BaseException as exc:
                value, thrown = None, exc
    except BaseException as exc:
        if begun is not None:
            runtime.finish(*begun, None if isinstance(exc, GeneratorExit) else exc)
        raise
    if begun is not None:
        runtime.finish(*begun, None)


_COROUTINE_BODIES: dict[str, Callable[..., Any]] = {
    "coroutine": _coroutine,
    "generator": _generator,
    "asyncgen": _async_generator,
}


def shadow_seam(
    request_face: str, extractor: Extractor = default_extractor, *, name: str | None = None
) -> Callable[[F], F]:
    """Decorate a host function as a spawn seam (manual instrumentation); coroutine and generator
    functions are shadowed over their whole run, as with the instrumentor."""

    def decorate(fn: F) -> F:
        seam = name or fn.__qualname__
        kind = seam_kind(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return invoke(current_runtime(), seam, request_face, extractor, fn, None, args, kwargs, kind)

        if kind == "coroutine":

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await invoke(
                    current_runtime(), seam, request_face, extractor, fn, None, args, kwargs, kind
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
