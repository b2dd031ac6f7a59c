"""Running ``otel-route-shadow serve`` as a real process on loopback for the tests (imported as a module;
it holds no tests itself)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


@dataclasses.dataclass
class Served:
    """A running server: its process, the URL of each log's prefix (by origin) and its stderr file."""

    process: subprocess.Popen[str]
    urls: dict[str, str]
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def _lines(stream: object, out: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        out.put(line)


@contextlib.contextmanager
def serving(chains: list[Path], *options: str, workdir: Path) -> Iterator[Served]:
    """Start ``serve`` on the chains (``--listen 127.0.0.1:0``), wait until it listens, stop it with
    SIGTERM at the end (and check it stopped cleanly)."""
    stderr = workdir / f"serve-{len(list(workdir.glob('serve-*.err')))}.err"
    with open(stderr, "w", encoding="utf-8") as err:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "otel_route_shadow.cli",
                "serve",
                *map(str, chains),
                "--listen",
                "127.0.0.1:0",
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    urls: dict[str, str] = {}
    try:
        while len(urls) < len(chains):
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"serve did not start: {stderr.read_text()}") from None
            words = line.split()
            assert words[0] == "serving", line
            urls[words[1]] = words[-1]
        yield Served(process, urls, stderr)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError("serve did not stop on SIGTERM") from None
    assert code == 0, f"serve exited {code}: {stderr.read_text()}"


def get(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; HTTP errors are answers, not exceptions."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()
