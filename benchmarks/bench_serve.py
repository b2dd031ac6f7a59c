"""Row 9: ``otel-route-shadow serve`` on the large chain, read over loopback by a client in this process.

The chain's log is the one row 6 makes (one checkpoint over the whole chain). The server runs as its own
process (``python -m otel_route_shadow.cli serve CHAIN --listen 127.0.0.1:0``), so its memory is its own;
the client is ``http.client`` on one kept-alive connection (identity encoding: the figure is the
server's work, not gzip's).

9a. An entry bundle of 256 records (``tile/entries/<N>``) at indexes spread over the chain: the server
    reads the level-0 tile, authenticates it through its parents up to the signed root (the upper tiles
    cached), cuts the 256 lines from the chain through the offset index and checks each against its leaf
    hash. The baseline: Python's ``http.server`` (HTTP/1.1, kept alive, its own process) serving the
    same bytes from files, each request timed back to back with ours; the ratio is the median of the
    per-request ratios, target <= 1.5x. The entry index is built before (its one-off scan of the chain
    is in the extras), and so is the folder of files.
9b. A full level-0 tile (``tile/0/<N>``) at the same indexes: read, authenticated, compared; the same
    baseline and ratio. Both rows keep, in the extras, the median of ``GET /`` (the prefix list: the
    round trip and the HTTP handling, no file) measured interleaved with them.
9c. The server's peak resident memory (``VmHWM``) after the client read every level-0 tile and every
    full entry bundle of the whole log, in MB; the baseline is its resident memory just after it started.
9d. The p99 of ``GET tile/0/<N>`` while 1,000 other connections are held idle (each opened, answered
    once, so the server holds it, and left waiting), against the p99 with none held, the two sides
    taking turns in rounds; the ratio is the median of the per-round ratios. Extras: how many were
    still open and answered at the end of each round.
"""

from __future__ import annotations

import http.client
import os
import random
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_tlog import _prepared
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored

SAMPLES = 200
"""Requests of each kind (bundles, tiles, the floor) in rows 9a and 9b, interleaved."""
IDLE = 1000
"""Idle connections held in row 9d."""


_STATIC = """
import functools, http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # its head and body go in two sends: no delayed-ACK stall between them
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1]))
print(f"serving at http://127.0.0.1:{server.server_address[1]}/", flush=True)
server.serve_forever()
"""
"""Python's ``http.server`` serving a folder over HTTP/1.1 (kept alive, as ``serve``), the baseline of
rows 9a and 9b."""

_CHECKING = (
    _STATIC.split("server = ")[0]
    + """    def send_head(self):  # an entry bundle is sent only once each entry matches its leaf hash
        if "/tile/entries/" not in self.path:
            return super().send_head()
        import hashlib, io
        with open(self.translate_path(self.path), "rb") as f:
            body = f.read()
        with open(self.translate_path(self.path.replace("/tile/entries/", "/tile/0/")), "rb") as f:
            leaves = f.read()
        view, at, k, prefix = memoryview(body), 0, 0, hashlib.sha256(b"\\x00")
        while at < len(body):
            size = int.from_bytes(view[at : at + 2], "big")
            digest = prefix.copy()
            digest.update(view[at + 2 : at + 2 + size])
            if digest.digest() != leaves[32 * k : 32 * k + 32]:
                self.send_error(500, "an entry does not match its leaf hash")
                return None
            at, k = at + 2 + size, k + 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)
"""
    + "server = "
    + _STATIC.split("server = ")[1]
)
"""The same server, except that before it sends an entry bundle it checks each entry against the leaf
hash the level-0 tile beside it holds (not authenticated: ``serve`` also authenticates that tile up to
the signed root). Row 9a's extras compare ``serve`` with it: what the row costs beyond the check itself."""


