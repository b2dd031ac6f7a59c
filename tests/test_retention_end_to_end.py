"""A host's chain kept for years, as a host runs it: four writer processes through the plugin, with a small
segment size and a retention (``segment_bytes``, ``retention_records``), one of them killed with SIGKILL
mid-run. Afterwards ``verify`` passes and says what was pruned, ``serve`` gives a retained entry bundle,
``prove`` proves a retained record, and nothing the survivors wrote is lost: every record is in the
chain from its minimum index on or in an archive, seq continuous from 0."""

from __future__ import annotations

import gzip
import io
import multiprocessing
import os
import signal
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import orjson
import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import LogStore, PublishedLog
from otel_route_shadow.logstore.entries import encode_bundle
from otel_route_shadow.tlog import TILE_WIDTH, Verifier

ORIGIN = "example.com/route-shadow/retention"
SEGMENT_BYTES = 60_000
"""About 24 records of the demo's 2.5 KB a segment."""
RETAINED = 300
SPAWNS = 200
"""Records each surviving writer makes."""
KILLED = 3
"""The writer killed with SIGKILL once it has made a quarter of ``SPAWNS`` records (it never stops)."""
HANG_GUARD_S = 120.0


def _writer(chain: str, key: str, writer: int, started: Any) -> None:
    """One host process: the plugin installed with a signing key, a small segment size and a
    retention; ``SPAWNS`` spawns, each its seam named ``w<writer>-<n>`` (the writer to be killed
    spawns until it is, telling ``started`` after a quarter of them)."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_route_shadow.demo import factory
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(),
        chain_path=chain,
        seams=(),
        signing_key=key,
        checkpoint_records=20,
        segment_bytes=SEGMENT_BYTES,
        retention_records=RETAINED,
    )
    jobs = factory.plan_jobs(SPAWNS, factory.FactorySettings())
    n = 0
    while n < SPAWNS or writer == KILLED:
        with shadow_spawn(factory.context_for(jobs[n % SPAWNS], "agentic"), seam=f"w{writer}-{n}"):
            pass
        n += 1
        if n == SPAWNS // 4:
            started.set()
    instrumentor.uninstrument()


def _records(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.split(b"\n")[:-1]]


def _seam(record: dict[str, Any]) -> str | None:
    seam = record["payload"].get("attributes", {}).get("route_shadow.seam")
    return seam if isinstance(seam, str) else None


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The chain four writers left (one killed) and the log's verifier key."""
    directory = tmp_path_factory.mktemp("host")
    key = directory / "log.key"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["key", "generate", "--name", ORIGIN, "--out", str(key)]) == 0
    verifier = out.getvalue().strip()
    chain = directory / "chain.jsonl"
    context = multiprocessing.get_context("spawn")
    events = [context.Event() for _ in range(4)]
    writers = [context.Process(target=_writer, args=(str(chain), str(key), n, events[n])) for n in range(4)]
    for process in writers:
        process.start()
    assert events[KILLED].wait(HANG_GUARD_S)
    assert writers[KILLED].pid is not None
    os.kill(writers[KILLED].pid, signal.SIGKILL)
    for process in writers:
        process.join(HANG_GUARD_S)
    assert [p.exitcode for p in writers] == [0, 0, 0, -signal.SIGKILL]
    return chain, verifier


def test_four_writers_with_a_retention_one_killed_lose_nothing_and_verify_serve_and_prove_the_rest(
    host: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    chain, verifier = host
    assert not Path(str(chain) + ".tlog/refusals").exists()  # no writer ever refused to sign
    pruned = LogStore(str(chain)).read_pruned()
    assert pruned is not None and pruned.min_index > 0
    assert all(segment.archive is not None for segment in pruned.segments)

    # Nothing lost: the archives and the files kept hold every record, seq continuous from 0.
    archived = b"".join(
        gzip.decompress((chain.parent / str(segment.archive)).read_bytes()) for segment in pruned.segments
    )
    folder = Path(str(chain) + ".segments")
    kept = b"".join(path.read_bytes() for path in [*sorted(folder.iterdir()), chain])
    retained = _records(kept)
    assert retained[0]["seq"] == pruned.min_index
    assert len(retained) >= RETAINED  # the newest records are kept
    everything = _records(archived) + retained
    assert [r["seq"] for r in everything] == list(range(len(everything)))
    seams = Counter(_seam(r) for r in everything)
    for writer in range(4):
        if writer != KILLED:
            assert all(seams[f"w{writer}-{n}"] == 1 for n in range(SPAWNS)), writer
    assert all(count == 1 for seam, count in seams.items() if seam is not None)  # none written twice

    # The checkpoint entries the prunes moved out claim trees below the minimum index only (a prune whose
    # log lock was held by a writer's checkpoint leaves them to the next one).
    for moved in Path(str(chain) + ".archive").glob("checkpoints.*.jsonl.gz"):
        for line in gzip.decompress(moved.read_bytes()).splitlines():
            assert int(orjson.loads(line)["note"].split("\n")[1]) < pruned.min_index

    # verify: the whole retained chain, its start authenticated from the signed tree; says what was pruned.
    capsys.readouterr()
    assert main(["verify", str(chain), "--key", verifier]) == 0
    assert f"pruned below seq {pruned.min_index}" in capsys.readouterr().out

    # serve: a retained entry bundle, through the writer's chain-wide index (no rescan of the chain).
    served = PublishedLog(str(chain), [Verifier.parse(verifier)])
    size = served.size
    bundle = -(-pruned.min_index // TILE_WIDTH)
    width = min(TILE_WIDTH, size - bundle * TILE_WIDTH)
    assert width > 0
    lines = kept.split(b"\n")
    first = bundle * TILE_WIDTH - pruned.min_index
    assert served.bundle(bundle, width) == encode_bundle(lines[first : first + width])
    assert served.index.rebuilds == 0

    # prove: a retained record's inclusion in the latest checkpoint.
    capsys.readouterr()
    seq = pruned.min_index + 1
    assert main(["prove", str(chain), "--seq", str(seq)]) == 0
    assert orjson.loads(capsys.readouterr().out)["seq"] == seq
