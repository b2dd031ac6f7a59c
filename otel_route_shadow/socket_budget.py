"""A connected socket as ``http.client`` sees it, under one exchange's budget: a deadline for the whole
exchange and a cap on the bytes read. Shared by the witness client (``witness.transport``) and the
backend client (``backend.transport``).

Making the connection is under the deadline too (:func:`connect_within`): the name lookup, the TCP
connection, a proxy's answer to ``CONNECT`` and the TLS handshake each wait on their own timeout (the
lookup on the system resolver's), so a resolver that never answers, or a proxy or server that drips its
answer, could hold the exchange for ever. They run in a thread of their own, waited for until the
deadline; a connection made after it is closed as it is made.

Before every ``recv`` and every ``sendall`` the socket's timeout is set to what is left of the deadline
(``TimeoutError`` once it has passed), and the bytes read are counted against the cap: a server that
drips its answer a byte at a time, or sends megabytes, costs at most the deadline and the cap. The read
side is the socket's own file object, so the socket stays open until the answer is read even when
``http.client`` closes its reference as soon as the headers are in (a response that closes the
connection).
"""

from __future__ import annotations

import dataclasses
import io
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, TypeVar

from otel_route_shadow.worker import WorkerName

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = ["BoundedSocket", "Budget", "connect_within"]

_T = TypeVar("_T")


@dataclasses.dataclass
class Budget:
    """What is left of one exchange: its deadline (``time.monotonic``) and the bytes it may still read;
    ``too_large`` makes the error raised when an answer reads past them."""

    deadline: float
    bytes_left: int
    too_large: Callable[[], Exception]

    def seconds_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left

    def spend(self, count: int) -> None:
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise self.too_large()


class _BoundedStream(io.RawIOBase):
    """A socket's read side, each ``recv`` within the budget's time and bytes."""

    def __init__(self, sock: socket.socket, budget: Budget) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        self._sock.settimeout(self._budget.seconds_left())
        count = self._raw.readinto(view[: min(len(view), self._budget.bytes_left + 1)]) or 0
        self._budget.spend(count)
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


class BoundedSocket:
    """What ``http.client`` is given as its connected socket (``HTTPConnection.sock``): reads and writes
    under ``budget``; every other attribute is the socket's."""

    def __init__(self, sock: socket.socket, budget: Budget) -> None:
        self._sock = sock
        self._budget = budget

    def makefile(self, mode: str, *_: Any, **__: Any) -> io.BufferedReader:
        return io.BufferedReader(_BoundedStream(self._sock, self._budget))

    def sendall(self, data: ReadableBuffer) -> None:
        self._sock.settimeout(self._budget.seconds_left())
        self._sock.sendall(data)

    def close(self) -> None:
        self._sock.close()  # the read side, if any, keeps it open until the answer is read

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def connect_within(budget: Budget, connect: Callable[[], _T], close: Callable[[_T], None]) -> _T:
    """What ``connect()`` returns, waited for until ``budget``'s deadline in a thread of its own
    (``TimeoutError`` past it, or what ``connect`` raised); what it returns after the deadline is given to
    ``close``. The thread ends when ``connect`` does (a name lookup ends at the resolver's timeouts)."""
    made: Future[_T] = Future()

    def run() -> None:
        try:
            made.set_result(connect())
        except BaseException as exc:  # handed to the caller, or dropped with the connect abandoned
            made.set_exception(exc)

    threading.Thread(target=run, name=WorkerName.CONNECT.value, daemon=True).start()
    wait([made], max(0.0, budget.deadline - time.monotonic()))
    if not made.done():

        def close_late(late: Future[_T]) -> None:  # run at once if it finished meanwhile
            if late.exception() is None:
                close(late.result())

        made.add_done_callback(close_late)
        raise TimeoutError("the connection was not made before the deadline")
    return made.result()
