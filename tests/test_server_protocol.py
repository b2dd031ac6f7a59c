"""The request-head reader of ``serve`` (``server.protocol.HeadReader``): pure, fed what a connection
receives. However the bytes are split, the heads it gives are the same, and each byte is searched for
the head's end once, so a client trickling its head a byte at a time costs linear work, not quadratic."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.server import protocol
from otel_route_shadow.server.protocol import HeadReader, Limits

HEADS = [
    b"GET /tile/0/000 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /checkpoint HTTP/1.1\nHost: x\nAccept-Encoding: gzip\n\n",
    b"\r\nGET /tile/entries/001 HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\n",
]


def _heads(pieces: list[bytes]) -> list[bytes]:
    reader, found = HeadReader(Limits()), []
    for piece in pieces:
        reader.feed(piece)
        while (head := reader.head()) is not None:
            found.append(head)
    return found


@given(st.lists(st.integers(min_value=0, max_value=sum(map(len, HEADS))), max_size=40))
def test_the_heads_do_not_depend_on_how_the_bytes_are_split(cuts: list[int]) -> None:
    data = b"".join(HEADS)
    bounds = [0, *sorted(cuts), len(data)]
    pieces = [data[a:b] for a, b in pairwise(bounds)]
    assert (
        _heads(pieces)
        == _heads([data])
        == [
            b"GET /tile/0/000 HTTP/1.1\r\nHost: x",
            b"GET /checkpoint HTTP/1.1\nHost: x\nAccept-Encoding: gzip",
            b"GET /tile/entries/001 HTTP/1.1\r\nHost: x\r\nX-A: b",
        ]
    )


class _CountingPattern:
    """The head-end pattern, counting the bytes each search is given."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern, self.searched = pattern, 0

    def search(self, buffer: Any, pos: int = 0) -> re.Match[bytes] | None:
        self.searched += len(buffer) - pos
        return self.pattern.search(buffer, pos)


def test_a_head_trickled_a_byte_at_a_time_is_searched_once_per_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingPattern(protocol._HEAD_END)
    monkeypatch.setattr(protocol, "_HEAD_END", counting)
    head = b"GET /x HTTP/1.1\r\nHost: x\r\n" + b"X-Filler: " + b"a" * 15_000 + b"\r\n\r\n"
    assert _heads([head[i : i + 1] for i in range(len(head))]) == [head[:-4]]
    assert counting.searched <= 4 * len(head)  # it was len(head) ** 2 / 2: every byte searched again


def test_empty_lines_before_a_request_are_bounded_like_its_head() -> None:
    """Regression: empty lines before a request line were dropped without limit, so one connection
    could send them for as long as it liked and keep a core busy. They now count toward the head's
    bound, and the count starts again at each request."""
    limits = Limits()
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    reader = HeadReader(limits)
    reader.feed((b"\r\n" * (limits.max_head // 2) + request) * 2)
    assert reader.head() == request[:-4]
    assert reader.head() == request[:-4]
    flood = HeadReader(limits)
    flood.feed(b"\n" * limits.max_head)
    assert flood.head() is None
    flood.feed(b"\r\n")
    with pytest.raises(protocol.HTTPError) as raised:
        flood.head()
    assert (raised.value.status, raised.value.message) == (400, "too many empty lines before a request")


def test_a_request_with_two_host_fields_is_refused() -> None:
    """Regression: a second Host field was joined to the first; RFC 9112 section 3.2 requires 400."""
    with pytest.raises(protocol.HTTPError) as raised:
        protocol.parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nHOST: b", Limits())
    assert (raised.value.status, raised.value.message) == (400, "more than one Host header field")
