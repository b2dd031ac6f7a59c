"""``demo``: the main job, on embedded defaults."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from otel_route_shadow.cli.common import CliError, count_argument
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, epilog

__all__ = ["register"]


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run the demo factory under the instrumentation, verify the chain, print a summary",
        description=(
            "Run the bundled agent factory (four seams, per-role dials, a repo override, the fleet "
            "ratchet and a credit failover) under the real instrumentation. Spans go to the console, or "
            "over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set."
        ),
        epilog=epilog("demo"),
    )
    parser.add_argument(
        "--spawns",
        type=count_argument(1, 10_000_000),
        default=120,
        help="number of spawns (default 120)",
    )
    parser.add_argument("--policies", type=Path, help="policy file (default: the embedded demo policies)")
    parser.add_argument("--out", type=Path, default=Path(".demo"), help="folder for the store and chain")
    parser.add_argument("--project", default=None, help="openinference.project.name of the spans")
    parser.add_argument("--quiet", action="store_true", help="do not print spans to the console")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=_run)


def _run_bare(spawns: int) -> int:
    """The kill switch is set: run the spawns as the bare calls they are, record nothing, say so."""
    from otel_route_shadow.demo import FactorySettings, dispatch, plan_jobs
    from otel_route_shadow.instrumentation import environment_variables

    for job in plan_jobs(spawns, FactorySettings()):
        dispatch(job)
    print(
        f"route-shadow demo: {environment_variables.OTEL_PYTHON_ROUTE_SHADOW_DISABLED} is set: ran {spawns} spawns bare "
        "(no spans, no decisions, nothing written to the chain)"
    )
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from otel_route_shadow.chain import ChainCorruptError
    from otel_route_shadow.demo import DEFAULT_PROJECT, format_summary, run_demo
    from otel_route_shadow.instrumentation import env_disabled
    from otel_route_shadow.store import CorruptSnapshotError, PolicyFileError, PolicyStoreError

    if env_disabled():
        return _run_bare(args.spawns)
    console = None if (args.quiet or args.json) else sys.stdout
    try:
        summary = run_demo(
            args.out,
            spawns=args.spawns,
            policy_path=args.policies,
            console=console,
            project=args.project or DEFAULT_PROJECT,
        )
    except CorruptSnapshotError as exc:
        raise CliError(f"{args.out / 'store'}: {exc} (see `otel-route-shadow policy repair`)") from None
    except (PolicyFileError, PolicyStoreError) as exc:
        raise CliError(str(exc)) from None
    except ChainCorruptError as exc:  # the folder's chain ends in a line that is not a record
        raise CliError(f"{args.out / 'chain.jsonl'}: {exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{args.out}: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2, sort_keys=True))
    else:
        print(format_summary(summary))
    return EXIT_OK if summary.chain_intact else EXIT_FINDING