class _Server:
    """A server process (``argv``, which prints its URL on its first line) and one kept-alive client
    connection to it."""

    def __init__(self, argv: list[str]) -> None:
        self.connection: http.client.HTTPConnection | None = None
        self.process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"http://([0-9.]+):([0-9]+)(/\S*)", line)
        if match is None:
            self.stop()
            raise RuntimeError(f"{argv[:4]} did not start: {line!r}")
        self.prefix = match[3]
        self.address = (match[1], int(match[2]))
        self.connection = http.client.HTTPConnection(match[1], int(match[2]), timeout=60)

    def get(self, path: str) -> bytes:
        assert self.connection is not None
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
        return body

    def timed(self, path: str) -> float:
        start = time.perf_counter()
        self.get(path)
        return time.perf_counter() - start

    def memory_mb(self, field: str) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
        return int(match[1]) / 1024 if match else float("nan")

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _serve_argv(chain: Path, key: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "otel_route_shadow.cli",
        "serve",
        str(chain),
        "--listen",
        "127.0.0.1:0",
        "--key",
        key,
    ]


def _tile(index: int) -> str:
    from otel_route_shadow.tlog import tile_path

    return tile_path(0, index)


def _bundle(index: int) -> str:
    from otel_route_shadow.logstore import bundle_path

    return bundle_path(index)


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    bundle = Row(
        id="9a",
        title="serve: entry bundle of 256 records",
        measured=f"GET tile/entries/<N> over loopback, {n:,}-record chain",
        unit="ms",
        baseline_label="http.server, the same bytes from disk",
        ratio_label="serve / http.server",
        target=Target("<=", 1.5),
    )
    tile = Row(
        id="9b",
        title="serve: level-0 tile",
        measured=f"GET tile/0/<N> over loopback, {n:,}-record chain",
        unit="ms",
        baseline_label="http.server, the same bytes from disk",
        ratio_label="serve / http.server",
        target=Target("<=", 1.5),
    )
    idle = Row(
        id="9d",
        title=f"serve: tile p99 with {IDLE:,} idle connections held",
        measured=f"p99 of GET tile/0/<N> with {IDLE:,} idle kept-alive connections held, {n:,}-record chain",
        unit="ms",
        baseline_label="p99 with none held",
        ratio_label="held / none",
        target=Target("<=", 2),
    )
    memory = Row(
        id="9c",
        title="serve: peak RSS reading the whole log",
        measured="server VmHWM after every tile and bundle was read",
        unit="MB",
        baseline_label="RSS just after start",
        target=Target("<=", 100, on="ours", unit="MB"),
    )
    try:
        path = context.chains.large()
        _signer, _notes, verifier = _prepared(path)
        server = _Server(_serve_argv(path, verifier))
        try:
            rows = _measure(server, n, bundle, tile, memory, cfg.workdir / "serve-static")
            rounds, samples = (2, 50) if cfg.quick else (5, SAMPLES)
            return [*rows, _measure_idle(server, n, idle, rounds, samples)]
        finally:
            server.stop()
    except Exception as exc:
        return [errored(row, exc) for row in (bundle, tile, memory, idle)]


