"""File-system primitives the store relies on: no-follow bounded reads, durable atomic writes, a lock.

Kept apart from the store's logic so the durability argument can be read in one place: a write is a
temporary file in the target's directory, ``fsync``, a rename (or a hard link when the name must not
already exist), then an ``fsync`` of the directory, so after a crash the name holds either the old
bytes or the new ones, never a prefix.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator

from otel_route_shadow.locking import flock_within

__all__ = [
    "ReadFailure",
    "StatKey",
    "atomic_write",
    "exclusive_lock",
    "fsync_directory",
    "read_regular_file",
    "shared_lock",
    "stat_key",
]

StatKey = tuple[int, int, int, int, int, int] | tuple[str, int] | None
"""(dev, ino, mode, size, mtime_ns, ctime_ns), ("error", errno), or None when the path is absent."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TRANSIENT_ERRNOS = frozenset(
    {errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR, errno.EAGAIN}
)


class ReadFailure(Exception):
    """A file that exists but cannot be taken as a snapshot.

    ``transient`` marks failures that say nothing about the file's content (too many open files, an
    I/O error): the store must not cache them, or one bad moment would hold every decision until
    something else touched the directory.
    """

    def __init__(self, kind: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.transient = transient


def stat_key(path: str, *, follow: bool = False) -> StatKey:
    """What the cheap-reload signature compares; ctime is in it because no user can set it."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return ("error", exc.errno or 0)
    except ValueError:  # a NUL in the path: load() must stay total, so this is a stable "error"
        return ("error", 0)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """Read a regular file without following a symlink, bounded before reading a byte.

    ``FileNotFoundError`` passes through (absence is a state, not a failure); every other problem is
    a :class:`ReadFailure`. ``O_NONBLOCK`` keeps a FIFO planted at the path from hanging the reader.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReadFailure("not-a-regular-file", "is a symbolic link; refusing to follow it") from None
        raise ReadFailure(
            "unreadable",
            f"cannot open: {exc.strerror or type(exc).__name__}",
            transient=exc.errno in _TRANSIENT_ERRNOS,
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ReadFailure("not-a-regular-file", f"is {kind}")
        if st.st_size > max_bytes:
            raise ReadFailure("too-large", f"is {st.st_size} bytes, larger than the {max_bytes}-byte limit")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise ReadFailure("too-large", f"grew beyond the {max_bytes}-byte limit while being read")
        return data
    except OSError as exc:
        raise ReadFailure(
            "unreadable",
            f"cannot read: {exc.strerror or type(exc).__name__}",
            transient=exc.errno in _TRANSIENT_ERRNOS,
        ) from None
    finally:
        os.close(fd)


def fsync_directory(directory: str) -> None:
    """Make a rename or link durable: the directory entry lives in the directory's own blocks."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(directory: str, name: str, data: bytes, *, exclusive: bool) -> None:
    """Write ``directory/name`` so that it holds all of ``data`` or its previous content.

    ``exclusive`` publishes with ``link`` so an existing name is never replaced (history revisions
    are immutable); otherwise ``rename`` replaces it atomically (the current snapshot).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{name}-", dir=directory)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        final = os.path.join(directory, name)
        if exclusive:
            os.link(tmp, final)
            os.unlink(tmp)
        else:
            os.replace(tmp, final)
        fsync_directory(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _flock_within(fd: int, mode: int, timeout: float, poll: float) -> None:
    """Take ``mode`` on ``fd``, polling until ``timeout``: a hung writer becomes an error, not a hang."""
    if not flock_within(fd, mode, timeout, poll):
        raise TimeoutError(f"could not lock the store within {timeout:g} s")


@contextlib.contextmanager
def exclusive_lock(path: str, timeout: float) -> Iterator[None]:
    """``flock`` on a lock file: serialises writers across processes and across threads.

    Each call opens its own descriptor, and ``flock`` locks belong to the open file description, so
    two threads of one process exclude each other as two processes do. Polling with a deadline turns
    a hung writer into an error instead of a hung processor.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        _flock_within(fd, fcntl.LOCK_EX, timeout, 0.005)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def shared_lock(path: str, timeout: float) -> Iterator[None]:
    """Wait out any writer holding :func:`exclusive_lock`, for a reader that needs a stable view.

    Opens read-only and never creates the file: a reader may lack write access, and a missing lock
    file means no writer has ever started here.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        yield
        return
    try:
        _flock_within(fd, fcntl.LOCK_SH, timeout, 0.002)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
