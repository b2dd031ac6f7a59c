"""Shared pieces of the command line: errors and input readers (the exit codes: ``exit_codes``).

Every input a command reads is bounded and checked in one place here:

* :func:`input_file` refuses what is not a regular file (``/dev/zero``, a FIFO, a directory) before
  anything is read from it, without blocking on a FIFO that has no writer;
* :func:`json_lines` reads JSON lines (a file, or ``-`` for stdin) one bounded line at a time: a line
  longer than :data:`MAX_LINE_BYTES` stops the read with one error, so endless input without a newline
  (``< /dev/zero``) costs at most one line of memory;
* :func:`harden_streams` makes stdout and stderr write any text (a lone surrogate read from a file
  comes out as ``\\udXXX``, never as a ``UnicodeEncodeError`` traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Final

from otel_route_shadow.analysis import FleetError, chain_paths, is_remote
from otel_route_shadow.chain import live_path
from otel_route_shadow.cli.exit_codes import EXIT_USAGE
from otel_route_shadow.core import PolicyProblem
from otel_route_shadow.files import FileRefused, file_kind, open_regular, read_text, write_atomic
from otel_route_shadow.logstore import PruneRunning, prunes_held_off
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "MAX_LINE_BYTES",
    "STDIN",
    "CliError",
    "cap_jobs",
    "check_output",
    "count_argument",
    "harden_streams",
    "input_file",
    "jobs_argument",
    "json_lines",
    "left_beside_line",
    "number_argument",
    "open_input",
    "parse_json_text",
    "problem_line",
    "prunes_held_off_for",
    "read_text_file",
    "witness_policy_arg",
    "write_output",
]

_MAX_INPUT_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest JSON line any command reads: the chain's own record limit (docs/chain-format.md)."""
STDIN: Final = "-"
_WHOLE: Final = re.compile(r"-?[0-9]+")
_SPARE_DESCRIPTORS = 1024
"""Open files left to a command besides the prune locks it holds (``prunes_held_off_for``)."""


class CliError(Exception):
    """A problem with the user's input: printed as one line, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_json_text(text: str, source: str) -> Any:
    """Parse JSON strictly: duplicate keys and NaN/Infinity are errors, not silent last-one-wins."""
    try:
        return loads_strict(text)
    except StrictJSONError as exc:
        raise CliError(f"{source}: {exc}") from None


def name_chains(args: argparse.Namespace) -> None:
    """A chain named by one of its closed segments or its segments folder means the chain, named by its
    live file (docs/chain-format.md section 14.4): ``args.chain``/``args.chains`` are rewritten so.
    A log given by URL is left as it is."""
    for attribute in ("chain", "chains"):
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            setattr(args, attribute, _chain_name(value))
        elif isinstance(value, list):
            setattr(args, attribute, [_chain_name(item) if isinstance(item, str) else item for item in value])


@contextlib.contextmanager
def prunes_held_off_for(args: argparse.Namespace) -> Iterator[None]:
    """For a command that reads chains to judge them (``reads_chains`` among its defaults), the prune lock
    of each chain it reads held shared while it runs (``logstore.prunes_held_off``: no prune removes a
    file it listed): each chain file it names and each chain of a folder it names. A prune running past
    the wait is a :class:`CliError` (nothing read). A log given by URL is read as it is."""
    named: list[str] = []
    if getattr(args, "reads_chains", False):
        for attribute in ("chain", "chains"):
            value = getattr(args, attribute, None)
            named += [value] if isinstance(value, str) else value if isinstance(value, list) else []
    local: list[str] = []
    for path in named:
        if os.path.isdir(path):
            with contextlib.suppress(FleetError, OSError):  # the command itself says what is wrong
                local += chain_paths([path])
        elif not is_remote(path):
            local.append(path)
    _room_for(len(local))
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(prunes_held_off(local))
        except PruneRunning as exc:
            raise CliError(str(exc)) from None
        yield


def _room_for(descriptors: int) -> None:
    """Raise the soft limit of open files (to at most the hard one) so that ``descriptors`` more can be
    held besides what the command opens itself: a fleet of cut chains holds one lock each."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = descriptors + _SPARE_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(
                resource.RLIMIT_NOFILE,
                (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard),
            )


def _chain_name(value: str) -> str:
    return value if is_remote(value) else live_path(value)


def input_file(path: str | os.PathLike[str]) -> str:
    """``path`` when it names a regular file; else a :class:`CliError` naming what it is instead
    (see :func:`otel_route_shadow.files.open_regular`: a FIFO is refused without blocking)."""
    os.close(open_input(path))
    return os.fspath(path)


def open_input(path: str | os.PathLike[str]) -> int:
    """A descriptor of the regular file ``path``, opened without blocking; else a :class:`CliError`
    naming the file and what it is (absent, a FIFO, a directory ...)."""
    try:
        return open_regular(path)
    except FileNotFoundError:
        raise CliError(f"{os.fspath(path)}: no such file") from None
    except FileRefused as exc:
        raise CliError(str(exc)) from None