def _measure(server: _Server, n: int, bundle: Row, tile: Row, memory: Row, static_dir: Path) -> list[Row]:
    started_mb = server.memory_mb("VmRSS")
    full = n // 256
    start = time.perf_counter()
    server.get(server.prefix + _bundle(full - 1))  # builds the entry index: one scan of the chain
    index_s = time.perf_counter() - start
    indexes = random.Random(9).sample(range(full), min(SAMPLES, full))
    shutil.rmtree(static_dir, ignore_errors=True)
    for index in indexes:  # the same bytes, as files, for http.server
        for relative in (_bundle(index), _tile(index)):
            (static_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (static_dir / relative).write_bytes(server.get(server.prefix + relative))
    static = _Server([sys.executable, "-c", _STATIC, str(static_dir)])
    checking = _Server([sys.executable, "-c", _CHECKING, str(static_dir)])
    try:
        times = _paired(server, static, checking, indexes)
    finally:
        static.stop()
        checking.stop()
        shutil.rmtree(static_dir, ignore_errors=True)
    for row, kind in ((bundle, "bundle"), (tile, "tile")):
        ours, baseline = times[kind], times[kind + "-static"]
        row.ours, row.baseline, row.runs = Stats.of(ours), Stats.of(baseline), len(ours)
        row.ratio = Stats.of([a / b for a, b in zip(ours, baseline, strict=True)])
        row.extras["p90_ms"] = statistics.quantiles(ours, n=10)[-1]
        row.extras["floor_get_slash_ms"] = statistics.median(times["floor"])
        row.extras["loadavg_after"] = os.getloadavg()
    bundle.extras["index_built_s"] = round(index_s, 3)
    bundle.extras["checking_static_ms"] = statistics.median(times["bundle-checking"])
    bundle.extras["ratio_to_checking_static"] = statistics.median(
        [a / b for a, b in zip(times["bundle"], times["bundle-checking"], strict=True)]
    )
    read: dict[str, Any] = {"bundles": 0, "tiles": 0, "bytes": 0}
    start = time.perf_counter()
    for index in range(full):
        read["bytes"] += len(server.get(server.prefix + _tile(index)))
        read["bytes"] += len(server.get(server.prefix + _bundle(index)))
        read["tiles"] += 1
        read["bundles"] += 1
    read["seconds"] = round(time.perf_counter() - start, 2)
    peak = server.memory_mb("VmHWM")
    memory.ours = Stats.of([peak])
    memory.baseline = Stats.of([started_mb])
    memory.runs = 1
    memory.extras.update(read)
    return [bundle.judge(), tile.judge(), memory.judge()]


def _paired(server: _Server, static: _Server, checking: _Server, indexes: list[int]) -> dict[str, list[float]]:
    """Each resource from ``serve`` and from http.server back to back (which goes first in turn; a
    bundle from the checking http.server too), the kinds in turn, with ``GET /`` (the round trip
    without a file) among them; ms."""
    times: dict[str, list[float]] = {
        key: [] for key in ("bundle", "bundle-static", "bundle-checking", "tile", "tile-static", "floor")
    }
    for k, index in enumerate(indexes):
        order = ["bundle", "tile", "floor"]
        for kind in order[k % 3 :] + order[: k % 3]:
            if kind == "floor":
                times[kind].append(server.timed("/") * 1000)
                continue
            relative = _bundle(index) if kind == "bundle" else _tile(index)
            sides = [(kind, server, server.prefix + relative), (kind + "-static", static, "/" + relative)]
            if kind == "bundle":
                sides.append(("bundle-checking", checking, "/" + relative))
            for key, side, path in sides[k % len(sides) :] + sides[: k % len(sides)]:
                times[key].append(side.timed(path) * 1000)
    return times


def _measure_idle(server: _Server, n: int, row: Row, rounds: int, samples: int) -> Row:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE + 512 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (IDLE + 512, hard))
    address = server.address
    paths = [server.prefix + _tile(i) for i in random.Random(91).choices(range(max(1, n // 256)), k=samples)]
    held_p99: list[float] = []
    none_p99: list[float] = []
    ratios: list[float] = []
    still_open: list[int] = []
    for k in range(rounds):
        figures: dict[str, float] = {}
        for side in ("held", "none") if k % 2 == 0 else ("none", "held"):
            held = [_hold(address) for _ in range(IDLE)] if side == "held" else []
            try:
                times = [server.timed(path) * 1000 for path in paths]
                figures[side] = statistics.quantiles(times, n=100)[-1]
                if held:
                    still_open.append(sum(_answered(sock) for sock in held))
            finally:
                for sock in held:
                    sock.close()
        held_p99.append(figures["held"])
        none_p99.append(figures["none"])
        ratios.append(figures["held"] / figures["none"])
    row.ours, row.baseline, row.ratio = Stats.of(held_p99), Stats.of(none_p99), Stats.of(ratios)
    row.runs = rounds
    row.extras.update(
        requests_per_side_and_round=samples,
        still_open_and_answered=still_open,
    )
    return row.judge()


_LISTING = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"


def _hold(address: tuple[str, int]) -> socket.socket:
    """A connection answered once (so the server holds it), then left idle."""
    sock = socket.create_connection(address, timeout=60)
    if not _answered(sock):
        sock.close()
        raise RuntimeError("an idle connection was not answered")
    return sock


def _answered(sock: socket.socket) -> bool:
    """Whether ``GET /`` on ``sock`` is answered 200 (its body read whole)."""
    try:
        sock.sendall(_LISTING)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        match = re.search(rb"Content-Length: ([0-9]+)", head)
        length = int(match[1]) if match else 0
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            body += chunk
        return head.startswith(b"HTTP/1.1 200")
    except OSError:
        return False
