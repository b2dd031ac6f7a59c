"""Confidence intervals for the rates the reports show: how far a rate measured on ``n`` spawns can
be trusted.

The Wilson score interval (Wilson 1927) of ``successes`` out of ``trials`` at a normal quantile
``z`` (1.959964 for 95%): centre ``(p + z^2 / 2n) / (1 + z^2 / n)``, half-width
``z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)``. Unlike the normal approximation it stays
inside [0, 1] and is not degenerate at 0 or n successes (0 of 10 gives [0, 0.2775], not [0, 0]),
which is what a small group needs. Pure and total: it never raises.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["Z_95", "wilson_interval"]

Z_95: Final = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes / trials``; None when ``trials`` is not positive
    (nothing measured). ``successes`` is clamped to ``[0, trials]``; a ``z`` that is not a positive
    finite number (or an int too large for a float) is taken as :data:`Z_95`. Counts too large for a
    float are taken as infinitely many trials: the interval is then the rate itself."""
    if trials <= 0:
        return None
    z = _finite_positive(z)
    k = min(max(successes, 0), trials)
    p = k / trials  # int / int is rounded once: a float in [0, 1] however large the ints are
    # Float arithmetic from here on: an int too large for a float (10**400 trials) is infinitely
    # many, for which the interval narrows to the rate itself.
    try:
        n = float(trials)
    except OverflowError:
        return (0.0 if k == 0 else p), (1.0 if k == trials else p)
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    # sqrt(p (1 - p) / n + z^2 / 4n^2) taken as sqrt(p (1 - p) n + z^2 / 4) / n: for a large n
    # (10**200 trials) the terms under the first root underflow to 0, and the interval with them.
    half = z / (denominator * n) * math.sqrt(p * (1 - p) * n + z2 / 4)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == trials else min(1.0, centre + half)
    return low, high


def _finite_positive(z: float) -> float:
    """``z`` as a float when it is a positive finite number, else :data:`Z_95`."""
    try:
        value = float(z)
    except (OverflowError, TypeError, ValueError):
        return Z_95
    return value if math.isfinite(value) and value > 0 else Z_95
