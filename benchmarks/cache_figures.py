"""The analyses' and the log's caches, each timed with it and emptied (or bound 0), in process.

``python -m benchmarks.cache_figures [--policies 100,1000,8000] [--rounds 7]``

Each figure is a median of ``--rounds`` rounds, per call, with the memo as shipped against the same
call with the memo emptied before it: ``Replayer.replay`` (a repeated context) against
``Replayer._explain``; ``explain(context, snapshot, index=...)`` as shipped, with ``index._rows``
emptied and with each dimension's ``_masks`` emptied; ``_Dimension.admit`` of the repository
dimension's values; ``PublishedLog.tile`` and ``.bundle`` over the full level-0 tiles of a chain of
2,560 records with ``published._CACHED_TILES`` 64 and 0. A diagnostic for ``docs/benchmarks.md``
("Caches, windows and threads": every cache, by module), never part of ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.resolver_data import make_contexts, make_policies, make_snapshot
from otel_route_shadow.analysis.replaying import Replayer
from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.core import PolicyIndex, explain
from otel_route_shadow.logstore import Checkpointer, PublishedLog
from otel_route_shadow.tlog import Signer, Verifier, published

_ORIGIN = "example.com/route-shadow/cache-figures"


def _per_call(
    calls: dict[str, Callable[[Any], object]], items: Sequence[Any], rounds: int
) -> dict[str, float]:
    """Median over ``rounds`` of the µs per call of each of ``calls`` over ``items``, the calls taking
    turns in each round (a busy machine moves them alike)."""
    values: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for item in items:
                call(item)
            values[name].append((time.perf_counter() - start) / len(items) * 1e6)
    return {name: statistics.median(v) for name, v in values.items()}


def resolver_figures(policies: int, rounds: int) -> None:
    snapshot = make_snapshot(make_policies(policies, seed=21))
    contexts = make_contexts(2000 if policies <= 1000 else 300, policies, seed=22)
    texts = [context.model_dump_json() for context in contexts]
    replayer, fresh = Replayer(snapshot), Replayer(snapshot)
    for text in texts:
        replayer.replay(text)
    replay = _per_call({"hit": replayer.replay, "miss": fresh._explain}, texts, rounds)
    print(
        f"{policies} policies: Replayer.replay {replay['hit']:.2f} µs; explained again {replay['miss']:.1f} µs"
    )
    # One index per variant, so that what one variant empties never reaches another's.
    index, rows_index, masks_index = (PolicyIndex(snapshot.policies) for _ in range(3))
    dimensions = [masks_index._repos, masks_index._roles, masks_index._principals, masks_index._faces]

    def shipped(context: Any) -> None:
        explain(context, snapshot, index=index)

    def without_rows(context: Any) -> None:
        rows_index._rows.clear()
        explain(context, snapshot, index=rows_index)

    def without_masks(context: Any) -> None:
        for dimension in dimensions:
            dimension._masks.clear()
        explain(context, snapshot, index=masks_index)

    for context in contexts:
        shipped(context)
    ex = _per_call({"shipped": shipped, "rows": without_rows, "masks": without_masks}, contexts, rounds)
    print(
        f"  explain with an index {ex['shipped']:.1f} µs; _rows emptied {ex['rows']:.1f} µs; "
        f"_masks emptied {ex['masks']:.1f} µs"
    )
    repos, fresh_repos = index._repos, rows_index._repos
    values = list(repos.by_value)[:2000]

    def admit_fresh(value: str) -> None:
        fresh_repos._masks.clear()
        fresh_repos.admit(value)

    for value in values:
        repos.admit(value)
    admit = _per_call({"memo": repos.admit, "fresh": admit_fresh}, values, rounds)
    print(
        f"  _Dimension.admit of {len(values)} values: {admit['memo']:.2f} µs; built each call {admit['fresh']:.2f} µs"
    )


def tile_figures(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        chain = Path(work) / "chain.jsonl"
        signer = Signer.generate(_ORIGIN)
        with DecisionChain(chain) as log:
            for n in range(2560):
                log.append({"kind": "route-shadow", "n": n})
        Checkpointer(str(chain), _ORIGIN, signer).checkpoint()
        key = Verifier.parse(str(signer.verifier()))
        shipped = published._CACHED_TILES
        requests = [i % 9 for i in range(900)]
        try:
            calls: dict[str, Callable[[Any], object]] = {}
            for bound in (shipped, 0):
                published._CACHED_TILES = bound  # type: ignore[misc]
                served = PublishedLog(str(chain), [key])  # its tile reader takes the bound
                calls[f"tile {bound}"] = lambda i, served=served: served.tile(0, i, 256)
                calls[f"bundle {bound}"] = lambda i, served=served: served.bundle(i, 256)
            figures = _per_call(calls, requests, rounds)
        finally:
            published._CACHED_TILES = shipped  # type: ignore[misc]
        for kind in ("tile", "bundle"):
            print(
                f"{kind} of 9 tiles in turn: cache {shipped} {figures[f'{kind} {shipped}']:.0f} µs; 0 {figures[f'{kind} 0']:.0f} µs"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cache_figures", description=__doc__)
    parser.add_argument("--policies", default="100,1000,8000", help="comma-separated policy counts")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    for policies in (int(n) for n in args.policies.split(",")):
        resolver_figures(policies, args.rounds)
    tile_figures(args.rounds)


if __name__ == "__main__":
    main()
