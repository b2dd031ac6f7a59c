"""``redact_value`` is total and linear: a value nested thousands deep is scrubbed (it raised
``RecursionError``), and many keys that scrub to the same text are renamed apart with a bounded
number of lookups each (each one used to try every suffix already given out: quadratic)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from otel_route_shadow.core import REDACTED, redact_value, redaction, shown_text

KEY = "sk-ant-api03-" + "A" * 24


def test_a_deeply_nested_list_is_redacted_without_recursion_error() -> None:
    depth = 5_000
    value: Any = f"password={KEY}"
    for _ in range(depth):
        value = [value]
    out, paths = redact_value(value)
    assert paths == ["/0" * depth]
    for _ in range(depth):
        assert isinstance(out, list) and len(out) == 1
        out = out[0]
    assert out == f"password={REDACTED}"


def test_a_deeply_nested_mapping_is_redacted_without_recursion_error() -> None:
    depth = 5_000
    value: Any = {"token": "hunter2", "keep": (1, "x")}
    for _ in range(depth):
        value = {KEY: value, "n": 1}
    out, paths = redact_value(value, "/root")
    assert len(paths) == depth + 1
    assert paths[0] == "/root/" + REDACTED
    assert paths[-1] == "/root" + f"/{REDACTED}" * depth + "/token"
    for _ in range(depth):
        assert list(out) == [REDACTED, "n"]
        out = out[REDACTED]
    assert out == {"token": REDACTED, "keep": (1, "x")}


class _Counting(Mapping[Any, Any]):
    """A read-only view of a mapping that counts membership tests."""

    def __init__(self, inner: Mapping[Any, Any], counter: list[int]) -> None:
        self._inner, self._counter = inner, counter

    def __contains__(self, key: object) -> bool:
        self._counter[0] += 1
        return key in self._inner

    def __getitem__(self, key: Any) -> Any:
        return self._inner[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)


def test_many_keys_that_redact_alike_are_renamed_with_few_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = [0]
    original = redaction.unique_key

    def counting(key: str, taken: Mapping[Any, Any], *rest: Any) -> str:
        return original(key, _Counting(taken, lookups), *rest)

    monkeypatch.setattr(redaction, "unique_key", counting)
    n = 600
    value = {f"sk-ant-api03-{i:020d}AAAAAAAA": i for i in range(n)}
    out, paths = redact_value(value)
    assert list(out) == [REDACTED, *(f"{REDACTED}#{i}" for i in range(2, n + 1))]
    assert list(out.values()) == list(range(n))
    assert len(paths) == n
    assert lookups[0] <= 3 * n  # was n * n / 2: every earlier suffix tried again


def test_unique_key_skips_spellings_already_taken() -> None:
    taken: dict[str, int] = {"k": 1, "k#2": 2, "k#4": 4}
    suffixes: dict[str, int] = {}
    names = []
    for _ in range(3):
        name = redaction.unique_key("k", taken, suffixes)
        taken[name] = 0
        names.append(name)
    assert names == ["k#3", "k#5", "k#6"]
    assert redaction.unique_key("k", taken) == "k#7"
    assert redaction.unique_key("other", taken, suffixes) == "other"


def test_a_literal_key_spelled_as_a_renamed_one_keeps_both_fields() -> None:
    # A scrubbed key renamed "[REDACTED]#2" and a literal "[REDACTED]#2" after it took one slot: the
    # first field was lost, though no field may be.
    value = {"token=sk-ant-api03-aaaaaaaaaaaaaaaaaaaa": 1, "token=sk-ant-api03-bbbbbbbbbbbbbbbbbbbb": 2}
    value[f"token={REDACTED}#2"] = 3
    redacted, paths = redact_value(value)
    assert sorted(redacted.values()) == [1, 2, 3]
    assert len(redacted) == 3 and len(paths) == 3


@given(st.binary(max_size=400), st.integers(min_value=0, max_value=300))
@example(b"\x00\t\x00", 2)  # cut after a folded run: a trailing space, which showing again dropped
@settings(max_examples=300)
def test_shown_text_of_any_bytes_prints_on_one_line_within_its_limit(raw: bytes, limit: int) -> None:
    shown = shown_text(raw, limit)
    assert shown.isprintable() and "\n" not in shown
    # Each character kept is at most one escape (``\U0010ffff``: 10 characters) of what was cut to ``limit``.
    assert len(shown) <= 10 * limit
    assert shown_text(shown.encode(), 10 * limit) == shown  # nothing left to redact, escape or fold
