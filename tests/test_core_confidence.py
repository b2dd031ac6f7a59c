"""The Wilson score interval the reports put on every agreement and divergence rate: checked against
published values, and total (any integers, any z: an interval inside [0, 1] around the rate, or None
when nothing was measured; never an exception)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.core import Z_95, wilson_interval


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # R: binom::binom.confint(x, n, methods = "wilson"); statsmodels proportion_confint(method="wilson")
        (5, 10, 0.2365931, 0.7634069),
        (0, 10, 0.0, 0.2775328),
        (10, 10, 0.7224672, 1.0),
        (81, 263, 0.2552885, 0.3662096),
        (1, 1, 0.2065493, 1.0),
        (30, 30, 0.8864866, 1.0),  # k = n: the lower bound is n / (n + z^2)
    ],
)
def test_wilson_matches_known_values(successes: int, trials: int, low: float, high: float) -> None:
    found = wilson_interval(successes, trials)
    assert found is not None
    assert found == pytest.approx((low, high), abs=1e-6)


def test_z_is_the_95_percent_quantile() -> None:
    # Phi(1.959964) = 0.975: erf(z / sqrt 2) = 0.95
    assert math.erf(Z_95 / math.sqrt(2)) == pytest.approx(0.95, abs=1e-12)


def test_nothing_measured_has_no_interval() -> None:
    assert wilson_interval(0, 0) is None
    assert wilson_interval(3, -1) is None


@given(st.integers(), st.integers(), st.floats(allow_nan=True, allow_infinity=True))
def test_wilson_is_total(successes: int, trials: int, z: float) -> None:
    found = wilson_interval(successes, trials, z)
    if trials <= 0:
        assert found is None
        return
    assert found is not None
    low, high = found
    p = min(max(successes, 0), trials) / trials
    assert 0.0 <= low <= p <= high <= 1.0


@given(st.integers(min_value=1, max_value=10**6), st.data())
def test_more_successes_never_lower_the_interval(trials: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=trials - 1))
    lower, upper = wilson_interval(k, trials), wilson_interval(k + 1, trials)
    assert lower is not None and upper is not None
    assert lower[0] <= upper[0] and lower[1] <= upper[1]


@given(st.integers(min_value=1, max_value=10**4))
def test_the_interval_narrows_with_the_sample(n: int) -> None:
    small, large = wilson_interval(n, 2 * n), wilson_interval(4 * n, 8 * n)
    assert small is not None and large is not None
    assert large[1] - large[0] < small[1] - small[0]
