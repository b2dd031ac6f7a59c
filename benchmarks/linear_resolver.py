"""The linear-scan baseline for ``explain_batch``: ``tests/reference_resolver.py``.

That file is the tests' oracle, written independently of the core: it sorts the policies once and
then checks every enabled policy for every context, with the same tie rule and account logic. It is
imported by path (``tests/`` is not a package) and is not slowed on purpose.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable

from benchmarks.harness import REPO_ROOT
from otel_route_shadow.core import PolicySnapshot, RouteContext, RouteDecision

BatchFn = Callable[[Iterable[RouteContext], PolicySnapshot], list[RouteDecision]]

REFERENCE_PATH = REPO_ROOT / "tests" / "reference_resolver.py"


def load_baseline() -> tuple[BatchFn, str]:
    """``(batch function, label)``; a missing reference is an error, never a silent substitute."""
    spec = importlib.util.spec_from_file_location("_bench_reference_resolver", REFERENCE_PATH)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{REFERENCE_PATH}: the linear-scan reference resolver is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: BatchFn = module.reference_explain_batch
    return fn, "tests/reference_resolver.py:reference_explain_batch"
