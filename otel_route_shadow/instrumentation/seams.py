"""The seam lifecycle, and the decorator and context manager that use it.

The instrumentor's ``wrapt`` wrappers (each holding its instrumentor's runtime), ``shadow_seam`` and
``shadow_spawn`` share one lifecycle: extract the context, resolve the decision and start the span
with it, call the host inside the span, settle what served the spawn (the seam's response hook, else the
spans of its run: ``served``), append the chain record, end the span. The host's call is made
exactly once, with its own arguments, and its result or exception object goes back untouched.

Decorator and context-manager seams use the instrumentor's runtime while it is instrumented. In a process
that never called ``instrument()`` they share the one default runtime kept here, configured from the
environment alone (``current_runtime``). Once ``instrument()`` was called (accepted or refused) they follow
the instrumentor only: the default runtime, if made, is closed, and after ``uninstrument()`` or a refused
``instrument()`` they run bare, as its log line says (``retire_default_runtime``).
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_route_shadow.core import RouteContext
from otel_route_shadow.instrumentation.config import (
    Extractor,
    ResponseHook,
    RouteShadowConfig,
    Seam,
    SeamCall,
    default_extractor,
)
from otel_route_shadow.instrumentation.error_text import exception_summary
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.shadow import ShadowRecord, Spawn
from otel_route_shadow.worker import AFTER_FORK

__all__ = [
    "SeamKind",
    "current_runtime",
    "invoke",
    "retire_default_runtime",
    "seam_kind",
    "shadow_seam",
    "shadow_spawn",
]

F = TypeVar("F", bound=Callable[..., Any])


class _DefaultRuntime:
    """The runtime of decorator and context-manager seams in a process that never called ``instrument()``:
    configured from the environment and attached to the global tracer provider on first use, then kept
    until ``instrument()`` is called (``retire``). A setting it cannot understand is logged once, and those
    seams run bare."""

    __slots__ = ("__weakref__", "_lock", "_made", "_runtime")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made = False
        self._runtime: ShadowRuntime | None = None
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): a new lock (another thread of the parent's
        may have been making the runtime); one the parent made is kept, even if it was not marked made yet."""
        self._lock = threading.Lock()
        self._made = self._made or self._runtime is not None

    def get(self) -> ShadowRuntime | None:
        if self._made:
            return self._runtime
        with self._lock:
            if not self._made:
                self._runtime = _make_default_runtime()
                self._made = True
        return self._runtime

    def retire(self) -> None:
        """``instrument()`` was called: from now on there is no default runtime (the seams follow the
        instrumentor alone); one already made is closed (bounded, never raises)."""
        with self._lock:
            runtime, self._runtime, self._made = self._runtime, None, True
        if runtime is not None:
            runtime.close()


def _make_default_runtime() -> ShadowRuntime | None:
    try:
        runtime = ShadowRuntime(RouteShadowConfig.resolve())
    except Exception as exc:  # a bad setting must not reach the host's call
        _LOG.error("route shadow decorators run bare (unshadowed): %s", exception_summary(exc))
        return None
    runtime.attach()
    return runtime


_DEFAULT: Final = _DefaultRuntime()


def retire_default_runtime() -> None:
    """Called by every ``instrument()``: decorator and context-manager seams follow the instrumentor from
    now on (its runtime while instrumented, else bare), never the environment-only default runtime."""
    _DEFAULT.retire()


