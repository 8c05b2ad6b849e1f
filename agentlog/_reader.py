"""Reading trace files: a streaming frame reader, ``read()`` and the ``Trace`` object.

Example::

    >>> from agentlog._records import Score
    >>> from agentlog._writer import TraceWriter
    >>> from agentlog._reader import read
    >>> with TraceWriter("agentlog-reader-doctest.zst") as w:
    ...     w.put(Score(run=0, window=-1, name="f1", value=0.83))
    >>> trace = read("agentlog-reader-doctest.zst")
    >>> [(s.name, s.value) for s in trace.scores()], trace.truncated
    ([('f1', 0.83)], False)

A file that ends inside a frame (the writer was killed mid-write, or the file
is still being written) is not an error: ``read`` returns every record of the
complete frames before the cut and reports ``truncated=True`` with the number
of bytes it dropped. A tail of zero bytes (what some filesystems leave after a
power loss) counts as truncation too. Anything else that breaks the format
raises ``TraceFormatError`` with the byte offset of the frame. Reading never
executes code from the file: records are msgpack decoded into fixed types.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, NamedTuple, Union

import msgspec

from agentlog._errors import MissingDependencyError, TraceFormatError
from agentlog._records import (
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_OK,
    Blob,
    Continuation,
    LLMCall,
    Record,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)
from agentlog._trace_format import (
    FILE_HEADER_SIZE,
    FRAME_HEADER_SIZE,
    FrameDecoder,
    ReadLimits,
    check_file_header,
    parse_frame_header,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "BlobNotFoundError",
    "Frame",
    "FrameIterator",
    "RunView",
    "Trace",
    "Transition",
    "WindowView",
    "decode_pool",
    "draws",
    "iter_frames",
    "iter_records",
    "policy_probs",
    "probs",
    "raw_probs",
    "read",
    "read_traces",
]

ArrowKind = Literal[
    "windows", "selections", "continuations", "scores", "runs", "llm_calls", "tool_calls"
]

_ZERO_CHUNK = 1 << 20


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

    Raises:
        TraceFormatError: for anything in the file that is not a truncated tail.
        OSError: when the file cannot be opened or read.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, limits: ReadLimits | None = None,
        raw: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self._raw = raw
        self.format_version: int | None = None
        self.truncated = False
        self.bytes_dropped = 0
        self.end_offset = 0
        self.frames = 0
        self.records = 0
        self.done = False
        self.limits = limits if limits is not None else ReadLimits()
        self._decoder = FrameDecoder(self.limits)
        self._file: BinaryIO | None = open(self.path, "rb")  # noqa: SIM115 - closed in _finish
        self._offset = 0
        self._size = 0
        self._empty: tuple[bytes, int] | None = None

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
            self._offset = self.end_offset = FILE_HEADER_SIZE
        offset = self._offset
        head = f.read(FRAME_HEADER_SIZE)
        if len(head) < FRAME_HEADER_SIZE:
            self._finish(truncated=bool(head), good=offset)
            raise StopIteration
        try:
            header = parse_frame_header(head, path=path, offset=offset, limits=self.limits)
        except TraceFormatError:
            if self._rest_is_zero(f, head):
                self._finish(truncated=True, good=offset)
                raise StopIteration from None
            raise
        need = header.payload_len
        # Never allocate more than the file holds: a hostile length meets a short file.
        # The size is looked up again only when it seems short (the file may be growing).
        if self._size - offset - FRAME_HEADER_SIZE < need:
            self._size = os.fstat(f.fileno()).st_size
            if self._size - offset - FRAME_HEADER_SIZE < need:
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
        self._offset = self.end_offset = offset + FRAME_HEADER_SIZE + need
        self.frames += 1
        self.records += len(records)
        return Frame(offset, need, records, raws, payload if self._raw else None)

    def _rest_is_zero(self, f: BinaryIO, head: bytes) -> bool:
        if head.count(0) != len(head):
            return False
        fd = f.fileno()
        pos = self._offset + FRAME_HEADER_SIZE
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
    return FrameIterator(path, limits=limits, raw=raw)


def iter_records(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None
) -> Iterator[Record]:
    """Stream the records of a trace in file order (a truncated tail ends the stream).

    The streaming counterpart of ``read``: one frame is decoded at a time, so memory
    stays bounded by a frame, whatever the size of the file. Use ``iter_frames`` to
    learn, once it is exhausted, whether the file was truncated.

    Example:
        >>> import agentlog as al
        >>> with al.record("agentlog-iter-doc.zst", seed=1):
        ...     al.score("f1", 0.5)
        >>> [type(r).__name__ for r in al.iter_records("agentlog-iter-doc.zst")]
        ['RunStart', 'Score', 'RunEnd']

    Raises:
        TraceFormatError, OSError: as ``read``, when the stream reaches the problem.
    """
    with FrameIterator(path, limits=limits) as frames:
        for frame in frames:
            yield from frame.records


def read(path: str | os.PathLike[str], *, limits: ReadLimits | None = None) -> Trace:
    """Read a whole trace file into memory.

    Every record is kept in memory (``Trace.records``, plus an index built on first
    use): a file of 1 M small records takes a few hundred MB. To go through a large
    trace in bounded memory, stream it with ``al.iter_records(path)`` (records) or
    ``al.iter_frames(path)`` (frames, with the truncation report); ``al.verify`` and
    ``agentlog inspect``/``verify`` stream.

    Args:
        path: the trace file.
        limits: the bounds past which the file is called hostile (``ReadLimits``).

    Returns:
        A ``Trace``; ``trace.truncated`` tells whether the file ended inside a frame.

    Raises:
        TraceFormatError: the file is not a valid agentlog trace (bad magic,
            newer format version, failed checksum, undecodable record, ...).
        OSError: the file cannot be opened.
    """
    records: list[Any] = []
    with FrameIterator(path, limits=limits) as frames:
        extend = records.extend
        for frame in frames:
            extend(frame.records)
    return Trace(
        path=frames.path,
        records=records,
        truncated=frames.truncated,
        bytes_dropped=frames.bytes_dropped,
        frames=frames.frames,
        format_version=frames.format_version,
    )


TraceSource = Union["Trace", str, os.PathLike[str]]


def read_traces(source: TraceSource | Iterable[TraceSource], *, name: str = "traces"
                ) -> list[Trace]:
    """Every trace named by ``source``: a ``Trace``, a trace file, a folder (every ``*.zst``
    below it, in sorted order) or an iterable of those. The one loader the estimators share.

    Every file is read whole (``read``); ``iter_runs`` goes through the same sources one
    run at a time, in bounded memory.

    Raises:
        ValueError: ``source`` is empty, a folder holds no trace, or an item is neither a
            path nor a Trace (the message names the parameter ``name``).
        TraceFormatError, OSError: as ``read`` (a missing file is a FileNotFoundError).
    """
    return [item if isinstance(item, Trace) else read(item)
            for item in _trace_sources(source, name)]


def _trace_sources(source: TraceSource | Iterable[TraceSource], name: str
                   ) -> Iterator[Trace | Path]:
    """The Traces and trace files named by ``source``, resolved lazily in order (so a
    missing file is reported after the files before it were read, as ``read_traces``
    always did)."""
    expected = (f"`{name}` must be a trace path, a Trace, a folder or a non-empty sequence of "
                "them")
    if isinstance(source, Trace | str | os.PathLike):
        items: list[Any] = [source]
    elif isinstance(source, Iterable):
        items = list(source)
    else:
        raise ValueError(f"{expected}; found {type(source).__name__}")
    if not items:
        raise ValueError(f"`{name}` is empty; {expected}")
    for i, item in enumerate(items):
        if isinstance(item, Trace):
            yield item
            continue
        if not isinstance(item, str | os.PathLike):
            raise ValueError(f"{expected}; item {i} is a {type(item).__name__}")
        p = Path(item)
        if p.is_dir():
            files = sorted(p.rglob("*.zst"))
            if not files:
                raise ValueError(f"{p}: the folder holds no *.zst trace files")
            yield from files
        elif p.exists():
            yield p
        else:
            raise FileNotFoundError(f"trace {str(p)!r} does not exist; pass the path of a "
                                    "file written by al.record(), or its folder")


class TraceRun(NamedTuple):
    """One run of a trace, as ``iter_runs`` gives it.

    Attributes:
        trace: the run's file. For a ``Trace`` passed in, that Trace; for a streamed file,
            a stand-in holding no records that answers ``path``, ``blob``/``has_blob``,
            ``candidates``/``chosen`` and the vector helpers from the Blobs read so far
            (a Blob is written before the first record that names it).
        run: the run, as ``Trace.runs`` would hold it (``start``, ``end``, ``records``,
            ``windows``).
    """

    trace: Trace
    run: RunView


def iter_runs(
    source: TraceSource | Iterable[TraceSource], *, name: str = "source",
    limits: ReadLimits | None = None,
) -> Iterator[TraceRun]:
    """Stream the runs of some traces, one at a time, in the order ``Trace.runs`` gives.

    The streaming counterpart of ``read_traces(source)`` followed by ``trace.runs``: a
    file is decoded one frame at a time and a run is handed over once its ``RunEnd`` has
    been read (runs that never ended, at the end of the file). Memory holds one frame, the
    runs still open (one, unless runs nest or interleave), and the file's Blobs (each
    distinct content once: candidate pools, large artifacts), whatever the file's size.

    Args:
        source: a ``Trace``, a trace file, a folder (every ``*.zst`` below it, sorted) or an
            iterable of those, as ``read_traces`` takes.
        name: the parameter name used in error messages.
        limits: the bounds past which a file is called hostile (``ReadLimits``).

    Yields:
        ``TraceRun(trace, run)`` per run: file by file, each file's runs in order of first
        appearance. A record that comes after its run's ``RunEnd`` frame is not seen.

    Example:
        >>> import agentlog as al
        >>> from agentlog.records import iter_runs
        >>> with al.record("agentlog-iter-runs-doc.zst", seed=1, task="a"):
        ...     al.score("f1", 0.5)
        >>> [(r.run.start.task, len(r.run.records))
        ...  for r in iter_runs("agentlog-iter-runs-doc.zst")]
        [('a', 3)]

    Raises:
        ValueError: as ``read_traces`` (an empty source, a folder without traces).
        TraceFormatError, OSError: as ``read``, when the stream reaches the problem.
    """
    for item in _trace_sources(source, name):
        if isinstance(item, Trace):
            for run in item.runs:
                yield TraceRun(item, run)
        else:
            yield from _stream_runs(item, limits)


def _stream_runs(path: Path, limits: ReadLimits | None) -> Iterator[TraceRun]:
    with FrameIterator(path, limits=limits) as frames:
        trace = _StreamedTrace(path=frames.path, records=[])
        blobs = trace._index.blobs
        open_runs: dict[int, RunView] = {}  # insertion order: order of first appearance
        windows: dict[tuple[int, int], WindowView] = {}
        handed: set[int] = set()
        for frame in frames:
            for r in frame.records:
                t = type(r)
                if t is Blob:
                    blobs.setdefault(r.hash, r)
                    continue
                run = open_runs.get(r.run)
                if run is None:
                    if r.run in handed:
                        continue
                    run = open_runs[r.run] = RunView(r.run)
                _attribute(run, r, t, windows, trace)
            # Hand over, at a frame boundary, the ended runs that no earlier run precedes.
            while open_runs:
                first = next(iter(open_runs.values()))
                if first.end is None:
                    break
                del open_runs[first.run]
                handed.add(first.run)
                for w in first.windows:
                    windows.pop((first.run, w.window), None)
                yield TraceRun(trace, first)
        trace.truncated = frames.truncated
        trace.bytes_dropped = frames.bytes_dropped
        trace.frames = frames.frames
        trace.format_version = frames.format_version
        for run in open_runs.values():
            yield TraceRun(trace, run)


# -- vectors ---------------------------------------------------------------------------


def _vector(sel: Selection, data: bytes, field: str, n: int | None) -> npt.NDArray[np.float64]:
    import numpy as np

    if len(data) % 8 or (n is not None and len(data) != 8 * n):
        expected = f"{8 * n} bytes (n={n} float64)" if n is not None else "a multiple of 8 bytes"
        raise TraceFormatError(
            f"selection {sel.name!r} step {sel.step} (run {sel.run}, window {sel.window}): "
            f"`{field}` should hold {expected}, found {len(data)} bytes"
        )
    return np.frombuffer(data, dtype="<f8")


def probs(sel: Selection) -> npt.NDArray[np.float64]:
    """The selection's probability vector, zero-copy (a read-only view of the record)."""
    return _vector(sel, sel.probs, "probs", sel.n)


