"""``wilson_interval`` is total for counts too large for a float.

``wilson_interval(0, 10**400)`` raised ``OverflowError`` (an int divided into a float), and so did any
``trials`` over about 10**154 (its square). Counts beyond a float are infinitely many trials (the
interval is the rate); large ones that fit keep an interval that holds the rate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.core import wilson_interval


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        (0, 10**400, (0.0, 0.0)),
        (10**400, 10**400, (1.0, 1.0)),
        (10**400, 4 * 10**400, (0.25, 0.25)),
        (5, 10**309, (5e-309, 5e-309)),
    ],
)
def test_wilson_interval_of_counts_too_large_for_a_float(
    successes: int, trials: int, expected: tuple[float, float]
) -> None:
    assert wilson_interval(successes, trials) == expected


def test_wilson_interval_of_a_huge_z_int_is_the_95_percent_one() -> None:
    assert wilson_interval(3, 7, 10**400) == wilson_interval(3, 7)


@given(st.integers(min_value=0, max_value=10**420), st.integers(min_value=10**150, max_value=10**420))
def test_wilson_interval_of_huge_counts_holds_the_rate(successes: int, trials: int) -> None:
    found = wilson_interval(successes, trials)
    assert found is not None
    low, high = found
    p = min(successes, trials) / trials
    assert 0.0 <= low <= p <= high <= 1.0


def test_wilson_interval_of_one_in_a_googol_squared_is_not_empty() -> None:
    found = wilson_interval(1, 10**200)
    assert found is not None
    low, high = found
    assert low < 1e-200 < high  # the terms under the root underflowed: the interval was one point
