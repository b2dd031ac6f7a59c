"""A JSON integer longer than Python's ``int()`` takes (4,300 digits by default) is named as such: the
message was "invalid JSON: ValueError", the name of the exception alone, for a policy file, a store's
snapshot or a state file holding one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.strict_json import StrictJSONError, loads_strict


def test_an_integer_over_the_digit_limit_is_named_in_the_error() -> None:
    with pytest.raises(StrictJSONError) as raised:
        loads_strict(b'{"a": 1' + b"0" * 200_000 + b"}")
    limit = sys.get_int_max_str_digits()
    assert str(raised.value) == f"invalid JSON: an integer of more than {limit} digits"
    assert raised.value.kind == "syntax"


def test_policy_check_of_a_file_with_a_huge_integer_says_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies = tmp_path / "policies.json"
    policies.write_bytes(b'[{"priority": 1' + b"0" * 200_000 + b"}]")
    assert main(["policy", "check", str(policies)]) == 2
    err = capsys.readouterr().err
    assert "an integer of more than" in err and "policies.json" in err and len(err.splitlines()) == 1, err


def test_bytes_not_utf8_are_named_with_their_offset() -> None:
    # It said "invalid JSON: UnicodeDecodeError" (an archive's proof file, for one).
    with pytest.raises(StrictJSONError) as raised:
        loads_strict(b'{"a": "x\xff"}')
    assert str(raised.value) == "not UTF-8 (byte 8)"