def draws(sel: Selection) -> npt.NDArray[np.float64]:
    """The selection's Gumbel draws, zero-copy (a read-only view of the record)."""
    return _vector(sel, sel.draws, "draws", sel.n)


def raw_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
    """The vector before top-k/top-p truncation, or None when none was applied."""
    if sel.raw_probs is None:
        return None
    return _vector(sel, sel.raw_probs, "raw_probs", None)


def policy_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
    """The agent's own vector when a steer replaced it, or None when none did."""
    if sel.policy_probs is None:
        return None
    return _vector(sel, sel.policy_probs, "policy_probs", None)


# msgpack tells str from bytes, but one msgspec union cannot hold both: check by hand.
_pool_decoder = msgspec.msgpack.Decoder(list[Any])


def decode_pool(data: bytes, *, where: str = "a candidate pool") -> list[str | int | bytes]:
    """The candidate ids held by a pool Blob's ``data`` (a canonical msgpack list).

    Raises:
        TraceFormatError: the data is not a list of str, int or bytes ids.
    """
    try:
        ids: list[Any] = _pool_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise TraceFormatError(
            f"expected {where} to be a msgpack list of candidate ids (str, int or bytes); "
            f"it does not decode: {exc}"
        ) from exc
    bad = next((c for c in ids if not isinstance(c, str | int | bytes)), None)
    if bad is not None:
        raise TraceFormatError(
            f"expected {where} to be a msgpack list of candidate ids (str, int or bytes); "
            f"it holds a {type(bad).__name__}"
        )
    return ids


