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
    finite number is taken as :data:`Z_95`."""
    if trials <= 0:
        return None
    if not (math.isfinite(z) and z > 0):
        z = Z_95
    k = min(max(successes, 0), trials)
    p = k / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == trials else min(1.0, centre + half)
    return low, high
