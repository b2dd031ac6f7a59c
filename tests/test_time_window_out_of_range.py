"""``--since``/``--until`` outside 1970-01-01 .. 9999-12-30 (UTC) are unusable input, exit 2, one line,
for ``audit``, ``report`` and ``whatif`` alike: they ended in an ``OverflowError`` traceback (exit 1,
read as a finding) when the window was formatted."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_phoenix import write_chain
from test_analysis_support import build_chain

from otel_route_shadow.analysis.window import parse_bound
from otel_route_shadow.backend import parse_time
from otel_route_shadow.cli import main

OUT_OF_RANGE = [
    ("--since", "99999999999999999999999999"),
    ("--since", "9" * 5000),
    ("--until", "9999-12-31T23:59:59.999999"),
    ("--until", "9999-12-31"),
    ("--since", "0001-01-01T00:00:00+14:00"),
    ("--since", "1969-12-31T23:59:59Z"),
]


@pytest.mark.parametrize(("option", "value"), OUT_OF_RANGE)
def test_an_audit_window_bound_out_of_range_is_unusable_input(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    code = main(["audit", str(chain), "--backend", "http://127.0.0.1:9", option, value])  # never asked
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert option in err and "outside 1970-01-01 .. 9999-12-30" in err, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 300, err


@pytest.mark.parametrize("command", ["report", "whatif"])
@pytest.mark.parametrize(("option", "value"), [o for o in OUT_OF_RANGE if not o[1].isdigit()])
def test_a_report_or_whatif_window_bound_out_of_range_is_unusable_input(
    command: str, option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    policies = Path(__file__).parent.parent / "examples" / "policies.json"
    extra = ["--policies", str(policies)] if command == "whatif" else []
    code = main([command, str(chain), "--no-progress", *extra, option, value])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "outside 1970-01-01 .. 9999-12-30" in err and len(err.strip().splitlines()) == 1, err


def test_a_bound_past_the_last_day_is_refused_by_the_parsers_and_the_bounds_are_taken() -> None:
    with pytest.raises(ValueError, match="outside"):
        parse_time("9999-12-31T23:59:59.999999")
    with pytest.raises(ValueError, match="outside"):
        parse_bound("0001-01-01T00:00:00+14:00")
    assert parse_time("0") == 0 and parse_time("1970-01-01T00:00:00Z") == 0
    assert parse_time("9999-12-30T00:00:00Z") == parse_bound("9999-12-30T00:00:00Z") == 253_402_128 * 10**12
    assert parse_bound("9999-12-29", upper=True) == 253_402_128 * 10**12


def test_until_the_last_date_says_a_dates_upper_bound_is_its_next_midnight() -> None:
    with pytest.raises(ValueError, match="outside") as refused:
        parse_bound("9999-12-30", upper=True)
    assert "next midnight, so the last is 9999-12-29" in str(refused.value)
    with pytest.raises(ValueError) as refused:
        parse_bound("9999-12-31T00:00:00Z", upper=True)
    assert "next midnight" not in str(refused.value)


def test_until_a_date_before_1970_is_not_told_the_last_date_of_the_range() -> None:
    # The next-midnight hint was given to any out-of-range date --until took, 1969-12-30 too.
    with pytest.raises(ValueError, match="outside") as refused:
        parse_bound("1969-12-30", upper=True)
    assert "9999-12-29" not in str(refused.value)