# -- views -----------------------------------------------------------------------------


class BlobNotFoundError(KeyError):
    """A hash is referenced but no Blob record with it is in the trace."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RunView:
    """One run of a trace: its start and end records and everything attributed to it.

    Attributes:
        run: the run index inside the file.
        start: the ``RunStart`` record (None if the file lacks it).
        end: the ``RunEnd`` record, None when the run did not end (crash, truncation).
        records: every record of this run in file order (start and end included).
        windows: the run's windows in order of entry.
    """

    __slots__ = ("end", "records", "run", "start", "windows")

    def __init__(self, run: int) -> None:
        self.run = run
        self.start: RunStart | None = None
        self.end: RunEnd | None = None
        self.records: list[Any] = []
        self.windows: list[WindowView] = []

    @property
    def run_id(self) -> str | None:
        return self.start.run_id if self.start is not None else None

    @property
    def complete(self) -> bool:
        """True when the run's ``RunEnd`` is in the file."""
        return self.end is not None

    @property
    def failed(self) -> bool:
        """True when the run ended with an exception from its body."""
        return self.end is not None and self.end.status != 0

    def __repr__(self) -> str:
        state = "ended" if self.end is not None else "not ended"
        return (
            f"<RunView run={self.run} run_id={self.run_id!r} {state} "
            f"records={len(self.records)} windows={len(self.windows)}>"
        )


