"""Reading trace files frame by frame: ``FrameIterator``, ``iter_frames`` and ``iter_records``.

A file that ends inside a frame (the writer was killed mid-write, or the file
is still being written) is not an error: the iterator stops after the last
complete frame and reports ``truncated=True`` with the number of bytes it
dropped. A tail of zero bytes (what some filesystems leave after a power loss)
counts as truncation too. Anything else that breaks the format raises
``TraceFormatError`` with the byte offset of the frame; the ``ReadLimits``
bound what a hostile file can make the reader allocate.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from types import TracebackType
from typing import Any, BinaryIO, NamedTuple, Union

import msgspec

from agentlog._errors import TraceFormatError
from agentlog._records import RECORD_TYPES, Record
from agentlog._trace_format import (
    FILE_HEADER_SIZE,
    FRAME_HEADER_SIZE,
    FRAME_MAGIC,
    FrameDecoder,
    ReadLimits,
    check_file_header,
    file_header_size,
    frame_header_size,
    parse_frame_header,
)
from agentlog._writer.pool import settle

__all__ = ["RECORD_VIEWS", "Frame", "FrameIterator", "iter_frames", "iter_records",
           "read_frame", "trace_sha256"]

_ZERO_CHUNK = 1 << 20


_SCALARS = (str, int, float, bool, str | None, int | None, float | None)


def _view_of(record_type: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """``record_type`` with its ``bytes`` fields as ``memoryview`` (msgspec decodes those as
    views of the frame's content, copying nothing) and its containers (metadata, a
    window's stream offsets, lists) as ``msgspec.Raw``, left undecoded: 16 MiB of empty
    msgpack lists would decode to a gigabyte of Python objects. Same tag, fields and
    defaults."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(record_type):
        kind = (memoryview if f.type is bytes else memoryview | None if f.type == bytes | None
                else f.type if f.type in _SCALARS else msgspec.Raw)
        fields.append((f.name, kind) if f.default is msgspec.NODEFAULT
                      else (f.name, kind, f.default))
    config = record_type.__struct_config__
    return msgspec.defstruct(record_type.__name__, fields, tag=config.tag,
                             tag_field=config.tag_field, array_like=True, frozen=True,
                             module=__name__)


# Record type -> its view (FrameIterator(views=True)). A view keeps its frame's content
# alive: copy what outlives the frame (``bytes(view)``).
RECORD_VIEWS: dict[type, type] = {t: _view_of(t) for t in RECORD_TYPES}
_VIEW_UNION: Any = Union[tuple(RECORD_VIEWS.values())]  # noqa: UP007 - built at run time


class Frame(NamedTuple):
    """One decoded frame: where it starts in the file and its records.

    ``raws`` holds each record's exact msgpack bytes and ``payload`` the frame's
    compressed bytes when the iterator was asked for them (``iter_frames(path,
    raw=True)``; what ``verify`` hashes), else None.
    """

    offset: int
    payload_len: int
    records: list[Any]
    raws: list[msgspec.Raw] | None = None
    payload: bytes | None = None


def trace_path(path: Any, who: str) -> str:
    """``os.fspath(path)`` of a trace file's path, else a ``TypeError`` saying what ``who``
    (``"al.read"``, ...) takes and what it was given."""
    if isinstance(path, str | os.PathLike):
        return os.fspath(path)
    from agentlog._trace import Trace  # the message needs it; reading does not

    if isinstance(path, Trace):
        found = ("a Trace, a trace already read: use it as it is, or pass the file it was "
                 "read from (trace.path)")
    else:
        found = f"{type(path).__qualname__} {path!r:.60}"
    raise TypeError(f"{who} takes the path of a trace file (a str or os.PathLike, e.g. "
                    f"'runs/t1.zst'); found {found}")


def _open_for_reading(path: str) -> BinaryIO:
    """``open(path, "rb")`` of a regular file, the one way agentlog opens a trace to read
    it: a named pipe, a socket or a device is refused at once (a plain open of a pipe
    nobody writes to waited for a writer forever; /dev/zero never ends)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        # As open() says it (errno, filename), plus where it looked and what to do.
        where = "" if os.path.isabs(path) else f" (relative to {os.getcwd()})"
        raise FileNotFoundError(
            errno.ENOENT, f"no such trace file{where}; check the path, or record the run "
            "first with al.record(path)", path) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # as open() says it, naming the path (not the descriptor)
            raise IsADirectoryError(
                errno.EISDIR, f"{os.strerror(errno.EISDIR)}, not a trace file; read the "
                "traces in a folder with al.read_traces(folder) or al.iter_runs(folder)",
                path)
        if not stat.S_ISREG(mode):
            kind = ("named pipe" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
                    else "character device" if stat.S_ISCHR(mode)
                    else "block device" if stat.S_ISBLK(mode) else "special file")
            raise TraceFormatError(
                f"expected a trace file, found a {kind}; a reader checks and seeks in the "
                "file it reads (a pipe or a device may never end): write the trace to a "
                "file first", path=path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def trace_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 (hex) of a trace file's bytes, as estimators record their inputs.

    The file is opened as every reader opens it (a regular file, never a pipe or a
    device) and its header is checked before any byte is hashed, so a file that is not a
    trace is refused at once instead of hashed whole.

    Raises:
        TraceFormatError: not a regular file, or not an agentlog trace (bad magic).
        OSError: the file cannot be read.
    """
    where = trace_path(path, "trace_sha256")
    h = hashlib.sha256()
    with _open_for_reading(where) as f:
        head = f.read(FILE_HEADER_SIZE)
        if head:
            check_file_header(head, path=where)
        h.update(head)
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class FrameIterator(Iterator[Frame]):
    """Streams the frames of a trace file; ``iter_frames(path)`` returns one.

    Once exhausted it tells how the file ended: ``truncated`` (the file ends
    inside its header or inside a frame), ``bytes_dropped`` (bytes after the
    last complete frame) and ``end_offset`` (where that frame ends).

    Args:
        path: the trace file.
        limits: the bounds past which a file is called hostile (``ReadLimits``).
        raw: also give each record's exact bytes and the frame's compressed bytes
            (``Frame.raws``, ``Frame.payload``).
        views: give the records as their ``RECORD_VIEWS`` (``bytes`` fields as zero-copy
            ``memoryview`` objects over the frame, containers as undecoded
            ``msgspec.Raw``): one copy of its data less in memory, and no metadata decoded.

    Raises:
        TraceFormatError: for anything in the file that is not a truncated tail.
        OSError: when the file cannot be opened or read.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, limits: ReadLimits | None = None,
        raw: bool = False, views: bool = False,
    ) -> None:
        self.path = trace_path(path, "FrameIterator")
        self._raw = raw
        self.format_version: int | None = None
        self.truncated = False
        self.bytes_dropped = 0
        self.end_offset = 0
        self.frames = 0
        self.records = 0
        self.done = False
        self.limits = limits if limits is not None else ReadLimits()
        self._decoder = FrameDecoder(self.limits, record_type=_VIEW_UNION if views else None)
        settle(self.path)  # a run this process just left may still be in its writer's queue
        self._file: BinaryIO | None = _open_for_reading(self.path)
        self._offset = 0
        self._size = 0
        self._hsize = FRAME_HEADER_SIZE  # of the file's format version, once known
        self._empty: tuple[bytes, int] | None = None
        self._empty_frame: bytes | None = None  # header + payload of the last empty frame

    def __iter__(self) -> FrameIterator:
        return self

    def __next__(self) -> Frame:
        f = self._file
        if f is None:
            raise StopIteration
        try:
            return self._next_frame(f)
        except BaseException:
            self._close()
            raise

    def _next_frame(self, f: BinaryIO) -> Frame:
        path = self.path
        if self.format_version is None:
            head = f.read(FILE_HEADER_SIZE)
            version = check_file_header(head, path=path)
            if version is None:
                self._finish(truncated=True, good=0)
                raise StopIteration
            self.format_version = version
            self._hsize = frame_header_size(version)
            self._offset = self.end_offset = file_header_size(version)
            f.seek(self._offset)  # within the read buffer: no system call
        offset = self._offset
        hsize = self._hsize
        repeat = self._empty_frame
        if repeat is not None:
            # A file of many empty frames (never written by agentlog; a hostile or damaged
            # file) repeats the same bytes: one read and one comparison per frame, the
            # header and the payload having been checked the first time.
            chunk = f.read(len(repeat))
            if chunk == repeat:
                self._offset = self.end_offset = offset + len(repeat)
                self.frames += 1
                if self._raw:
                    return Frame(offset, len(repeat) - hsize, [], [], repeat[hsize:])
                return Frame(offset, len(repeat) - hsize, [])
            self._empty_frame = None
            f.seek(offset)  # within the read buffer: no system call
        head = f.read(hsize)
        if len(head) < hsize:
            self._finish(truncated=bool(head), good=offset)
            raise StopIteration
        try:
            header = parse_frame_header(head, path=path, offset=offset, limits=self.limits,
                                        version=self.format_version)
        except TraceFormatError:
            if self._rest_is_zero(f, head):
                self._finish(truncated=True, good=offset)
                raise StopIteration from None
            raise
        need = header.payload_len
        # Never allocate more than the file holds: a hostile length meets a short file.
        # The size is looked up again only when it seems short (the file may be growing).
        if self._size - offset - hsize < need:
            self._size = os.fstat(f.fileno()).st_size
            if self._size - offset - hsize < need:
                self._finish(truncated=True, good=offset)
                raise StopIteration
        payload = f.read(need)
        if len(payload) < need:  # pragma: no cover - the file shrank under us
            self._finish(truncated=True, good=offset)
            raise StopIteration
        records: list[Any]
        raws: list[msgspec.Raw] | None = None
        if not header.n_records and (payload, header.payload_crc) == self._empty:
            # The very payload of the last empty frame, already checked: a file of many
            # empty frames (never written by agentlog) costs a comparison per frame.
            records, raws = [], ([] if self._raw else None)
        elif self._raw:
            records, raws = self._decoder.decode_payload_raw(payload, header, path=path,
                                                             offset=offset)
        else:
            records = self._decoder.decode_payload(payload, header, path=path, offset=offset)
        if not header.n_records:
            self._empty = (payload, header.payload_crc)
            self._empty_frame = head + payload
        self._offset = self.end_offset = offset + hsize + need
        self.frames += 1
        self.records += len(records)
        return Frame(offset, need, records, raws, payload if self._raw else None)

    def _rest_is_zero(self, f: BinaryIO, head: bytes) -> bool:
        if head.count(0) != len(head):
            return False
        fd = f.fileno()
        pos = self._offset + self._hsize
        size = os.fstat(fd).st_size
        seek_data = getattr(os, "SEEK_DATA", None)
        pread = getattr(os, "pread", None)
        if pread is None:  # pragma: no cover - Windows: read what is left
            while chunk := f.read(_ZERO_CHUNK):
                if chunk.count(0) != len(chunk):
                    return False
            return True
        # A zero tail is often a hole (a sparse file, a preallocated extent): skip the
        # holes by seeking, so a 10 GiB hole costs two system calls, not 10 GiB of reads.
        while pos < size:
            end = size
            if seek_data is not None:
                try:
                    pos = os.lseek(fd, pos, seek_data)
                    end = os.lseek(fd, pos, os.SEEK_HOLE)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # nothing but holes after pos
                        return True
                    seek_data = None  # the filesystem cannot tell: read every byte
                    continue
            while pos < end:
                chunk = pread(fd, min(_ZERO_CHUNK, end - pos), pos)
                if not chunk:
                    return True  # the file shrank under us: what was there was zeros
                if chunk.count(0) != len(chunk):
                    return False
                pos += len(chunk)
        return True

    def _finish(self, *, truncated: bool, good: int) -> None:
        f = self._file
        assert f is not None
        size = f.seek(0, os.SEEK_END)
        self.truncated = truncated
        self.end_offset = good
        self.bytes_dropped = size - good
        self.done = True
        self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        """Stop early and close the file."""
        self._close()

    def __enter__(self) -> FrameIterator:
        return self

    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close()


def iter_frames(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None, raw: bool = False
) -> FrameIterator:
    """Stream the frames of a trace; the iterator reports truncation when exhausted.

    Memory stays bounded by one frame (``limits.max_frame_records`` records at most),
    whatever the size of the file. ``raw=True`` also gives each record's bytes.
    """
    return FrameIterator(trace_path(path, "al.iter_frames"), limits=limits, raw=raw)


def iter_records(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None
) -> Iterator[Record]:
    """Stream the records of a trace in file order (a truncated tail ends the stream).

    The streaming counterpart of ``read``: one frame is decoded at a time, so memory
    stays bounded by a frame, whatever the size of the file. Use ``iter_frames`` to
    learn, once it is exhausted, whether the file was truncated.

    Examples:
        >>> import agentlog as al
        >>> with al.record("agentlog-iter-doc.zst", seed=1):
        ...     al.score("f1", 0.5)
        >>> [type(r).__name__ for r in al.iter_records("agentlog-iter-doc.zst")]
        ['RunStart', 'Score', 'RunEnd']

    Raises:
        TraceFormatError, OSError: as ``read``, when the stream reaches the problem.
    """
    with FrameIterator(trace_path(path, "al.iter_records"), limits=limits) as frames:
        for frame in frames:
            yield from frame.records


def read_frame(f: BinaryIO, offset: int, *, path: str, limits: ReadLimits | None = None
               ) -> list[Any]:
    """The records of the one frame that starts at ``offset`` of the open file ``f``.

    For a reader that let a frame go and needs it again (``verify`` reads a candidate
    pool back when its bounded cache no longer holds it): ``offset`` is a frame start an
    iterator reported (``Frame.offset``). Every check of ``FrameIterator`` applies,
    with this frame alone counted against the file ratios of ``limits``.

    Raises:
        TraceFormatError: no complete, valid frame starts at ``offset``.
    """
    f.seek(offset)
    limits = limits if limits is not None else ReadLimits()
    head = f.read(FRAME_HEADER_SIZE)
    # The format version from the frame itself: a version-1 header never starts with the
    # skippable-frame magic (as its payload length it is over MAX_FRAME_PAYLOAD).
    version = 2 if head[:4] == FRAME_MAGIC.to_bytes(4, "little") else 1
    hsize = frame_header_size(version)
    header, payload = None, b""
    if len(head) >= hsize:
        header = parse_frame_header(head[:hsize], path=path, offset=offset, limits=limits,
                                    version=version)
        f.seek(offset + hsize)
        payload = f.read(header.payload_len)
    if header is None or len(payload) != header.payload_len:
        raise TraceFormatError("expected a complete frame here, found the end of the file "
                               "(the file changed while it was read)", path=path, offset=offset)
    return FrameDecoder(limits).decode_payload(payload, header, path=path, offset=offset)
