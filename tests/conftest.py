"""Shared test settings.

Hypothesis: the ``ci`` profile (no deadline, a modest number of examples) is loaded by default so
the whole suite stays fast and never flakes on a slow machine; ``HYPOTHESIS_PROFILE=thorough`` runs
many more examples locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("thorough", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