class WindowView:
    """One window instance, keyed by (run, window id): its enter and exit records.

    ``exit`` is None when the window never closed (crash or truncation).
    """

    __slots__ = ("_trace", "enter", "exit")

    def __init__(self, enter: WindowEnter, trace: Trace) -> None:
        self.enter = enter
        self.exit: WindowExit | None = None
        self._trace = trace

    @property
    def run(self) -> int:
        return self.enter.run

    @property
    def window(self) -> int:
        """The window id, unique within its run."""
        return self.enter.window

    @property
    def key(self) -> tuple[int, int]:
        return (self.enter.run, self.enter.window)

    @property
    def name(self) -> str:
        return self.enter.name

    @property
    def parent(self) -> int:
        return self.enter.parent

    @property
    def entry_hash(self) -> bytes:
        return self.enter.entry_hash

    @property
    def exit_hash(self) -> bytes | None:
        return self.exit.exit_hash if self.exit is not None else None

    @property
    def status(self) -> int | None:
        """EXIT_OK, EXIT_FAILED or EXIT_CLOSED; None while the window is open."""
        return self.exit.status if self.exit is not None else None

    @property
    def complete(self) -> bool:
        """True when the window exited normally (``EXIT_OK``)."""
        return self.exit is not None and self.exit.status == EXIT_OK

    @property
    def failed(self) -> bool:
        """True when an exception escaped the window (the declared failure exit)."""
        return self.exit is not None and self.exit.status == EXIT_FAILED

    @property
    def closed_early(self) -> bool:
        """True when a generator window was closed before exhaustion."""
        return self.exit is not None and self.exit.status == EXIT_CLOSED

    @property
    def t_enter_ns(self) -> int:
        return self.enter.t_ns

    @property
    def t_exit_ns(self) -> int | None:
        return self.exit.t_ns if self.exit is not None else None

    @property
    def wall_ns(self) -> int | None:
        return self.exit.wall_ns if self.exit is not None else None

    @property
    def receipt(self) -> bytes | None:
        return self.exit.receipt if self.exit is not None else None

    @property
    def entry_bytes(self) -> bytes:
        """The canonical entry encoding, inline or from its Blob."""
        inline = self.enter.entry
        return inline if inline is not None else self._trace.blob(self.enter.entry_hash)

    @property
    def exit_bytes(self) -> bytes | None:
        """The canonical exit encoding (inline or Blob); None while the window is open."""
        if self.exit is None:
            return None
        inline = self.exit.exit
        return inline if inline is not None else self._trace.blob(self.exit.exit_hash)

    def entry_value(self) -> Any:
        """The decoded entry artifact: the bound arguments (``{name: value}``), or what
        the window's ``entry=`` projection returned. Arrays come back as read-only numpy
        arrays. To rebuild the arguments of a call use ``al.decode_arguments``."""
        from agentlog._encoding import decode

        return decode(self.entry_bytes)

    def exit_value(self) -> Any:
        """The decoded exit artifact (the return value); None while the window is open.

        Raises:
            ValueError: the window has not exited (``exit`` is None).
        """
        from agentlog._encoding import decode

        data = self.exit_bytes
        if data is None:
            raise ValueError(f"window {self.name!r} (run {self.run}, id {self.window}) never "
                             "exited: it has no exit value")
        return decode(data)

    def __repr__(self) -> str:
        status = {None: "open", EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CLOSED: "closed"}
        return (
            f"<WindowView {self.name!r} run={self.run} window={self.window} "
            f"{status.get(self.status, str(self.status))}>"
        )


