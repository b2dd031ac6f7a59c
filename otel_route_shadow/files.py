"""Opening, reading and writing files that may be hostile, and writing them durably.

Shell code shared by every folder. Every file the plugin or the command line reads may be a FIFO, a
device, a directory, a symbolic link, huge or still growing:

* :func:`open_regular` opens without blocking (``O_NONBLOCK``: a FIFO with no writer cannot hang the
  caller) and refuses anything :func:`os.fstat` does not call a regular file before a byte is read;
* :func:`read_regular` adds a bound checked before and while reading.

Every write that replaces a file goes through :func:`write_atomic`: a temporary file in the target's
directory, every byte written (:func:`write_all` checks short writes), ``fsync``, a rename (or a hard link
when an existing name must never be replaced), then an ``fsync`` of the directory. After a crash or a
power cut the name holds the old bytes or the new ones, never a prefix or nothing. Temporary files carry
:data:`TEMPORARY_MARK` and the writer's pid, so :func:`remove_temporaries` can clear what a killed writer
left behind without touching a live writer's file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal

__all__ = [
    "TEMPORARY_MARK",
    "FileKind",
    "FileRefused",
    "check_regular",
    "file_identity",
    "file_kind",
    "fsync_directory",
    "open_beneath",
    "open_folder_beneath",
    "open_regular",
    "range_blocks",
    "read_beneath",
    "read_newest",
    "read_regular",
    "read_text",
    "remove_temporaries",
    "write_all",
    "write_atomic",
]

TEMPORARY_MARK: Final = ".tmp-"
"""In the name of every temporary file :func:`write_atomic` creates: ``.<name>.tmp-<pid>-<random>``."""

_MAX_PID: Final = 2**31 - 1
"""The largest pid a process can have (``pid_t`` is 32 bits; Linux allows at most 2**22)."""
_PID_DIGITS: Final = re.compile(r"[0-9]{1,10}")

_TRANSIENT_ERRNOS: Final = frozenset(
    {errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR, errno.EAGAIN}
)

FileKind = Literal["not-regular", "symlink", "too-large", "unreadable", "not-utf8", "too-open"]


class FileRefused(OSError):
    """A file that exists but cannot be taken: not a regular file, a symbolic link where none may be,
    larger than allowed, unreadable, or not UTF-8. The message is one line naming the path; it never
    holds the file's content.

    ``transient`` marks failures that say nothing about the file (too many open files, an I/O error):
    a caller that caches what it read must not cache them.
    """

    def __init__(self, path: str, kind: FileKind, problem: str, *, transient: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.kind: FileKind = kind
        self.problem = problem
        self.transient = transient

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words: ``a directory``, ``a FIFO``, ``a device`` ..."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "a special file"


def open_regular(
    path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o644, *, follow_symlinks: bool = True
) -> int:
    """Open ``path`` and return the descriptor, refusing anything but a regular file.

    ``O_NONBLOCK`` and ``O_CLOEXEC`` are added to ``flags`` (``O_NOFOLLOW`` too without
    ``follow_symlinks``); the ``fstat`` check runs before the descriptor is used. ``FileNotFoundError``
    passes through (absence is a state, not a refusal); a directory, a FIFO, a device or a socket is a
    :class:`FileRefused` of kind ``not-regular``, a symbolic link without ``follow_symlinks`` one of
    kind ``symlink``, any other failure one of kind ``unreadable``.
    """
    source = os.fspath(path)
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(source, flags | extra, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refusal(source, exc) from None
    except ValueError:  # a NUL in the path
        raise FileRefused(source, "unreadable", "not a usable path") from None
    return check_regular(fd, source)


def check_regular(fd: int, source: str) -> int:
    """``fd`` when :func:`os.fstat` calls it a regular file; else it is closed and refused (a
    :class:`FileRefused` of kind ``not-regular``, saying ``is a directory`` or what it is instead)."""
    try:
        st_mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(st_mode):
            raise FileRefused(source, "not-regular", "is a directory")
        if not stat.S_ISREG(st_mode):
            raise FileRefused(source, "not-regular", f"is {file_kind(st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_beneath(directory: str | os.PathLike[str], relative: str) -> int:
    """Open the regular file ``relative`` (``/``-separated) below ``directory`` for reading, following
    no symbolic link below ``directory``: its folder is opened as :func:`open_folder_beneath` opens it,
    the file relative to it with ``O_NOFOLLOW``, so neither a planted link nor ``..`` can lead out of it.

    ``FileNotFoundError`` passes through; an empty, ``.`` or ``..`` component, a link anywhere below
    ``directory`` or anything but a regular file at the end is a :class:`FileRefused`.
    """
    source = os.path.join(os.fspath(directory), relative)
    folder, _, name = relative.rpartition("/")
    if name in ("", ".", "..") or "\0" in name:
        raise FileRefused(source, "unreadable", "not a path below its directory")
    parent = open_folder_beneath(directory, folder, source=source)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refusal(source, exc) from None
    finally:
        os.close(parent)
    return check_regular(fd, source)


def _refusal(path: str, exc: OSError) -> FileRefused:
    if exc.errno == errno.ELOOP:
        return FileRefused(path, "symlink", "is a symbolic link; refusing to follow it")
    if exc.errno == errno.EISDIR:
        return FileRefused(path, "not-regular", "is a directory")
    if exc.errno == errno.ENOTDIR:
        return FileRefused(path, "not-regular", "a part of the path is not a directory")
    reason = exc.strerror or type(exc).__name__
    return FileRefused(path, "unreadable", f"cannot open: {reason}", transient=exc.errno in _TRANSIENT_ERRNOS)


def read_regular(
    path: str | os.PathLike[str], max_bytes: int, *, follow_symlinks: bool = True, private: bool = False
) -> bytes:
    """All of a regular file of at most ``max_bytes`` bytes (see :func:`open_regular`).

    A file whose size is over the bound is refused before a byte is read, and one that grows past it
    while being read is refused too (kind ``too-large``). With ``private`` (a secret such as a signing
    key), a file that its group or others may read or write is refused before a byte is read (kind
    ``too-open``), as ssh refuses such a private key; the mode is taken from the open descriptor.
    """
    source = os.fspath(path)
    fd = open_regular(source, follow_symlinks=follow_symlinks)
    return _read_bounded(fd, source, max_bytes, private=private)


def read_newest(
    path: str | os.PathLike[str], max_bytes: int, start: int = 0, seen: bytes = b""
) -> tuple[bytes, int]:
    """The newest lines of an append-only regular file (see :func:`open_regular`) from byte ``start`` (a
    line start; from 0 when the file is shorter, or does not hold ``seen``, the bytes the caller read
    before ``start``, there: it was replaced): all of them when they are at most ``max_bytes`` bytes,
    else the last ``max_bytes`` bytes from the first line that begins in them; and the position of the
    first byte returned (the bytes before it were not read)."""
    source = os.fspath(path)
    fd = open_regular(source)
    try:
        size = os.fstat(fd).st_size
        if start > size or (seen and os.pread(fd, len(seen), start - len(seen)) != seen):
            start = 0
    except OSError as exc:
        os.close(fd)
        raise _refusal(source, exc) from None
    if start == 0 and size <= max_bytes:
        return _read_bounded(fd, source, max_bytes), 0
    begin = max(start, size - max_bytes)
    try:
        window = b"".join(range_blocks(fd, begin, size))
    except OSError as exc:
        raise _refusal(source, exc) from None
    finally:
        os.close(fd)
    if begin == start:
        return window, begin
    cut = window.find(b"\n") + 1  # 0: one line longer than the bound, none of it read
    return (window[cut:], begin + cut) if cut else (b"", size)


def range_blocks(fd: int, start: int, end: int, block_bytes: int = 1 << 20) -> Iterator[bytes]:
    """The bytes ``[start, end)`` of the file open at ``fd`` in blocks of at most ``block_bytes`` (``pread``:
    the file's position untouched), for ``write_atomic``; fewer when the file ends before ``end``."""
    while start < end and (block := os.pread(fd, min(block_bytes, end - start), start)):
        yield block
        start += len(block)


def read_beneath(directory: str | os.PathLike[str], relative: str, max_bytes: int) -> bytes:
    """All of the regular file ``relative`` below ``directory`` (see :func:`open_beneath`: no link
    below ``directory`` is followed), of at most ``max_bytes`` bytes (as :func:`read_regular`)."""
    fd = open_beneath(directory, relative)
    return _read_bounded(fd, os.path.join(os.fspath(directory), relative), max_bytes)


def _read_bounded(fd: int, source: str, max_bytes: int, *, private: bool = False) -> bytes:
    """Read all of ``fd`` (closed here), refusing more than ``max_bytes`` bytes (and, with ``private``,
    a file its group or others may read)."""
    try:
        st = os.fstat(fd)
        if private and st.st_mode & 0o077:
            raise FileRefused(
                source,
                "too-open",
                f"permissions {stat.S_IMODE(st.st_mode):04o} are too open: group or others may read it "
                f"(chmod 600 {source})",
            )
        size = st.st_size
        if size > max_bytes:
            raise FileRefused(source, "too-large", f"larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        if isinstance(exc, FileRefused):
            raise
        reason = exc.strerror or type(exc).__name__
        raise FileRefused(
            source, "unreadable", f"cannot read: {reason}", transient=exc.errno in _TRANSIENT_ERRNOS
        ) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise FileRefused(source, "too-large", f"larger than {max_bytes} bytes (it grew while being read)")
    return data


def read_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """:func:`read_regular`, decoded as strict UTF-8 (kind ``not-utf8`` otherwise, naming the byte)."""
    data = read_regular(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(os.fspath(path), "not-utf8", f"not UTF-8 (byte {exc.start})") from None


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``, continuing after short writes.

    A write that makes no progress raises ``OSError(ENOSPC)``: the caller learns the data is not all
    there instead of leaving a torn file behind unnoticed.
    """
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The (device, inode) of the file at ``path`` (a link followed), None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename, a link or an unlink in ``directory`` durable (the entry lives in its blocks)."""
    fd = os.open(os.fspath(directory) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    mode: int = 0o644,
    exclusive: bool = False,
    dir_fd: int | None = None,
) -> None:
    """Replace ``path`` with ``data`` durably: after a crash it holds all of ``data`` or what it held.

    ``data`` is the bytes, or an iterable of blocks for content too large to hold at once. The
    temporary file is created beside the target (``O_EXCL``, ``mode`` less the umask, as every file the
    package creates: an operator's umask 077 is kept), written in full, synced,
    then renamed over the target; with ``exclusive`` it is hard-linked instead, so an existing name is
    never replaced (``FileExistsError``). The directory is synced last. On any failure the temporary
    file is removed and the error raised.

    ``dir_fd``: the folder ``path`` is in, already open (:func:`open_folder_beneath`): the temporary
    file, the rename and the sync are made relative to it under the last component of ``path``, so no
    folder of ``path`` is looked up again (nothing can be redirected through a link swapped in).
    """
    target = os.fspath(path)
    directory, name = os.path.split(target)
    tmp = f".{name}{TEMPORARY_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    at: dict[str, Any] = {}  # without dir_fd, the very calls of a plain path (tests replace os.replace)
    both: dict[str, Any] = {}
    if dir_fd is None:
        tmp = os.path.join(directory, tmp)
    else:
        target, at, both = name, {"dir_fd": dir_fd}, {"src_dir_fd": dir_fd, "dst_dir_fd": dir_fd}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, **at)
    try:
        try:
            for block in (data,) if isinstance(data, bytes) else data:
                write_all(fd, block)
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, target, **both)
            os.unlink(tmp, **at)
        else:
            os.replace(tmp, target, **both)
        if dir_fd is None:
            fsync_directory(directory)
        else:
            os.fsync(dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, **at)
        raise


def remove_temporaries(directory: str | os.PathLike[str]) -> int:
    """Remove the temporary files :func:`write_atomic` left in ``directory`` (not below it) when its
    writer was killed: those whose pid is not a live process, and this process's own. A name whose pid
    no process can have (not ASCII digits, or over :data:`_MAX_PID`) was not written by
    :func:`write_atomic` and is left alone. Returns how many were removed; never raises."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        pid = _temporary_owner(name)
        if pid is None or (pid != os.getpid() and _alive(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))
            removed += 1
    return removed


def _temporary_owner(name: str) -> int | None:
    """The pid in a temporary file's name, None for any other name (a pid is at most ten ASCII
    digits, and at most :data:`_MAX_PID`)."""
    if not name.startswith(".") or TEMPORARY_MARK not in name:
        return None
    owner = name.rsplit(TEMPORARY_MARK, 1)[1].split("-", 1)[0]
    if _PID_DIGITS.fullmatch(owner) is None or int(owner) > _MAX_PID:
        return None
    return int(owner)


def _alive(pid: int) -> bool:
    """Whether ``pid`` may be a live process: True unless the system says there is none."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # it exists but belongs to someone else, or cannot be asked about: keep its file
    return True


