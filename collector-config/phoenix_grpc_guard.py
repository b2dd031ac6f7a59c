"""Phoenix's OTLP gRPC listener, made to refuse every call (loaded by Phoenix, not by the plugin).

Phoenix 20.26 binds its gRPC listener on every interface (``add_insecure_port("[::]:PORT")`` in
``phoenix/server/grpc_server.py``), whatever ``PHOENIX_HOST`` says; only read-only mode skips it, and that
mode refuses spans over HTTP too. Anyone who reaches that port could write spans into the witness. Phoenix's
one setting for it is ``PHOENIX_GRPC_INTERCEPTOR_PATHS=FILE:CLASS``, and `stack.py` points it here: every
call is answered PERMISSION_DENIED before it reaches Phoenix. The TCP listener itself stays open (see
collector-config/README.md for what that leaves).

Phoenix hands the CLASS it imports (not an instance) to ``grpc.aio.server``, which accepts only
``ServerInterceptor`` instances; so the class's metaclass is itself a ``ServerInterceptor`` and the class
answers ``intercept_service`` as a class method. Runs under the stack environment's Python (grpc installed
with Phoenix).
"""

from __future__ import annotations

from abc import ABCMeta
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc.aio import ServerInterceptor

__all__ = ["REFUSAL", "RefuseEveryCall"]

REFUSAL = "this Phoenix takes spans over OTLP/HTTP only; its gRPC listener refuses every call"


async def _refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, REFUSAL)


def _refusing_handler() -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(_refuse)


class _InterceptorClass(ABCMeta, ServerInterceptor):
    """A metaclass whose classes are ServerInterceptor instances (what grpc.aio.server checks)."""

    async def intercept_service(
        cls,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        return _refusing_handler()


class RefuseEveryCall(ServerInterceptor, metaclass=_InterceptorClass):
    """Answers every gRPC call PERMISSION_DENIED; never calls Phoenix's handler."""

    @classmethod
    async def intercept_service(  # type: ignore[override]
        cls,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        return _refusing_handler()