class Transition(NamedTuple):
    """An entry/exit pair of a completed window, with both artifacts resolved."""

    run: int
    run_id: str | None
    window: int
    name: str
    entry_hash: bytes
    exit_hash: bytes
    entry: bytes
    exit: bytes


def _attribute(run: RunView, r: Any, t: type, windows: dict[tuple[int, int], WindowView],
               trace: Trace) -> bool:
    """Add a record (not a Blob) to its run, pairing window exits with their entries
    (what ``_Index`` does inline for ``read``).

    Returns:
        True for an exit that matches no open window (an orphan), which the run keeps in
        its records but no window claims.
    """
    run.records.append(r)
    if t is WindowEnter:
        view = WindowView(r, trace)
        windows[(r.run, r.window)] = view
        run.windows.append(view)
    elif t is WindowExit:
        open_view = windows.get((r.run, r.window))
        if open_view is None or open_view.exit is not None:
            return True
        open_view.exit = r
    elif t is RunStart:
        if run.start is None:
            run.start = r
    elif t is RunEnd and run.end is None:
        run.end = r
    return False


class _Index:
    """Records grouped once, on first use."""

    def __init__(self, trace: Trace) -> None:
        self.blobs: dict[bytes, Blob] = {}
        self.by_type: dict[type, list[Any]] = {}
        runs: dict[int, RunView] = {}
        windows: dict[tuple[int, int], WindowView] = {}
        self.windows: list[WindowView] = []
        self.orphan_exits: list[WindowExit] = []
        by_type = self.by_type
        for r in trace.records:
            t = type(r)
            bucket = by_type.get(t)
            if bucket is None:
                bucket = by_type[t] = []
            bucket.append(r)
            if t is Blob:
                self.blobs.setdefault(r.hash, r)
                continue
            run = runs.get(r.run)
            if run is None:
                run = runs[r.run] = RunView(r.run)
            # Inline, not _attribute(): a call per record costs read() about 25 %.
            run.records.append(r)
            if t is WindowEnter:
                view = WindowView(r, trace)
                windows[(r.run, r.window)] = view
                self.windows.append(view)
                run.windows.append(view)
            elif t is WindowExit:
                open_view = windows.get((r.run, r.window))
                if open_view is None or open_view.exit is not None:
                    self.orphan_exits.append(r)
                else:
                    open_view.exit = r
            elif t is RunStart:
                if run.start is None:
                    run.start = r
            elif t is RunEnd and run.end is None:
                run.end = r
        self.runs = list(runs.values())
        self.run_ids = {v.run: v.run_id for v in self.runs}

    def of(self, t: type) -> list[Any]:
        return self.by_type.get(t, [])


