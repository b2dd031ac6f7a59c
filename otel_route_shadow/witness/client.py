"""The log's side of C2SP ``tlog-witness`` v1.0.0: one ``add-checkpoint`` request and what its answer means.

The request, ``POST <submission prefix>/add-checkpoint``, has the body (each line ending in LF)::

    old <size>                       (decimal, no leading zero; 0 when the log never reached the witness)
    <base64 hash>                    (the consistency proof from <size>, at most 63 lines; none from 0)
                                     (a blank line)
    <the signed checkpoint note>

The answers, one function each (:func:`interpret_answer`):

* 200: one or more note signature lines. They are checked as the spec suggests (appended to the
  checkpoint text and verified as a note with the witness's key from the policy): lines by other keys are
  ignored, a line by the witness's key that does not verify, or whose timestamp lies in the future beyond
  the skew, or an answer without a valid cosignature by that key, is a bad answer
  (:func:`_cosignature_lines`);
* 409 with ``Content-Type: text/x.tlog.size``: the body is the witness's size for this log, in decimal,
  and a newline (:func:`_witness_size`); the caller proves from there;
* 404 unknown log; 403 no valid signature by a log key the witness knows (litewitness also answers 403 for
  an unknown log); 422 the consistency proof does not verify; 400 a malformed request; 5xx the witness
  failed;
* anything else, and an answer that does not complete within the timeout or exceeds the size cap, is
  contained as its :class:`PushOutcome`; nothing here raises.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import re
import ssl
from collections.abc import Sequence

from otel_route_shadow.core import shown_text
from otel_route_shadow.tlog import CosignatureError, NoteError, parse_note, verify_cosignatures
from otel_route_shadow.witness.endpoint import WitnessEndpoint
from otel_route_shadow.witness.transport import Connection, TransportError, TransportFault, post

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "MAX_PROOF_LINES",
    "MAX_RESPONSE_BYTES",
    "PushOutcome",
    "WitnessAnswer",
    "add_checkpoint",
    "add_checkpoint_body",
    "interpret_answer",
    "witness_connection",
]

MAX_PROOF_LINES = 63
MAX_RESPONSE_BYTES = 64 * 1024
"""The most bytes read from a witness's answer (status line and headers included)."""
DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_REQUEST_TIMEOUT_S = 10.0
"""The whole exchange (connect, send, the complete answer) ends within this many seconds."""
SIZE_MEDIA_TYPE = "text/x.tlog.size"

_SIZE_BODY = re.compile(rb"(0|[1-9][0-9]{0,18})\n")
_DETAIL_CHARS = 120


class PushOutcome(enum.Enum):
    """What one ``add-checkpoint`` request came to."""

    COSIGNED = "cosigned"
    CONFLICT = "conflict"
    UNKNOWN_LOG = "unknown-log"
    FORBIDDEN = "forbidden"
    BAD_PROOF = "bad-proof"
    BAD_REQUEST = "bad-request"
    SERVER_ERROR = "server-error"
    BAD_ANSWER = "bad-answer"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessAnswer:
    """The outcome; ``cosignatures``: the witness's verified cosignature lines (``COSIGNED``);
    ``witness_size``: its size for the log (``CONFLICT``); ``detail``: a short printable reason."""

    outcome: PushOutcome
    status: int | None = None
    witness_size: int | None = None
    cosignatures: tuple[str, ...] = ()
    detail: str = ""


