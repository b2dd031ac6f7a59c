"""The log's side of C2SP ``tlog-witness``: pushing signed checkpoints to independent witnesses.

Network code: one bounded ``add-checkpoint`` request (``client``), the witnesses to reach (``endpoint``,
from a ``tlog-policy``'s witness URLs), the background pusher (``pusher``) that keeps the host's
path free of any witness, and the log's side of it all (``witnessing``: the writer's checkpoints
pushed, proofs from the log's tiles, cosignatures merged into the stored checkpoints, refusals
recorded). The spec-only parts (cosignatures, policies, receipts) are in ``tlog``.
Never imports instrumentation, cli or OpenTelemetry.
"""

from __future__ import annotations

from otel_route_shadow.witness.client import (
    MAX_RESPONSE_BYTES,
    PushOutcome,
    add_checkpoint,
    add_checkpoint_body,
    interpret_answer,
)
from otel_route_shadow.witness.endpoint import WitnessConfigError, WitnessEndpoint, endpoints_from_policy
from otel_route_shadow.witness.pusher import DEFAULT_PUSHES_PER_DAY, WitnessPusher
from otel_route_shadow.witness.transport import Connection, TransportError
from otel_route_shadow.witness.witnessing import LEARN_TIMEOUT_S, CheckpointWitnessing

__all__ = [
    "DEFAULT_PUSHES_PER_DAY",
    "LEARN_TIMEOUT_S",
    "MAX_RESPONSE_BYTES",
    "CheckpointWitnessing",
    "Connection",
    "PushOutcome",
    "TransportError",
    "WitnessConfigError",
    "WitnessEndpoint",
    "WitnessPusher",
    "add_checkpoint",
    "add_checkpoint_body",
    "endpoints_from_policy",
    "interpret_answer",
]