def json_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a JSON-lines input (``-``: stdin), at most :data:`MAX_LINE_BYTES`
    bytes each.

    A longer line raises :class:`CliError` naming it, having buffered at most one byte more.
    """
    if path == STDIN:
        yield from _bounded_lines(sys.stdin.buffer, "<stdin>")
        return
    with os.fdopen(open_input(path), "rb") as handle:
        yield from _bounded_lines(handle, path)


def _bounded_lines(stream: BinaryIO, source: str) -> Iterator[tuple[int, bytes]]:
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line.rstrip(b"\r\n")) > MAX_LINE_BYTES:
            raise CliError(f"{source}:{number}: line longer than {MAX_LINE_BYTES} bytes; refusing the rest")
        yield number, line


def count_argument(minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number from ``minimum`` (to ``maximum``), refusing anything else
    with argparse's own one-line error."""
    bounds = f"must be {minimum} or more" if maximum is None else f"must be {minimum} to {maximum}"

    def count(text: str) -> int:
        if _WHOLE.fullmatch(text) is None:  # ``int`` also takes other scripts' digits, "_" and spaces
            raise argparse.ArgumentTypeError(f"not a number; {bounds}")
        value = int(text)
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(bounds)
        return value

    return count


def number_argument(maximum: float, *, positive: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number (seconds, days) from 0 (above 0 when ``positive``) to
    ``maximum``, refusing anything else with argparse's own one-line error: a wait given as ``nan`` or
    ``inf`` would never end."""
    bounds = f"must be {'above' if positive else 'at least'} 0 and at most {maximum:g}"

    def number(text: str) -> float:
        try:
            if not text.isascii():  # ``float`` also takes other scripts' digits
                raise ValueError(text)
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number; {bounds}") from None
        if not (value > 0 if positive else value >= 0) or not value <= maximum:  # nan fails both
            raise argparse.ArgumentTypeError(bounds)
        return value

    return number


class _OldName(argparse.Action):
    """An option kept under its old name: sets the new option's value and says on stderr that the
    name is old."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option: str | None = None,
    ) -> None:
        print(f"{parser.prog}: {option} is the old name of {self.new}; it still works", file=sys.stderr)
        setattr(namespace, self.dest, values)


def witness_policy_arg(parser: argparse.ArgumentParser, help: str) -> None:
    """``--witness-policy FILE``: a C2SP tlog-policy file (the witnesses and quorum a checkpoint must
    meet; routing policies are ``--policies``). ``--policy``, its old name, still works and says so."""
    parser.add_argument("--witness-policy", metavar="FILE", help=help)
    parser.add_argument(
        "--policy",
        metavar="FILE",
        dest="witness_policy",
        action=_OldName,
        new="--witness-policy",
        help="the old name of --witness-policy",
    )


def jobs_argument(parser: argparse.ArgumentParser, help: str, default: int | None = None) -> None:
    """``--jobs N``, every command's: a whole number, 0 for one per CPU (:func:`cap_jobs` reads it)."""
    parser.add_argument(
        "--jobs", type=count_argument(0), default=default, metavar="N", help=f"{help}; 0: one per CPU"
    )


def cap_jobs(jobs: int) -> int:
    """``jobs`` of ``--jobs``: 0 is the machine's CPUs; more than them is capped to them, with a note on
    stderr."""
    cpus = os.cpu_count() or 1
    if jobs == 0:
        return cpus
    if jobs > cpus:
        print(
            f"otel-route-shadow: note: --jobs {jobs} capped to {cpus} (the CPUs of this machine)",
            file=sys.stderr,
        )
        return cpus
    return jobs


def left_beside_line(name: str) -> str:
    """What ``verify``, ``report`` and ``audit`` say of a file :func:`otel_route_shadow.chain.left_beside` names."""
    return f"not in the chain yet: {name}, what a writer left for it (the next append writes it in)"


def harden_streams() -> None:
    """stdout and stderr write lone surrogates as backslash escapes instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def read_text_file(path: str, *, max_bytes: int = _MAX_INPUT_BYTES) -> str:
    """Read a UTF-8 text file (or ``-`` for stdin) with a size bound and one-line errors."""
    if path != "-":
        try:
            return read_text(path, max_bytes)
        except FileNotFoundError:
            raise CliError(f"{path}: no such file") from None
        except FileRefused as exc:
            raise CliError(str(exc)) from None
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CliError(f"{path}: larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 (byte {exc.start})") from None


def problem_line(source: str, problem: PolicyProblem) -> str:
    """One policy problem as the CLI prints it: ``FILE: [code] policy ID: message``."""
    if problem.policy_id is not None:
        subject = f"policy {problem.policy_id}: "
    elif problem.index is not None:
        subject = f"policy at index {problem.index}: "
    else:
        subject = ""
    return f"{source}: [{problem.code.value}] {subject}{problem.message}"


def check_output(path: str, option: str) -> None:
    """A :class:`CliError` when something that is not a regular file (a FIFO, a device, a directory, a
    symbolic link) is at ``path``, the output file ``option`` names; looked at, never opened."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CliError(f"{option} {path}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(mode):
        raise CliError(f"{option} {path}: is {file_kind(mode)}, not a regular file")


def write_output(path: str, data: bytes, option: str) -> None:
    """Write ``data`` to the output file ``path`` that ``option`` names, atomically (a reader never sees
    half of it); what :func:`check_output` refuses is never opened or replaced."""
    check_output(path, option)
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise CliError(f"{option} {path}: cannot write: {exc.strerror or type(exc).__name__}") from None