class Trace:
    """A trace file read into memory.

    Attributes:
        path: the file.
        records: every record recovered, in file order.
        truncated: True when the file ended inside its header or a frame.
        bytes_dropped: bytes after the last complete frame (0 unless truncated,
            or a tail of zeros).
        records_recovered: ``len(records)``.
        frames: complete frames read.
        format_version: the file's format version (None when the header was cut).
    """

    def __init__(
        self,
        *,
        path: str,
        records: list[Any],
        truncated: bool = False,
        bytes_dropped: int = 0,
        frames: int = 0,
        format_version: int | None = None,
    ) -> None:
        self.path = path
        self.records = records
        self.truncated = truncated
        self.bytes_dropped = bytes_dropped
        self.records_recovered = len(records)
        self.frames = frames
        self.format_version = format_version
        self._pools: dict[bytes, list[str | int | bytes]] = {}

    def __repr__(self) -> str:
        tail = f", truncated ({self.bytes_dropped} bytes dropped)" if self.truncated else ""
        return (
            f"<Trace {self.path!r}: {self.records_recovered} records in {self.frames} frames, "
            f"{len(self.runs)} runs{tail}>"
        )

    @cached_property
    def _index(self) -> _Index:
        return _Index(self)

    # -- runs and windows

    @property
    def runs(self) -> list[RunView]:
        """The runs in the file, in order of first appearance."""
        return self._index.runs

    def windows(self, name: str | None = None) -> list[WindowView]:
        """Window instances (optionally of one name), in order of entry."""
        ws = self._index.windows
        return ws if name is None else [w for w in ws if w.enter.name == name]

    def transitions(self, window: str, *, include_failed: bool = False) -> list[Transition]:
        """Entry/exit pairs of the completed instances of window ``window`` (for ASV).

        Windows that never exited are left out, and so are failed or early-closed
        ones unless ``include_failed``. Entry and exit bytes are resolved from
        inline encodings or Blobs.
        """
        out = []
        run_ids = self._index.run_ids
        for w in self._index.windows:
            ex = w.exit
            if w.enter.name != window or ex is None:
                continue
            if ex.status != EXIT_OK and not include_failed:
                continue
            out.append(Transition(
                run=w.enter.run,
                run_id=run_ids.get(w.enter.run),
                window=w.enter.window,
                name=window,
                entry_hash=w.enter.entry_hash,
                exit_hash=ex.exit_hash,
                entry=w.entry_bytes,
                exit=ex.exit if ex.exit is not None else self.blob(ex.exit_hash),
            ))
        return out

    # -- record lists

    def selections(self, name: str | None = None) -> list[Selection]:
        """``Selection`` records (optionally of one stream), in file order."""
        return _named(self._index.of(Selection), name)

    def continuations(self, name: str | None = None) -> list[Continuation]:
        """``Continuation`` records (optionally of one stream), in file order."""
        return _named(self._index.of(Continuation), name)

    def scores(self, name: str | None = None) -> list[Score]:
        """``Score`` records (optionally of one name), in file order."""
        return _named(self._index.of(Score), name)

    def llm_calls(self) -> list[LLMCall]:
        """``LLMCall`` records in file order."""
        return list(self._index.of(LLMCall))

    def tool_calls(self, name: str | None = None) -> list[ToolCall]:
        """``ToolCall`` records (optionally of one tool), in file order."""
        return _named(self._index.of(ToolCall), name)

    # -- blobs and vectors

    def blob(self, hash: bytes) -> bytes:
        """The data of the Blob with this hash.

        Raises:
            BlobNotFoundError: (a ``KeyError``) when the trace holds no such Blob.
        """
        b = self._index.blobs.get(hash)
        if b is None:
            where = " (the file is truncated; the blob may have been cut)" if self.truncated else ""
            raise BlobNotFoundError(
                f"no Blob with hash {bytes(hash).hex()} in {self.path}{where}"
            )
        return b.data

    def has_blob(self, hash: bytes) -> bool:
        return hash in self._index.blobs

    @staticmethod
    def probs(sel: Selection) -> npt.NDArray[np.float64]:
        """The selection's probability vector as a zero-copy float64 array."""
        return probs(sel)

    @staticmethod
    def draws(sel: Selection) -> npt.NDArray[np.float64]:
        """The selection's Gumbel draws as a zero-copy float64 array."""
        return draws(sel)

    @staticmethod
    def raw_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
        """The vector before top-k/top-p truncation, or None when none was applied."""
        return raw_probs(sel)

    @staticmethod
    def policy_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
        """The agent's own vector when a steer replaced it, or None when none did."""
        return policy_probs(sel)

    def candidates(self, sel: Selection) -> list[str | int | bytes]:
        """The selection's candidate ids, in the order of its vectors.

        Raises:
            BlobNotFoundError: the pool's Blob is not in the trace.
            TraceFormatError: the pool does not decode to a list of ids.
        """
        cached = self._pools.get(sel.pool)
        if cached is None:
            cached = self._pools[sel.pool] = decode_pool(
                self.blob(sel.pool), where=f"the pool of select {sel.name!r} step {sel.step}")
        return cached

    def chosen(self, sel: Selection) -> str | int | bytes:
        """The id of the candidate the selection chose.

        Raises:
            BlobNotFoundError, TraceFormatError: as ``candidates``, or the recorded
                choice lies outside the pool.
        """
        ids = self.candidates(sel)
        if not 0 <= sel.choice < len(ids):
            raise TraceFormatError(
                f"select {sel.name!r} step {sel.step} (run {sel.run}): choice {sel.choice} "
                f"lies outside its pool of {len(ids)} candidates", path=self.path)
        return ids[sel.choice]

    # -- tables

    def to_arrow(self, kind: ArrowKind = "windows") -> pa.Table:
        """One table of the trace: ``"windows"``, ``"selections"``, ``"continuations"``,
        ``"scores"``, ``"runs"``, ``"llm_calls"`` or ``"tool_calls"``.

        Raises:
            MissingDependencyError: pyarrow is not installed.
            ValueError: unknown ``kind``.
        """
        builders: dict[str, Callable[[Any, Trace], Any]] = {
            "windows": _windows_table,
            "selections": _selections_table,
            "runs": _runs_table,
            "continuations": lambda pa, t: _struct_table(pa, t._index.of(Continuation),
                                                         Continuation),
            "scores": lambda pa, t: _struct_table(pa, t._index.of(Score), Score),
            "llm_calls": lambda pa, t: _struct_table(pa, t._index.of(LLMCall), LLMCall),
            "tool_calls": lambda pa, t: _struct_table(pa, t._index.of(ToolCall), ToolCall),
        }
        if kind not in builders:
            raise ValueError(
                f"`kind` must be one of {', '.join(map(repr, builders))}; found {kind!r}"
            )
        try:
            import pyarrow
        except ImportError as exc:
            raise MissingDependencyError(
                "Trace.to_arrow() needs pyarrow, which is not installed: "
                "pip install 'agentlog[arrow]'"
            ) from exc
        return builders[kind](pyarrow, self)