def open_folder_beneath(
    directory: str | os.PathLike[str], relative: str, *, create: bool = False, source: str | None = None
) -> int:
    """A descriptor (``O_DIRECTORY``) of the folder ``relative`` (``/``-separated, ``""``: ``directory``
    itself) below ``directory``, following no symbolic link below ``directory``: each component is
    opened relative to its parent with ``O_NOFOLLOW``, as in :func:`open_beneath`. With ``create``, a
    missing component is made relative to its parent (``mkdir`` never follows a link at its name) and
    ``directory`` itself with :func:`os.makedirs`.

    ``FileNotFoundError`` passes through; an empty, ``.`` or ``..`` component, a link anywhere below
    ``directory`` or anything but a folder on the way is a :class:`FileRefused`, and nothing is made
    beyond it (named ``source``, the folder's path unless given).
    """
    source = source or os.path.join(os.fspath(directory), relative)
    parts = relative.split("/") if relative else []
    if any(part in ("", ".", "..") or "\0" in part for part in parts):
        raise FileRefused(source, "unreadable", "not a path below its directory")
    if create:
        os.makedirs(directory, exist_ok=True)
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refusal(source, exc) from None
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise _refusal(source, _link_as_loop(exc, part, fd)) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _link_as_loop(exc: OSError, name: str, parent: int) -> OSError:
    """``exc`` from opening ``name`` with ``O_NOFOLLOW | O_DIRECTORY`` (``ENOTDIR`` for a link, too),
    as ``ELOOP`` when ``name`` is a link, so the refusal says so."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            return OSError(errno.ELOOP, os.strerror(errno.ELOOP))
    return exc
