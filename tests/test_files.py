"""The package-root file helpers: hostile files are refused without blocking, reads are bounded, JSON
depth is limited, atomic writes are durable and leave nothing behind, lines are read and cut at LFs."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow import files
from otel_route_shadow.files import (
    TEMPORARY_MARK,
    FileRefused,
    open_regular,
    read_regular,
    read_text,
    remove_temporaries,
    write_all,
    write_atomic,
)
from otel_route_shadow.lines import (
    LineTooLong,
    complete_end,
    first_line,
    iter_blocks,
    iter_lines_back,
    iter_lines_from,
    line_segments,
    read_line_blocks,
)
from otel_route_shadow.processes import each_segment
from otel_route_shadow.strict_json import StrictJSONError, loads_strict, read_json


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_with_no_writer_is_refused_without_blocking(fifo: Path) -> None:
    with pytest.raises(FileRefused) as caught:
        open_regular(fifo)
    assert caught.value.kind == "not-regular" and "a FIFO" in str(caught.value)
    with pytest.raises(FileRefused):
        read_regular(fifo, 10)
    with pytest.raises(FileRefused):
        read_json(fifo, 10)


@pytest.mark.parametrize("name", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused(name: str) -> None:
    with pytest.raises(FileRefused, match="device"):
        read_regular(name, 10)


def test_a_directory_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match="is a directory"):
        read_regular(tmp_path, 10)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", 10)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(FileRefused, match="not a directory"):
        read_regular(tmp_path / "file" / "below", 10)


def test_a_symlink_is_refused_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"data")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_regular(tmp_path / "link", 10) == b"data"
    with pytest.raises(FileRefused) as caught:
        read_regular(tmp_path / "link", 10, follow_symlinks=False)
    assert caught.value.kind == "symlink"


def test_reads_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    assert read_regular(path, 11) == b"x" * 11
    with pytest.raises(FileRefused) as caught:
        read_regular(path, 10)
    assert caught.value.kind == "too-large"


def test_text_must_be_utf8(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes(b"ok \xff")
    with pytest.raises(FileRefused, match="not UTF-8 \\(byte 3\\)"):
        read_text(path, 10)


def test_json_nested_50000_deep_is_one_error_never_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(StrictJSONError) as caught:
        read_json(path, 1 << 20)
    assert caught.value.kind == "too-deep" and str(path) in str(caught.value)


def test_json_depth_limit_is_exact() -> None:
    assert loads_strict("[" * 64 + "]" * 64) is not None
    with pytest.raises(StrictJSONError, match="deeper than 64"):
        loads_strict("[" * 65 + "]" * 65)
    assert loads_strict('{"a": [{"b": 1}]}', max_depth=3) == {"a": [{"b": 1}]}
    with pytest.raises(StrictJSONError):
        loads_strict('{"a": [{"b": 1}]}', max_depth=2)


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_atomic(target, b"one")
    write_atomic(target, b"two", mode=0o600)
    assert target.read_bytes() == b"two"
    assert target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["state"]


def test_an_atomic_write_keeps_the_operators_umask(tmp_path: Path) -> None:
    # The temporary file was chmod-ed to ``mode`` after its creation: under umask 077 the policy store's
    # current.json and the log's state, checkpoint and tiles were made 0644, readable by every user.
    old = os.umask(0o077)
    try:
        write_atomic(tmp_path / "public", b"x")
        write_atomic(tmp_path / "private", b"x", mode=0o600)
    finally:
        os.umask(old)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {"public": 0o600, "private": 0o600}


def test_exclusive_atomic_write_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "revision"
    write_atomic(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["revision"]


def test_a_failed_atomic_write_removes_its_temporary_and_keeps_the_old_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"old")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["state"]


def test_write_all_continues_after_short_writes_and_stops_on_no_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_write = os.write
    calls: list[int] = []

    def short(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data)[:3])

    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(files.os, "write", short)
        write_all(fd, b"0123456789")
        monkeypatch.setattr(files.os, "write", lambda fd, data: 0)
        with pytest.raises(OSError) as caught:
            write_all(fd, b"more")
    finally:
        os.close(fd)
    assert (tmp_path / "out").read_bytes() == b"0123456789"
    assert calls == [10, 7, 4, 1]
    assert caught.value.errno == errno.ENOSPC


def test_temporaries_of_dead_writers_are_removed_and_a_live_writers_kept(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            f".state{TEMPORARY_MARK}{dead_pid}-0a1b2c3d": False,
            f".state{TEMPORARY_MARK}{os.getpid()}-0a1b2c3d": False,
            f".state{TEMPORARY_MARK}{live.pid}-0a1b2c3d": True,
            "state": True,
            "not.tmp-a-temporary": True,
        }
        for name in names:
            (tmp_path / name).write_bytes(b"")
        assert remove_temporaries(tmp_path) == 2
        assert set(os.listdir(tmp_path)) == {name for name, kept in names.items() if kept}
    finally:
        live.kill()
        live.wait()
    assert remove_temporaries(tmp_path / "absent") == 0


_LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30)


@given(
    lines=_LINES, tail=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), block=st.integers(1, 64)
)
@settings(max_examples=200, deadline=None)
def test_line_blocks_yield_exactly_the_complete_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes, block: int
) -> None:
    path = tmp_path_factory.mktemp("lines") / "f"
    data = b"".join(line + b"\n" for line in lines) + tail
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as handle:
        end = complete_end(handle)
        assert end == len(data) - len(tail)
        seen: list[bytes] = []
        for offset, buffer, stop in read_line_blocks(handle, 0, end, block):
            assert data[offset : offset + stop] == bytes(buffer[:stop])
            seen.extend(bytes(buffer[:stop]).split(b"\n"))
        assert seen == lines
        copied = [
            b for _after, block_bytes in iter_blocks(handle, 0, end, block) for b in block_bytes.split(b"\n")
        ]
        assert copied == lines
        for parts in (1, 2, 5):
            segments = line_segments(handle, 0, end, parts)
            assert [b for _a, b in segments][-1:] == ([end] if end else [])
            assert all(a == 0 or data[a - 1 : a] == b"\n" for a, _b in segments)
            assert all(a < b for a, b in segments)
            assert all(x[1] == y[0] for x, y in itertools.pairwise(segments))


@given(
    lines=_LINES,
    tail=st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    block=st.integers(1, 64),
    max_line=st.integers(0, 50),
)
@settings(max_examples=200, deadline=None)
def test_every_line_reader_gives_the_complete_lines_and_never_the_torn_tail(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes, block: int, max_line: int
) -> None:
    path = tmp_path_factory.mktemp("lines") / "f"
    data = b"".join(line + b"\n" for line in lines) + tail
    path.write_bytes(data)
    offsets = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))[:-1]
    with open(path, "rb", buffering=0) as handle:
        forward = list(iter_lines_from(handle, 0, len(data), max_line, block))
        assert forward == [
            (o, line if len(line) <= max_line else None) for o, line in zip(offsets, lines, strict=True)
        ]
        assert [first_line(handle.fileno(), o, len(data), max_line) for o in offsets] == [
            got for _, got in forward
        ]
        assert first_line(handle.fileno(), len(data) - len(tail), len(data), max_line) is None
        for step in (1, 7, 64):
            assert list(iter_lines_back(handle, len(data), len(data) + 1, step)) == lines[::-1]
        end = len(data) - len(tail)
        if end:  # where the last complete line begins, read back at most max_line + 1 bytes
            last = len(lines[-1])
            if last <= max_line:
                assert complete_end(handle, end - 1, max_line) == offsets[-1]
            else:
                with pytest.raises(LineTooLong):
                    complete_end(handle, end - 1, max_line)


def _count_lines(path: str, start: int, end: int) -> int:
    with open(path, "rb") as handle:
        handle.seek(start)
        return handle.read(end - start).count(b"\n")


def test_each_segment_in_processes_gives_what_one_process_gives(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(20_000)))
    size = path.stat().st_size
    one = list(each_segment(_count_lines, str(path), 0, size, 1, min_parallel_bytes=1))
    two = list(each_segment(_count_lines, str(path), 0, size, 2, min_parallel_bytes=1))
    assert one == [20_000] and len(two) > 1 and sum(two) == 20_000


def test_write_atomic_takes_blocks_and_a_failing_source_leaves_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "copy"
    files.write_atomic(target, iter([b"first ", b"second"]))
    assert target.read_bytes() == b"first second"

    def failing() -> Iterator[bytes]:
        yield b"partial"
        raise OSError(errno.EIO, "the source failed")

    with pytest.raises(OSError):
        files.write_atomic(target, failing())
    assert target.read_bytes() == b"first second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # no temporary left


def test_a_temporary_name_with_non_ascii_digits_is_left_not_a_crash(tmp_path: Path) -> None:
    """``str.isdigit`` holds for "²": ``int`` raised out of ``remove_temporaries`` (a writer's first
    checkpoint then failed on every call)."""
    from otel_route_shadow.files import remove_temporaries

    stray = tmp_path / ".000.tmp-\u00b2-ab"
    stray.write_bytes(b"")
    assert remove_temporaries(tmp_path) == 0 and stray.exists()


def test_an_archive_name_of_non_ascii_digits_is_left_not_a_crash(tmp_path: Path) -> None:
    """``_remove_archives_from`` (a prune settling) read a name's first 16 characters with ``int`` when
    ``str.isdigit`` held: "²" raised."""
    from otel_route_shadow.logstore.archives import archive_dir
    from otel_route_shadow.logstore.pruning import _remove_archives_from

    chain = tmp_path / "chain.jsonl"
    folder = Path(archive_dir(str(chain)))
    folder.mkdir(parents=True)
    (folder / ("\u00b2" * 16 + ".jsonl.gz")).write_bytes(b"")
    (folder / "0000000000000100.jsonl.gz").write_bytes(b"")
    (tmp_path / "chain.jsonl.segments").mkdir()  # its segment still there: a leftover of an undone prune
    (tmp_path / "chain.jsonl.segments" / "0000000000000100.jsonl").write_bytes(b"")
    assert _remove_archives_from(str(chain), 0) == 1
    assert [p.name for p in folder.iterdir()] == ["\u00b2" * 16 + ".jsonl.gz"]