def _named(records: list[Any], name: str | None) -> list[Any]:
    return list(records) if name is None else [r for r in records if r.name == name]


# -- arrow builders ----------------------------------------------------------------------


def _int_array(pa: Any, values: list[int | None]) -> Any:
    try:
        return pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowInvalid):
        try:
            return pa.array(values, pa.uint64())
        except (OverflowError, pa.ArrowInvalid):
            # msgpack allows ints beyond 64 bits' range in no case, but mixed signs do
            # not fit one arrow integer type: keep them exact as decimal strings.
            return pa.array([None if v is None else str(v) for v in values], pa.string())


def _column(pa: Any, tp: Any, values: list[Any]) -> Any:
    base = _base_type(tp)
    if base is bool:
        return pa.array(values, pa.bool_())
    if base is int:
        return _int_array(pa, values)
    if base is float:
        return pa.array(values, pa.float64())
    if base is str:
        return pa.array(values, pa.string())
    if base is bytes:
        return pa.array(values, pa.binary())
    return pa.array(
        [None if v is None else msgspec.json.encode(v).decode() for v in values], pa.string()
    )


def _base_type(tp: Any) -> Any:
    args = getattr(tp, "__args__", None)
    if args:
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return non_none[0]
    return tp


def _struct_table(pa: Any, records: list[Any], cls: type[msgspec.Struct]) -> Any:
    cols = {}
    for f in msgspec.structs.fields(cls):
        cols[f.name] = _column(pa, f.type, [getattr(r, f.name) for r in records])
    return pa.table(cols)


def _windows_table(pa: Any, trace: Trace) -> Any:
    ws = trace._index.windows
    run_ids = trace._index.run_ids

    def ex(attr: str) -> list[Any]:
        return [getattr(w.exit, attr) if w.exit is not None else None for w in ws]

    return pa.table({
        "run": _int_array(pa, [w.enter.run for w in ws]),
        "run_id": pa.array([run_ids.get(w.enter.run) for w in ws], pa.string()),
        "window": _int_array(pa, [w.enter.window for w in ws]),
        "name": pa.array([w.enter.name for w in ws], pa.string()),
        "parent": _int_array(pa, [w.enter.parent for w in ws]),
        "thread": _int_array(pa, [w.enter.thread for w in ws]),
        "after": pa.array([w.enter.after for w in ws], pa.string()),
        "status": _int_array(pa, ex("status")),
        "complete": pa.array([w.complete for w in ws], pa.bool_()),
        "failed": pa.array([w.failed for w in ws], pa.bool_()),
        "t_enter_ns": _int_array(pa, [w.enter.t_ns for w in ws]),
        "t_exit_ns": _int_array(pa, ex("t_ns")),
        "wall_ns": _int_array(pa, ex("wall_ns")),
        "entry_hash": pa.array([w.enter.entry_hash for w in ws], pa.binary()),
        "exit_hash": pa.array(ex("exit_hash"), pa.binary()),
        "receipt": pa.array(ex("receipt"), pa.binary()),
        "error_type": pa.array(ex("error_type"), pa.string()),
        "error_message": pa.array(ex("error_message"), pa.string()),
        "tool_calls": _int_array(pa, ex("tool_calls")),
        "llm_calls": _int_array(pa, ex("llm_calls")),
        "input_tokens": _int_array(pa, ex("input_tokens")),
        "output_tokens": _int_array(pa, ex("output_tokens")),
        "cost": pa.array(ex("cost"), pa.float64()),
        "selections": _int_array(pa, ex("selections")),
    })


