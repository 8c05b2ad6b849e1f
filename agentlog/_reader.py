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

import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Union

from agentlog._frames import Frame, FrameIterator, iter_frames, iter_records, trace_path
from agentlog._records import Blob
from agentlog._trace import (
    BlobNotFoundError,
    RunView,
    Trace,
    Transition,
    WindowView,
    _attribute,
)
from agentlog._trace_format import ReadLimits
from agentlog._vectors import decode_pool, draws, policy_probs, probs, raw_probs
from agentlog._writer.pool import settle

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
    "settle",
    "trace_files",
]

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
        FileNotFoundError: no file at ``path`` (the message says where it looked).
        OSError: the file cannot be opened (a folder, no permission).
        TypeError: ``path`` is not a path (a ``Trace`` is one already read: use it).
    """
    records: list[Any] = []
    with FrameIterator(trace_path(path, "al.read"), limits=limits) as frames:
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


def trace_files(source: TraceSource | Iterable[TraceSource], *, name: str = "source"
                ) -> list[Trace | Path]:
    """The traces named by ``source``, resolved but not read: what ``iter_runs`` and
    ``read_traces`` go through.

    ``source`` is a ``Trace``, a trace file, a folder (every ``*.zst`` below it, sorted), a
    glob pattern (``"runs/*/agent_*.zst"``, ``**`` included; matches sorted) or an
    iterable of those. A ``Trace`` is kept as is (it is already in memory). Pass the list
    to ``iter_runs`` to stream the runs, or use it to name, count or hash the files.

    Examples:
        >>> import agentlog as al
        >>> from agentlog.records import trace_files
        >>> with al.record("agentlog-trace-files-doc.zst", seed=1):
        ...     al.score("f1", 0.5)
        >>> [p.name for p in trace_files("agentlog-trace-files-doc.*")]
        ['agentlog-trace-files-doc.zst']

    Raises:
        ValueError: ``source`` is empty, a folder holds no trace, a pattern matches
            nothing, or an item is neither a path nor a Trace (the message names ``name``).
        FileNotFoundError: a file named does not exist.
    """
    return list(_trace_sources(source, name))


def _trace_sources(source: TraceSource | Iterable[TraceSource], name: str
                   ) -> Iterator[Trace | Path]:
    """The Traces and trace files named by ``source``, resolved lazily in order (so a
    missing file is reported after the files before it were read, as ``read_traces``
    always did)."""
    expected = (f"`{name}` must be a trace path, a Trace, a folder, a glob pattern or a "
                "non-empty sequence of them")
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
        if not p.exists() and glob.has_magic(os.fspath(item)):
            matches = sorted(Path(m) for m in glob.glob(os.fspath(item), recursive=True))
            if not matches:
                raise ValueError(f"{os.fspath(item)!r}: the pattern matches no file; check it "
                                 "(a folder stands for every *.zst below it)")
            for m in matches:
                yield from _files_at(m)
        elif p.exists():
            yield from _files_at(p)
        else:
            raise FileNotFoundError(f"trace {str(p)!r} does not exist; pass the path of a "
                                    "file written by al.record(), or its folder")


def _files_at(p: Path) -> list[Path]:
    """``p``, or the ``*.zst`` files below it (sorted) when it is a folder."""
    if not p.is_dir():
        return [p]
    files = sorted(p.rglob("*.zst"))
    if not files:
        raise ValueError(f"{p}: the folder holds no *.zst trace files")
    return files


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

    Examples:
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



class _StreamedTrace(Trace):
    """The file a streamed run comes from: its path and its Blobs, never its records."""

    def __repr__(self) -> str:
        return f"<streamed Trace {self.path!r}: {len(self._index.blobs)} blobs so far>"
