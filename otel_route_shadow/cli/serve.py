"""``otel-route-shadow serve CHAIN...``: the chains' logs over HTTP, as C2SP tlog-tiles.

Each log is served under its origin (``http://HOST:PORT/<origin>/checkpoint`` ...), read-only, every
resource authenticated against the log's checkpoint first (``server``, ``logstore.PublishedLog``). Prints
one line per log (``serving <origin> ... at <url>``) on stdout once it listens; problems go to stderr,
one line each. SIGTERM or SIGINT stops it cleanly. Exit codes: ``exit_codes.COMMANDS["serve"]``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from otel_route_shadow.addresses import is_loopback
from otel_route_shadow.cli.checkpoints import read_verifiers
from otel_route_shadow.cli.common import CliError, count_argument, input_file, witness_policy_arg
from otel_route_shadow.cli.exit_codes import EXIT_OK, epilog
from otel_route_shadow.cli.verify_checkpoints import entry_lines, unservable_bundles
from otel_route_shadow.cli.witnessed import log_keys, read_witness_policy
from otel_route_shadow.logstore import LogStore, PublishedLog, Unservable
from otel_route_shadow.server import Limits, LogServer, LogSite, SiteError
from otel_route_shadow.tlog import CosignatureVerifier, Verifier

__all__ = ["register"]

_DEFAULT_LISTEN = "127.0.0.1:8080"
_STOP_TIMEOUT = 5.0
_POLL_MS = 1000
"""How often the main thread looks whether the serving thread ended on its own (a signal wakes it at once)."""
_DEFAULTS = Limits()


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "serve",
        help="serve the chains' logs over HTTP (C2SP tlog-tiles, read-only)",
        description=(
            "Serve each chain's verifiable log read-only over HTTP as C2SP tlog-tiles: "
            "/<origin>/checkpoint, /<origin>/tile/<L>/<N>[.p/<W>] and /<origin>/tile/entries/<N>[.p/<W>], "
            "every resource authenticated against the log's checkpoint before it is sent. "
            "Stops cleanly on SIGTERM or SIGINT."
        ),
        epilog=epilog("serve"),
    )
    parser.add_argument("chains", nargs="+", metavar="CHAIN", help="chain file (its log is CHAIN.tlog/)")
    parser.add_argument(
        "--listen",
        default=_DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to listen on (default {_DEFAULT_LISTEN}; [::1]:PORT for IPv6; port 0: any free port)",
    )
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="verifier key (string or file): serve only checkpoints it signed (repeatable)",
    )
    witness_policy_arg(
        parser,
        help=(
            "C2SP tlog-policy file: its log keys are added to --key (one at least), and the checkpoint is "
            "served without the cosignature lines that claim one of its witnesses' keys and do not verify (a "
            "client holding that key would reject the whole checkpoint); give the witnesses the clients trust"
        ),
    )
    parser.add_argument(
        "--max-connections",
        type=count_argument(1, 10_000),
        default=_DEFAULTS.max_connections,
        metavar="N",
        help=(
            "connections open at once; at the limit a new one closes the one idle longest, or is answered "
            f"503 when every one is being answered (default {_DEFAULTS.max_connections}; the soft limit on "
            "open files is raised to match when the hard limit allows)"
        ),
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    host, port = listen_address(args.listen)
    keys = read_verifiers(args.key)
    witnesses: tuple[CosignatureVerifier, ...] = ()
    if args.witness_policy is not None:
        policy = read_witness_policy(args.witness_policy)
        keys, witnesses = log_keys(policy, keys, args.witness_policy), policy.witness_verifiers()
    verifiers = [Verifier.parse(key) for key in keys]
    logs = [_open(chain, verifiers, witnesses) for chain in args.chains]
    try:
        site = LogSite(logs)
    except SiteError as exc:
        raise CliError(str(exc)) from None
    _log_to_stderr()
    try:
        server = LogServer((host, port), site, Limits(max_connections=args.max_connections))
    except OSError as exc:
        raise CliError(f"--listen {args.listen}: cannot listen: {exc.strerror or exc}") from None
    if not is_loopback(host):
        print(
            f"otel-route-shadow: note: listening on {host}, not a loopback address: "
            "every client that reaches it can read these logs",
            file=sys.stderr,
        )

    def announce() -> None:
        for log in logs:
            print(f"serving {log.origin} (size {log.size}, {log.chain_path}) at {server.url}/{log.origin}/")
            _report_long_entries(log)
            site.report_dropped(log)
        sys.stdout.flush()

    return _serve(server, announce)


def _open(chain: str, verifiers: list[Verifier], witnesses: tuple[CosignatureVerifier, ...]) -> PublishedLog:
    input_file(chain)
    try:
        return PublishedLog(chain, verifiers, witnesses)
    except FileNotFoundError:
        raise CliError(
            f"{chain}: no checkpoint in {LogStore(chain).path} yet: nothing to serve (the writer publishes "
            "one every OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS records and at shutdown)"
        ) from None
    except Unservable as exc:
        raise CliError(f"{chain}: {exc}") from None
    except OSError as exc:
        raise CliError(f"{chain}: cannot read: {exc.strerror or exc}") from None


def _report_long_entries(log: PublishedLog) -> None:
    """The entry bundles that cannot be served (lines over 65,535 bytes in an older chain), on stderr."""
    long = [entry for entry in unservable_bundles(log.chain_path) if entry.seq < log.size]
    for line in entry_lines(long):
        print(f"otel-route-shadow: note: {log.origin}: {line.strip()}", file=sys.stderr)


def _serve(server: LogServer, announce: Callable[[], None]) -> int:
    """Serve until SIGTERM or SIGINT; ``announce`` says so once the signals are handled (a supervisor
    that stops the server as soon as it reads the announcement gets a clean stop, exit 0)."""
    # The handler runs in the main thread between any two bytecodes, maybe while that thread holds a
    # lock, so it takes none (``threading.Event.set`` takes the lock ``Event.wait`` holds: a hang); it
    # writes a byte the loop below waits for.
    wake_read, wake_write = os.pipe()
    try:
        return _serve_until_woken(server, announce, wake_read, wake_write)
    finally:
        os.close(wake_read)
        os.close(wake_write)


def _serve_until_woken(
    server: LogServer, announce: Callable[[], None], wake_read: int, wake_write: int
) -> int:
    os.set_blocking(wake_write, False)
    woken = select.poll()
    woken.register(wake_read, select.POLLIN)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # the pipe is full: a byte is already waiting
            os.write(wake_write, b"\0")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    thread = threading.Thread(target=server.serve_forever, name="route-shadow-serve", daemon=True)
    thread.start()
    try:
        announce()
        while thread.is_alive() and not woken.poll(_POLL_MS):  # a signal wakes it at once (PEP 475)
            pass
    finally:
        closed = server.stop(_STOP_TIMEOUT)
        thread.join(_STOP_TIMEOUT)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not closed:
        print("otel-route-shadow: note: stopped with connections still open", file=sys.stderr)
    return EXIT_OK


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as (host, port); a ``CliError`` otherwise."""
    host, colon, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise CliError(f"--listen {text}: write an IPv6 address in brackets, [::1]:8080")
    if not colon or not host or not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise CliError(f"--listen {text}: not HOST:PORT (port 0 to 65535)")
    return host, int(port_text)


def _log_to_stderr() -> None:
    logger = logging.getLogger("otel_route_shadow.server")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("otel-route-shadow serve: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
