"""Opening a trace file for writing: what may be written to, by whom, and where.

* Only a regular file: a FIFO, a device or a directory is refused up front (a FIFO
  with no reader would block ``open`` forever; it is opened non-blocking to check).
* One writing process per file: an exclusive ``flock`` on the open file, held for as
  long as the process writes it (``agentlog._writer.shared``), so a second process (or
  a second writer in this process, e.g. through a hard link) gets a clear error at once
  instead of two interleaved files. Writers in one process are keyed by the file's
  device and inode, not by its name.
* ``mode``: ``"x"`` (default) creates a new trace and refuses a non-empty file that
  this process did not itself record to; ``"a"`` appends runs to an existing trace
  after checking its header and that it ends on a frame boundary (a frame torn by a
  crash is cut off, with a warning; anything else that is not a clean trace is
  refused); ``"w"`` replaces the file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import warnings
from collections.abc import Callable
from typing import Literal, NamedTuple

from agentlog._digest import CHAIN_START, KeyedChain
from agentlog._errors import InstrumentationWarning, TraceFormatError, TracePathError
from agentlog._records import RunEnd, RunStart
from agentlog._trace_format import (
    FILE_HEADER,
    FILE_HEADER_SIZE,
    FORMAT_VERSION,
    FrameDecoder,
    check_file_header,
    file_header_size,
    frame_header_size,
    parse_frame_header,
)

try:  # pragma: no cover - always there on POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["Mode", "OpenedTrace", "forget", "open_trace", "remember"]

Mode = Literal["x", "a", "w"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_BINARY", 0)

# A file's chain of keyed runs (agentlog._digest): how many, the last one's digest.
Chain = tuple[int, bytes]
_NO_CHAIN: Chain = (0, CHAIN_START)



class _Left(NamedTuple):
    """How this process left a trace file it recorded to and closed."""

    size: int
    mtime_ns: int
    next_run: int
    chain: Chain
    version: int


# Files this process recorded to and closed, by (device, inode). Mode "x" lets this
# process add runs to its own file one after another, and an unchanged file is not
# scanned again.
_ours: dict[tuple[int, int], _Left] = {}
_ours_lock = threading.Lock()

# Set by agentlog._writer.shared: closes (bounded) this process's writer of the file with
# this (device, inode) that no run is using (kept open for a next run); True if it did.
release_kept: Callable[[tuple[int, int]], bool] | None = None


class OpenedTrace:
    """An open, locked trace file positioned at its end."""

    __slots__ = ("chain", "end", "fd", "fresh", "key", "next_run", "version")

    def __init__(self, fd: int, key: tuple[int, int], end: int, next_run: int,
                 fresh: bool = False, chain: Chain = _NO_CHAIN,
                 version: int = FORMAT_VERSION) -> None:
        self.fd = fd
        self.fresh = fresh  # the header was written now (a new or replaced file)
        self.key = key
        self.end = end  # bytes in the file, header included
        self.next_run = next_run  # first free run index
        self.chain = chain  # the keyed runs so far: a new keyed run continues the chain
        self.version = version  # the file's format: frames appended are written in it


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse_special(path: str, mode: int) -> TracePathError:
    return TracePathError(
        f"cannot record to {path!r}: expected a regular file (or a path that does not exist "
        f"yet), found {_kind(mode)}; pass the path of a .zst file to create"
    )


def open_trace(path: str, mode: Mode) -> OpenedTrace:
    """Open ``path`` for writing a trace, locked, positioned at its end.

    Raises:
        TracePathError: not a regular file, locked by another writer, or an existing
            trace ``mode`` does not allow touching (or that cannot be appended to).
        OSError: the file cannot be created or written (the caller warns and drops).
    """
    if isinstance(path, str) and "\0" in path:  # the OS says a bare "embedded null byte"
        raise TracePathError(
            f"cannot record to {path!r}: the path holds a NUL character, which no file name "
            "can; pass the path of a .zst file to create")
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_special(path, st.st_mode)
    try:  # non-blocking: a FIFO swapped in meanwhile fails fast
        fd = os.open(path, _FLAGS, 0o666)
    except FileNotFoundError:  # a missing folder (only then: two syscalls saved per open)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fd = os.open(path, _FLAGS, 0o666)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_special(path, st.st_mode)
        os.set_blocking(fd, True)
        key = (st.st_dev, st.st_ino)
        if not _lock(fd):
            hook = release_kept
            if hook is None or not hook(key) or not _lock(fd):  # not this process's own
                raise _held(path)                               # kept writer: another's
            st = os.fstat(fd)  # the size this process's kept writer left it at
        size = st.st_size
        ours = _ours.get(key)
        if mode == "w" or size == 0:
            if size:
                os.ftruncate(fd, 0)
            _write_header(fd)
            return OpenedTrace(fd, key, FILE_HEADER_SIZE, 0, fresh=True)
        if mode == "x" and ours is None:
            raise TracePathError(
                f"cannot record to {path!r}: it already holds {size} bytes (runs recorded "
                "earlier, or another file) and record() does not replace or extend an "
                "existing trace unless asked; pass mode='a' to add runs to it, mode='w' to "
                "replace it, or choose a new path"
            )
        if ours is not None and (ours.size, ours.mtime_ns) == (size, st.st_mtime_ns):
            left = ours  # as this process left it
        else:
            left = _scan_for_append(fd, path, size)
        os.lseek(fd, left.size, os.SEEK_SET)
        return OpenedTrace(fd, key, left.size, left.next_run, chain=left.chain,
                           version=left.version)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def remember(key: tuple[int, int], fd: int, next_run: int, size: int,
             chain: Chain = _NO_CHAIN, version: int = FORMAT_VERSION) -> None:
    """Note, before closing ``fd``, the state this process leaves its trace file in.

    ``size``: where the writer's last frame ended. A file of another size was changed by
    someone else (e.g. cut while its writer stayed open for a next run): it is forgotten,
    so the next open checks it again.
    """
    with contextlib.suppress(OSError):
        st = os.fstat(fd)
        with _ours_lock:
            if st.st_size == size:
                _ours[key] = _Left(st.st_size, st.st_mtime_ns, next_run, chain, version)
            else:
                _ours.pop(key, None)


def forget() -> None:
    """Forget every file this process recorded to (tests; a forked child)."""
    with _ours_lock:
        _ours.clear()


def _lock(fd: int) -> bool:
    """Take the exclusive lock of ``fd`` without waiting; False when another holds it."""
    if fcntl is None:  # pragma: no cover - Windows: no advisory lock
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # pragma: no cover - a filesystem without flock: write unlocked
        return True
    return True


def _held(path: str) -> TracePathError:
    return TracePathError(
        f"cannot record to {path!r}: another process is writing it (or a second open of "
        "the same file in this process, e.g. through a hard link). A trace file has one "
        "writing process at a time, which holds it until it calls al.flush() outside a "
        "run or exits; two writers would interleave two files into one unreadable trace. "
        "Record each process to its own file in one folder, e.g. "
        "al.record(f'traces/{os.getpid()}.zst'): every reader and estimator takes the "
        "folder as one trace set")


def _write_header(fd: int) -> None:
    view = memoryview(FILE_HEADER)
    while view:
        view = view[os.write(fd, view):]


def _scan_for_append(fd: int, path: str, size: int) -> _Left:
    """Check an existing trace end to end: where it ends (a torn tail cut off), its next
    free run index, its keyed chain and its format version (``mtime_ns`` unused: 0)."""
    rfd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        head = os.pread(rfd, FILE_HEADER_SIZE, 0)
        try:
            version = check_file_header(head, path=path)
        except TraceFormatError as exc:
            raise TracePathError(
                f"cannot append to {path!r}: {exc}; pass "
                "mode='w' to replace it or choose a new path"
            ) from exc
        if version is None:  # a header torn by a crash right after the file was created
            _torn(path, 0, size)
            os.ftruncate(fd, 0)
            _write_header(fd)
            return _Left(FILE_HEADER_SIZE, 0, 0, _NO_CHAIN, FORMAT_VERSION)
        offset, next_run, chain = _read_frames(rfd, path, size, file_header_size(version),
                                               version)
        if offset < size:
            _torn(path, offset, size)
            os.ftruncate(fd, offset)
        return _Left(offset, 0, next_run, chain, version)
    finally:
        os.close(rfd)


def _read_frames(rfd: int, path: str, size: int, offset: int, version: int
                 ) -> tuple[int, int, Chain]:
    """Walk the whole frames from ``offset`` (a frame boundary) towards ``size``.

    Returns where they end (a torn frame stops the walk), the next free run index and
    the file's keyed chain.

    Raises:
        TracePathError: a frame that is not a valid frame.
    """
    decoder = FrameDecoder()
    keyed = KeyedChain()
    next_run = 0
    hsize = frame_header_size(version)
    while offset < size:
        raw = os.pread(rfd, hsize, offset)
        if len(raw) < hsize:
            break  # torn inside a frame header
        try:
            header = parse_frame_header(raw, path=path, offset=offset, version=version)
        except TraceFormatError as exc:
            raise _corrupt(path, offset, exc) from exc
        payload = os.pread(rfd, header.payload_len, offset + hsize)
        if len(payload) < header.payload_len:
            break  # torn inside a payload
        try:
            records = decoder.decode_payload(payload, header, path=path, offset=offset)
        except TraceFormatError as exc:
            raise _corrupt(path, offset, exc) from exc
        for r in records:
            kind = type(r)
            if kind is RunStart and r.run >= next_run:
                next_run = r.run + 1
            elif kind is RunEnd:
                keyed.follow(r)
        offset += hsize + header.payload_len
    return offset, next_run, (keyed.count, keyed.head)


def _torn(path: str, offset: int, size: int) -> None:
    warnings.warn(
        f"{path!r} ends with a frame torn by a crash (bytes {offset} to {size}, which no "
        "reader can use); it was cut off before appending new runs",
        InstrumentationWarning,
        stacklevel=6,
    )


def _corrupt(path: str, offset: int, exc: TraceFormatError) -> TracePathError:
    return TracePathError(
        f"cannot append to {path!r}: the existing trace is corrupted at offset {offset} "
        f"({exc}); appending would bury the damage. Check it "
        "with `agentlog verify`, then pass mode='w' to replace it or choose a new path"
    )
