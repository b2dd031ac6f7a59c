"""A temporary file's name carries its writer's pid; a "pid" no process can have is a name
``write_atomic`` never wrote, left alone, never an ``OverflowError`` out of ``remove_temporaries``
(documented never to raise) and so out of every ``save`` and ``repair`` of the policy store."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.files import TEMPORARY_MARK, remove_temporaries
from otel_route_shadow.store import CURRENT_FILE, RoutingPolicyStore

_IMPOSSIBLE_PIDS = ("99999999999999999999", "2147483648", "4294967296", "0" * 11 + "1")


@pytest.mark.parametrize("pid", _IMPOSSIBLE_PIDS)
def test_a_temporary_name_with_a_pid_too_large_for_a_process_is_left_not_an_overflow(
    tmp_path: Path, pid: str
) -> None:
    stray = tmp_path / f".{CURRENT_FILE}{TEMPORARY_MARK}{pid}-abcd"
    stray.write_bytes(b"")
    assert remove_temporaries(tmp_path) == 0
    assert stray.exists()


def test_a_leftover_with_a_huge_pid_neither_breaks_save_nor_repair(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save([RoutingPolicy.model_validate({"id": "a"})])
    stray = tmp_path / f".{CURRENT_FILE}{TEMPORARY_MARK}99999999999999999999-abcd"
    stray.write_bytes(b"")
    assert store.save([RoutingPolicy.model_validate({"id": "b"})]).revision == 2
    assert store.repair().repaired is False  # the store is ok: nothing to repair, and no crash
    assert stray.exists()