def _list_column(pa: Any, sels: list[Selection], attr: str) -> Any:
    import numpy as np

    chunks = [getattr(s, attr) for s in sels]
    for s, c in zip(sels, chunks, strict=True):
        if c is not None and len(c) % 8:
            _vector(s, c, attr, None)  # raises the TraceFormatError
    lengths = np.fromiter((0 if c is None else len(c) // 8 for c in chunks), np.int32, len(chunks))
    offsets = np.zeros(len(chunks) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.frombuffer(b"".join(c for c in chunks if c is not None), "<f8")
    mask = None
    if any(c is None for c in chunks):
        mask = pa.array([c is None for c in chunks], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=mask)


def _selections_table(pa: Any, trace: Trace) -> Any:
    sels: list[Selection] = trace._index.of(Selection)
    run_ids = trace._index.run_ids
    chosen = []
    for s in sels:
        p = probs(s)
        chosen.append(float(p[s.choice]) if 0 <= s.choice < len(p) else None)
    return pa.table({
        "run": _int_array(pa, [s.run for s in sels]),
        "run_id": pa.array([run_ids.get(s.run) for s in sels], pa.string()),
        "window": _int_array(pa, [s.window for s in sels]),
        "name": pa.array([s.name for s in sels], pa.string()),
        "step": _int_array(pa, [s.step for s in sels]),
        "owner": pa.array([s.owner for s in sels], pa.string()),
        "n": _int_array(pa, [s.n for s in sels]),
        "choice": _int_array(pa, [s.choice for s in sels]),
        "chosen_p": pa.array(chosen, pa.float64()),
        "n_zero": _int_array(pa, [s.n_zero for s in sels]),
        "generator": pa.array([s.generator for s in sels], pa.string()),
        "top_k": _int_array(pa, [s.top_k for s in sels]),
        "top_p": pa.array([s.top_p for s in sels], pa.float64()),
        "t_ns": _int_array(pa, [s.t_ns for s in sels]),
        "pool": pa.array([s.pool for s in sels], pa.binary()),
        "probs": _list_column(pa, sels, "probs"),
        "draws": _list_column(pa, sels, "draws"),
        "raw_probs": _list_column(pa, sels, "raw_probs"),
    })


def _runs_table(pa: Any, trace: Trace) -> Any:
    runs = trace.runs

    def st(attr: str) -> list[Any]:
        return [getattr(r.start, attr) if r.start is not None else None for r in runs]

    def en(attr: str) -> list[Any]:
        return [getattr(r.end, attr) if r.end is not None else None for r in runs]

    return pa.table({
        "run": _int_array(pa, [r.run for r in runs]),
        "run_id": pa.array(st("run_id"), pa.string()),
        "system": pa.array(st("system"), pa.string()),
        "seed": _int_array(pa, st("seed")),
        "task": pa.array(st("task"), pa.string()),
        "meta": _column(pa, dict, st("meta")),
        "generator": pa.array(st("generator"), pa.string()),
        "agentlog_version": pa.array(st("agentlog_version"), pa.string()),
        "parent_run": pa.array(st("parent_run"), pa.string()),
        "pid": _int_array(pa, st("pid")),
        "t_start_ns": _int_array(pa, st("t_ns")),
        "t_end_ns": _int_array(pa, en("t_ns")),
        "complete": pa.array([r.complete for r in runs], pa.bool_()),
        "status": _int_array(pa, en("status")),
        "error_type": pa.array(en("error_type"), pa.string()),
        "n_windows": _int_array(pa, en("n_windows")),
        "n_selections": _int_array(pa, en("n_selections")),
        "n_continuations": _int_array(pa, en("n_continuations")),
        "dropped": _int_array(pa, en("dropped")),
        "receipt": pa.array(en("receipt"), pa.binary()),
        "n_records": _int_array(pa, [len(r.records) for r in runs]),
    })


class _StreamedTrace(Trace):
    """The file a streamed run comes from: its path and its Blobs, never its records."""

    def __repr__(self) -> str:
        return f"<streamed Trace {self.path!r}: {len(self._index.blobs)} blobs so far>"
