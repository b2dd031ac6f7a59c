"""The snapshot fast path reads a rendered document line by line and checks policies in chunks (so
a background read leaves the host's threads running); its verdicts stay those of the strict path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from otel_route_shadow.core import RoutingPolicy, canonical_json, digest_bytes
from otel_route_shadow.store.snapshot_format import (
    SnapshotFormatError,
    SnapshotPayload,
    decode_snapshot,
    prepare_snapshot,
    render_snapshot,
)

_SAVED_AT = "2026-12-01T00:00:00.000000Z"


def _policies(n: int) -> list[RoutingPolicy]:
    return [
        RoutingPolicy.model_validate(
            {
                "id": f"p{i:05d}",
                "match": {"repo_ids": [f"org/repo-{i}"]},
                "action": {"provider_lock": "zai-harness"},
            }
        )
        for i in range(n)
    ]


def _rendered(n: int) -> tuple[bytes, SnapshotPayload]:
    payload = prepare_snapshot(_policies(n))
    return render_snapshot(7, _SAVED_AT, payload), payload


def _rehashed(raw: list[Any]) -> bytes:
    """A hand-made document over ``raw`` (layout of render_snapshot) with a recomputed hash."""
    encodings = [canonical_json(item) for item in raw]
    content_hash = digest_bytes(b"[" + b",".join(encodings) + b"]")
    return render_snapshot(7, _SAVED_AT, SnapshotPayload(tuple(_policies(0)), tuple(encodings), content_hash))


def test_a_rendered_snapshot_over_several_chunks_decodes_to_the_saved_set() -> None:
    data, payload = _rendered(600)
    document = decode_snapshot(data)
    assert document.policies == payload.policies
    assert (document.revision, document.content_hash, document.saved_at) == (
        7,
        payload.content_hash,
        _SAVED_AT,
    )


def test_policies_joined_on_one_line_still_verify_the_layout_is_not_hashed() -> None:
    data, payload = _rendered(3)
    joined = data.replace(b",\n    ", b", ", 1)
    assert joined != data
    assert decode_snapshot(joined).policies == payload.policies


def test_a_second_policies_field_after_the_array_is_invalid_json() -> None:
    data, _ = _rendered(3)
    twice = data.replace(b'  "revision"', b'  "policies": [],\n  "revision"', 1)
    with pytest.raises(SnapshotFormatError) as caught:
        decode_snapshot(twice)
    assert caught.value.kind == "invalid-json"


def test_a_non_canonical_policy_past_the_first_chunk_is_refused_even_with_a_recomputed_hash() -> None:
    _, payload = _rendered(600)
    raw = [orjson.loads(encoding) for encoding in payload.encodings]
    del raw[400]["enabled"]  # a default left out: valid, but not the canonical form
    with pytest.raises(SnapshotFormatError) as caught:
        decode_snapshot(_rehashed(raw))
    assert caught.value.kind == "not-canonical"