def current_runtime() -> ShadowRuntime | None:
    """The runtime decorator and context-manager seams use: the instrumentor's while it is
    instrumented, else the default one (``_DefaultRuntime``) in a process that never called
    ``instrument()``; None: they run bare."""
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor  # imports this module

    runtime = RouteShadowInstrumentor().runtime
    return runtime if runtime is not None else _DEFAULT.get()


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
    seam: Seam,
    kind: SeamKind,
    wrapped: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Call ``wrapped`` as a shadowed seam of ``runtime`` (bare when there is none, or when it is
    switched off or instrumentation is suppressed).

    ``kind`` is ``seam_kind(wrapped)``, decided once by the caller when it wraps. A coroutine or
    generator seam is shadowed over its whole life: see ``_deferred``.
    """
    if runtime is None or _bare(runtime):
        return wrapped(*args, **kwargs)
    call = SeamCall(seam.name, seam.request_face, instance, args, kwargs)
    if kind != "call":
        return _deferred(runtime, seam, call, wrapped, kind)
    begun = _begin(runtime, seam, call)
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
    runtime.finish(span, observation, None, result)
    return result


def _begin(runtime: ShadowRuntime, seam: Seam, call: SeamCall) -> tuple[Any, Any] | None:
    return runtime.begin(
        seam.name, seam.request_face, runtime.extract(call, seam.extractor), call, seam.response_hook
    )


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
    runtime: ShadowRuntime, seam: Seam, call: SeamCall, wrapped: Callable[..., Any], kind: SeamKind
) -> Any:
    first = _FirstStep()
    body = _COROUTINE_BODIES[kind](runtime, seam, call, wrapped, first)
    weakref.finalize(body, _count_if_never_started, runtime, first)
    return body


def _start(runtime: ShadowRuntime, seam: Seam, call: SeamCall, first: _FirstStep) -> tuple[Any, Any] | None:
    first.taken = True
    return _begin(runtime, seam, call)


async def _coroutine(
    runtime: ShadowRuntime,
    seam: Seam,
    call: SeamCall,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> Any:
    begun = _start(runtime, seam, call, first)
    if begun is None:
        return await wrapped(*call.args, **call.kwargs)
    span, observation = begun
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            result = await wrapped(*call.args, **call.kwargs)
    except BaseException as exc:
        runtime.finish(span, observation, exc)
        raise
    runtime.finish(span, observation, None, result)
    return result


def _generator(
    runtime: ShadowRuntime,
    seam: Seam,
    call: SeamCall,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> Generator[Any, Any, Any]:
    begun = _start(runtime, seam, call, first)
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
    runtime.finish(span, observation, None, result)
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
    seam: Seam,
    call: SeamCall,
    wrapped: Callable[..., Any],
    first: _FirstStep,
) -> AsyncGenerator[Any, Any]:
    """``_generator`` for async generators, whose protocol (``asend``, ``athrow``, ``aclose``) has
    no ``yield from``: the steps are written out."""
    begun = _start(runtime, seam, call, first)
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
    request_face: str,
    extractor: Extractor = default_extractor,
    *,
    name: str | None = None,
    response_hook: ResponseHook | None = None,
) -> Callable[[F], F]:
    """Decorate a host function as a spawn seam (manual instrumentation); coroutine and generator
    functions are shadowed over their whole run, as with the instrumentor, and stay coroutine and
    generator functions. ``response_hook`` says what served each spawn (``config.ResponseHook``)."""

    def decorate(fn: F) -> F:
        seam = Seam(name or fn.__qualname__, request_face, extractor, response_hook)
        kind = seam_kind(fn)

        def run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return invoke(current_runtime(), seam, kind, fn, None, args, kwargs)

        return _of_kind(fn, kind, run)  # type: ignore[return-value]

    return decorate


def _of_kind(fn: Callable[..., Any], kind: SeamKind, run: Callable[..., Any]) -> Callable[..., Any]:
    """The decorator's wrapper of ``fn``: ``run(args, kwargs)`` in a function of the kind of ``fn`` (inspect,
    frameworks and the instrumentor tell them apart); a deferred kind's body runs at the first step, which is
    where its seam begins anyway."""
    if kind == "coroutine":

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            return await run(args, kwargs)

        return awrapper
    if kind == "generator":

        @functools.wraps(fn)
        def gwrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            return (yield from run(args, kwargs))

        return gwrapper
    if kind == "asyncgen":

        @functools.wraps(fn)
        async def agwrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
            host = run(args, kwargs)
            value: Any = None
            thrown: BaseException | None = None
            while True:  # ``yield from`` for async generators, as in ``_async_generator``
                try:
                    item = await (host.asend(value) if thrown is None else host.athrow(thrown))
                except StopAsyncIteration:
                    return
                try:
                    value, thrown = (yield item), None
                except GeneratorExit:
                    await host.aclose()
                    raise
                except BaseException as exc:
                    value, thrown = None, exc

        return agwrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return run(args, kwargs)

    return wrapper


def _request_face_of(context: object) -> str:
    """The request face ``shadow_spawn``'s context names, else "": whatever the host passed (None for no
    spawn, a mapping that raises), the block runs, and ``ShadowRuntime.begin`` judges the context."""
    if isinstance(context, RouteContext):
        return context.request_face
    try:
        return str(context.get("request_face", "")) if isinstance(context, Mapping) else ""
    except Exception:
        return ""


@contextmanager
def shadow_spawn(
    context: RouteContext | Mapping[str, Any] | Spawn | None,
    *,
    seam: str,
    request_face: str | None = None,
    conversation_id: str | None = None,
    response_hook: ResponseHook | None = None,
) -> Iterator[ShadowRecord | None]:
    """Shadow a block of host code that performs one spawn; yields the record (or None when off).

    The record is for looking at, never for routing: nothing in it feeds back into the spawn, and it is
    read-only (``ShadowRecord``: the runtime shares it between spawns of one decision).
    ``conversation_id`` goes on the span as ``gen_ai.conversation.id`` (not into the decision).
    ``response_hook`` is called when the block is left, with a call that holds no arguments, no
    result and the block's exception (the hook reads what served the spawn from the host's own
    variables); without one, the block's in-process spans say it (``served``). ``context`` may be a
    ``Spawn`` (its conversation id unless ``conversation_id`` is given), or None for no spawn (the block runs bare).
    """
    if isinstance(context, Spawn):
        conversation_id = conversation_id or context.conversation_id
        context = context.context
    runtime = current_runtime()
    if runtime is None or _bare(runtime):
        yield None
        return
    if request_face is None:
        request_face = _request_face_of(context)
    call = SeamCall(seam, request_face, None, (), {})
    spawn = None if context is None else Spawn(context, conversation_id)
    begun = runtime.begin(seam, request_face, spawn, call, response_hook)
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
