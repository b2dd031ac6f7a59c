"""Revision numbers and timestamps the store reads are ASCII digits, whole, and in range.

``re``'s ``\\d`` matches any Unicode digit (and ``int`` reads them), ``$`` matches before a final
newline: a stray ``history/٩٩٩٩٩٩٩٩٩٩.json`` counted as revision 9,999,999,999 and made the next save
issue 10,000,000,000; ``saved_at`` of ``...Z\\n``, of Arabic-Indic digits or of month 99 verified.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import (
    HISTORY_DIR,
    QUARANTINE_DIR,
    RoutingPolicyStore,
    SnapshotFormatError,
    decode_snapshot,
    encode_snapshot,
)


def _policy(pid: str) -> RoutingPolicy:
    return RoutingPolicy.model_validate({"id": pid})


@pytest.mark.parametrize(
    "name",
    [
        "\u0669" * 10 + ".json",  # Arabic-Indic nines
        "\uff19" * 10 + ".json",  # full-width nines
        "0000000009.json\n",  # a trailing newline
        "9" * 17 + ".json",  # more digits than any revision has
    ],
)
def test_a_history_name_that_is_not_ascii_revision_digits_is_ignored_not_a_revision(
    tmp_path: Path, name: str
) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save([_policy("a")])
    (tmp_path / HISTORY_DIR / name).write_bytes(b"")
    assert store._layout.history_revisions() == [1]
    assert store.save([_policy("b")]).revision == 2


def test_a_store_holding_only_a_stray_non_ascii_history_name_reads_absent(tmp_path: Path) -> None:
    (tmp_path / HISTORY_DIR).mkdir()
    (tmp_path / HISTORY_DIR / ("\u0661" + "\u0660" * 9 + ".json")).write_bytes(b"")
    load = RoutingPolicyStore(tmp_path).load()
    assert (load.state, load.problem_kind) == ("absent", None)


@pytest.mark.parametrize(
    "name",
    [
        "20260101T000000Z-r" + "\u0669" * 12,
        "\u0662\u0660\u0662\u0666" + "0101T000000Z-r99999",
        "20260101T000000Z-r99999\n",
    ],
)
def test_a_quarantine_name_that_is_not_ascii_revision_digits_does_not_raise_the_next_revision(
    tmp_path: Path, name: str
) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save([_policy("a")])
    (tmp_path / QUARANTINE_DIR).mkdir()
    (tmp_path / QUARANTINE_DIR / name).mkdir()
    assert store.save([_policy("b")]).revision == 2


@pytest.mark.parametrize(
    "saved_at",
    [
        "2024-01-01T00:00:00Z\n",
        "\u0662\u0660\u0662\u0664-01-01T00:00:00Z",
        "2024-01-01T00:00:00.\u0661Z",
        "9999-99-99T99:99:99Z",
        "2023-02-29T00:00:00Z",
        "2024-01-01T24:00:00Z",
        "0000-01-01T00:00:00Z",
    ],
)
def test_a_saved_at_that_is_not_a_real_rfc3339_utc_time_is_refused(saved_at: str) -> None:
    data, _ = encode_snapshot(1, saved_at, [_policy("a")])
    with pytest.raises(SnapshotFormatError, match="saved_at") as caught:
        decode_snapshot(data)
    assert caught.value.kind == "wrong-schema"


@pytest.mark.parametrize(
    "saved_at", ["2024-02-29T23:59:59Z", "2026-11-30T01:40:44.011145Z", "2026-11-30T01:40:44.123456789Z"]
)
def test_a_real_rfc3339_utc_saved_at_still_verifies(saved_at: str) -> None:
    data, _ = encode_snapshot(1, saved_at, [_policy("a")])
    assert decode_snapshot(data).saved_at == saved_at


def test_a_content_hash_with_a_trailing_newline_is_a_schema_error_not_a_hash_to_compare() -> None:
    data, content_hash = encode_snapshot(1, "2024-01-01T00:00:00Z", [_policy("a")])
    edited = data.replace(f'"{content_hash}"'.encode(), f'"{content_hash}\\n"'.encode())
    assert edited != data
    with pytest.raises(SnapshotFormatError, match="content_hash") as caught:
        decode_snapshot(edited)
    assert caught.value.kind == "wrong-schema"