def add_checkpoint_body(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    """The request body; ``ValueError`` if the spec forbids it (a proof from 0, over 63 lines)."""
    if old_size < 0 or (old_size == 0 and proof) or len(proof) > MAX_PROOF_LINES:
        raise ValueError(f"a proof from size {old_size} of {len(proof)} lines cannot be sent")
    lines = [f"old {old_size}", *(base64.b64encode(h).decode("ascii") for h in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode("utf-8")


def witness_connection(
    endpoint: WitnessEndpoint,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
) -> Connection:
    """A persistent connection to the witness (HTTP/1.1 keep-alive), for one thread's requests."""
    context = (tls or ssl.create_default_context()) if endpoint.tls else None
    return Connection(endpoint.host, endpoint.port, context, connect_timeout)


def add_checkpoint(
    endpoint: WitnessEndpoint,
    old_size: int,
    proof: Sequence[bytes],
    note: str,
    *,
    now: int,
    skew: int,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
    connection: Connection | None = None,
) -> WitnessAnswer:
    """Submit ``note`` (the signed checkpoint) to the witness with a proof from ``old_size``, on
    ``connection`` (kept open for the next request; see :func:`witness_connection`) or on a connection
    of its own.

    ``now`` (POSIX seconds) bounds the cosignatures' timestamps. Never raises for the network or the
    answer: every failure is an :class:`PushOutcome`.
    """
    body = add_checkpoint_body(old_size, proof, note)
    path = endpoint.path + "/add-checkpoint"
    try:
        if connection is not None:
            answer = connection.post(path, body, timeout=timeout, max_bytes=MAX_RESPONSE_BYTES)
        else:
            answer = post(
                host=endpoint.host,
                port=endpoint.port,
                path=path,
                body=body,
                tls=(tls or ssl.create_default_context()) if endpoint.tls else None,
                connect_timeout=connect_timeout,
                timeout=timeout,
                max_bytes=MAX_RESPONSE_BYTES,
            )
    except TransportError as exc:
        return WitnessAnswer(_TRANSPORT_OUTCOMES[exc.fault], detail=str(exc))
    return interpret_answer(endpoint, note, answer.status, answer.content_type, answer.body, now, skew)


_TRANSPORT_OUTCOMES = {
    TransportFault.TIMEOUT: PushOutcome.TIMEOUT,
    TransportFault.UNREACHABLE: PushOutcome.UNREACHABLE,
    TransportFault.TOO_LARGE: PushOutcome.BAD_ANSWER,
    TransportFault.MALFORMED: PushOutcome.BAD_ANSWER,
}
_REFUSALS = {
    400: PushOutcome.BAD_REQUEST,
    403: PushOutcome.FORBIDDEN,
    404: PushOutcome.UNKNOWN_LOG,
    422: PushOutcome.BAD_PROOF,
}


def interpret_answer(
    endpoint: WitnessEndpoint, note: str, status: int, media: str, body: bytes, now: int, skew: int
) -> WitnessAnswer:
    """What the witness's answer (status, media type, body) to ``note`` means; never raises."""
    if status == 200:
        return _cosignature_lines(endpoint, note, body, now, skew)
    if status == 409:
        return _witness_size(media, body)
    if status in _REFUSALS:
        return WitnessAnswer(_REFUSALS[status], status, detail=_detail(body))
    if 500 <= status <= 599:
        return WitnessAnswer(PushOutcome.SERVER_ERROR, status, detail=_detail(body))
    return WitnessAnswer(PushOutcome.BAD_ANSWER, status, detail=f"unexpected status {status}")


def _cosignature_lines(
    endpoint: WitnessEndpoint, note: str, body: bytes, now: int, skew: int
) -> WitnessAnswer:
    try:
        text = parse_note(note).text
        lines = body.decode("utf-8")
        cosigned = text + "\n" + lines
        found = verify_cosignatures(cosigned, [endpoint.verifier], now=now, skew=skew)
        signatures = parse_note(cosigned).signatures
    except (UnicodeDecodeError, NoteError, CosignatureError) as exc:
        reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
        return WitnessAnswer(PushOutcome.BAD_ANSWER, 200, detail=f"the cosignature lines: {reason}")
    if found.refused:
        return WitnessAnswer(PushOutcome.BAD_ANSWER, 200, detail="a cosignature timestamp lies in the future")
    if not found.verified:
        return WitnessAnswer(PushOutcome.BAD_ANSWER, 200, detail="no cosignature by the witness's key")
    mine = tuple(s.line() for s in signatures if endpoint.verifier.signs(s))
    return WitnessAnswer(PushOutcome.COSIGNED, 200, cosignatures=mine)


def _witness_size(media: str, body: bytes) -> WitnessAnswer:
    if media != SIZE_MEDIA_TYPE:
        return WitnessAnswer(PushOutcome.BAD_ANSWER, 409, detail=f"a 409 answer is not {SIZE_MEDIA_TYPE}")
    if not _SIZE_BODY.fullmatch(body) or int(body) > 2**63 - 1:
        return WitnessAnswer(PushOutcome.BAD_ANSWER, 409, detail="a 409 answer's body is not a tree size")
    return WitnessAnswer(PushOutcome.CONFLICT, 409, witness_size=int(body))


def _detail(body: bytes) -> str:
    """The answer's first line as a log line may show it (``core.shown_text``: redacted, short, escaped)."""
    return shown_text(body[: 4 * _DETAIL_CHARS].split(b"\n", 1)[0], _DETAIL_CHARS)
