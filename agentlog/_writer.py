"""The background trace writer: callers enqueue records, one thread writes frames.

Example::

    >>> from agentlog._records import Score
    >>> from agentlog._writer import TraceWriter
    >>> w = TraceWriter("/tmp/agentlog-writer-doctest.zst")
    >>> w.put(Score(run=0, window=-1, name="f1", value=0.83))
    >>> w.close()
    >>> w.records_written
    1

The caller's side of ``put`` is a ``deque.append`` plus a length check; the
writer thread drains the queue, encodes each batch in one msgspec call,
compresses it into one zstd frame (``agentlog._trace_format``) and hands it to
the OS with ``os.writev``. A frame is cut every ``frame_records`` records or
``frame_interval`` seconds, whichever comes first, on ``flush()``, on
``cut_frame()`` (what ``durability="window"`` asks of a recorder at each window
exit), at ``close()``, at interpreter exit (``atexit``) and on SIGTERM.

Durability: records reach the OS when their frame is written, never later than
``frame_interval`` seconds (default 1 s) after ``put``. There is no fsync per
record or frame; the OS page cache survives the process, so a crash of the
process (SIGKILL, segfault, OOM kill) loses at most the records enqueued since
the last frame was cut. A power loss can lose what the OS had not yet written
back; call ``fsync()`` where that matters.

A writer always starts a new file: an existing file at ``path`` is truncated
(append mode is not supported, because a file is one sealed sequence of frames
with a single header). Missing parent directories are created. Two writers on
one path in one process would interleave two files; recorders share one writer
per path through ``shared_writer`` / ``release_writer``.

Failure policy: recording must never break the host program. When the file
cannot be opened or a write fails (disk full, I/O error), the writer emits one
``InstrumentationWarning``, stops writing (the file keeps every complete frame
written before the failure), and counts the records it could not write in
``dropped``. ``put``, ``put_blob``, ``flush``, ``cut_frame`` and ``close`` never
raise (a warnings filter that turns the warning into an error is the one
exception: that is the user's choice). Warnings about failures found by the
writer thread are emitted on the caller's thread, at the next ``flush()``,
``cut_frame()``, ``fsync()`` or ``close()``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import os
import signal
import threading
import warnings
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any, Literal, Protocol

import msgspec

from agentlog import _digest
from agentlog._errors import InstrumentationWarning
from agentlog._records import (
    RECORD_TYPES,
    Blob,
    Continuation,
    Record,
    RunEnd,
    RunStart,
    Selection,
    WindowEnter,
    WindowExit,
)
from agentlog._state import receipt_genesis, receipt_key
from agentlog._trace_format import (
    FILE_HEADER,
    FRAME_HEADER_SIZE,
    MAX_FRAME_CONTENT,
    MAX_FRAME_PAYLOAD,
    MAX_FRAME_RECORDS,
    FrameEncoder,
)

__all__ = ["TraceWriter", "flush_all", "release_writer", "shared_writer"]

Durability = Literal["frame", "window"]

# Frames of large records (selections over big pools) are cut to about this much
# msgpack content instead of ``frame_records`` records: reading a frame that fits
# in cache is twice as fast as reading a 64 MB one (measured with 1,000-candidate
# selections: 92k vs 36k records/s), and a crash tears less.
FRAME_TARGET_CONTENT = 4 * 1024 * 1024

# How long the SIGTERM handler waits for each writer before it lets the signal
# take its course.
SIGNAL_FLUSH_TIMEOUT = 10.0

_RECORD_TYPES = frozenset(RECORD_TYPES)
_SEALED_TYPES = frozenset(
    (WindowEnter, WindowExit, RunStart, RunEnd, Selection, Continuation, Blob)
)
# Positions in a run's chain state: [head, windows closed, selections, continuations].
_HEAD, _WINDOWS, _SELECTIONS, _CONTINUATIONS = 0, 1, 2, 3
_TALLIED: dict[type, int] = {Selection: _SELECTIONS, Continuation: _CONTINUATIONS}
_sha256 = hashlib.sha256
_replace = msgspec.structs.replace

# The OS calls the writer thread uses, as module attributes so tests can make a
# write fail (disk full) without touching the os module everyone else uses.
def _writev_joined(fd: int, parts: list[bytes]) -> int:  # pragma: no cover - Windows
    return os.write(fd, b"".join(parts))


_writev: Callable[[int, list[bytes]], int] = getattr(os, "writev", _writev_joined)
_write: Callable[[int, memoryview], int] = os.write
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class _Queue(Protocol):
    def append(self, item: Any, /) -> None: ...

    def __len__(self) -> int: ...


class _FlushMarker:
    """Placed in the queue by ``flush``; set once everything before it is written."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class _CutMarker:
    """Placed in the queue by ``cut_frame``: a frame ends here."""

    __slots__ = ()


_CUT = _CutMarker()


class _DroppingQueue:
    """Stands in for the queue of a writer that cannot write: counts, keeps nothing."""

    __slots__ = ("_writer",)

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer

    def append(self, item: Any, /) -> None:
        if type(item) is _FlushMarker:
            item.event.set()
        elif item is not _CUT:
            self._writer.dropped += 1

    def __len__(self) -> int:
        return 0


def _trace_writer_iv(frame_records: int, frame_interval: float, durability: str) -> None:
    if isinstance(frame_records, bool) or not isinstance(frame_records, int) or frame_records < 1:
        raise ValueError(f"`frame_records` must be an int >= 1; found {frame_records!r}")
    if (
        isinstance(frame_interval, bool)
        or not isinstance(frame_interval, int | float)
        or not math.isfinite(frame_interval)
        or frame_interval <= 0
    ):
        raise ValueError(
            f"`frame_interval` must be a finite number of seconds > 0; found {frame_interval!r}"
        )
    if durability not in ("frame", "window"):
        raise ValueError(f"`durability` must be 'frame' or 'window'; found {durability!r}")


class TraceWriter:
    """Writes records to a new trace file from a background thread.

    Args:
        path: the trace file; created (with its parent directories) or truncated.
        frame_records: cut a frame once this many records are queued.
        frame_interval: cut a frame at least this often (seconds) while records arrive.
        durability: ``"frame"`` or ``"window"``; recorders call ``cut_frame()`` at
            every window exit when it is ``"window"``. The writer itself only stores it.

    Attributes:
        path: the file path, as given.
        records_written: records in frames handed to the OS.
        frames_written: frames handed to the OS.
        bytes_written: bytes handed to the OS, file header included.
        dropped: records that could not be written (open or write failure,
            unencodable record, ``put`` after ``close``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        frame_records: int = 4096,
        frame_interval: float = 1.0,
        durability: Durability = "frame",
    ) -> None:
        _trace_writer_iv(frame_records, frame_interval, durability)
        self.path = os.fspath(path)
        self.frame_records = frame_records
        self.frame_interval = float(frame_interval)
        self.durability: Durability = durability
        self.records_written = 0
        self.frames_written = 0
        self.bytes_written = 0
        self.dropped = 0
        self._signalled = False  # put() asked for a cut because frame_records are queued
        self._wake = threading.Event()
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler may flush mid-flush
        self._pending_marks = 0  # flush and cut markers in the queue
        self._closing = False
        self._closed = False
        self._failed = False  # no more writes: the file keeps its complete frames
        self._problem: str | None = None  # first problem, waiting to be warned about
        self._warned = False
        self._blob_hashes: dict[bytes, object] = {}
        # Receipt chains, advanced by the writer thread in queue order (see _seal): run
        # index -> [head, windows closed, selections, continuations]; (run, window id) ->
        # entry hash while the window is open.
        self._chains: dict[int, list[Any]] = {}
        self._open_entries: dict[tuple[int, int], bytes] = {}
        self._receipt_keys: dict[str, bytes] = {}
        # Run digests (agentlog._digest), advanced frame by frame in file order; a
        # recorder puts a run's HMAC key in run_keys before its RunStart.
        self._digests: dict[int, _digest.RunDigest] = {}
        self.run_keys: dict[int, bytes] = {}
        self._run_ends: list[int] = []  # positions of RunEnds in the batch being sealed
        self._batch_blobs = False  # the batch being sealed holds a Blob
        self._fd = -1
        self._thread: threading.Thread | None = None
        self._deque: deque[Any] = deque()
        self._queue: _Queue = self._deque
        try:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            self._fd = os.open(self.path, _OPEN_FLAGS, 0o666)
            self._write_all([FILE_HEADER])
        except OSError as exc:
            self._fail_open(exc)
            return
        self.bytes_written = len(FILE_HEADER)
        self._encoder = FrameEncoder()  # used by the writer thread only
        # Records per frame; fewer when they are large, never more than readers accept.
        self._chunk_records = min(frame_records, MAX_FRAME_RECORDS)
        self._thread = threading.Thread(
            target=self._run, name=f"agentlog-writer:{os.path.basename(self.path)}", daemon=True
        )
        _register(self)
        self._thread.start()

    # -- caller side -----------------------------------------------------------------

    def put(self, record: Record) -> None:
        """Enqueue one record. Thread-safe, never blocks, never raises."""
        q = self._queue
        q.append(record)
        if len(q) >= self.frame_records and not self._signalled:
            self._signalled = True
            self._wake.set()

    def put_blob(self, hash: bytes, data: bytes, kind: str = "artifact") -> None:
        """Enqueue a ``Blob`` the first time this writer sees ``hash`` (content-addressed)."""
        token = object()
        # dict.setdefault is atomic for bytes keys: exactly one caller wins the race.
        if self._blob_hashes.setdefault(hash, token) is token:
            self.put(Blob(hash=hash, data=data, kind=kind))

    def cut_frame(self) -> None:
        """End a frame after the records enqueued so far; does not wait for the write.

        The frame boundary lands exactly here even when several cuts are requested
        before the writer thread catches up (``durability="window"`` relies on it).
        """
        with self._lock:
            if not self._closing:
                self._pending_marks += 1
                self._queue.append(_CUT)
        self._wake.set()
        if self._problem is not None:
            self._warn()

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every record enqueued before this call is handed to the OS.

        No fsync (see ``fsync``). Records that cannot be written are counted in
        ``dropped`` rather than waited for. Returns False if ``timeout`` seconds
        passed first.
        """
        try:
            marker = _FlushMarker()
            with self._lock:
                thread = self._thread
                if self._closing or thread is None:
                    waiting_for_close = True
                else:
                    waiting_for_close = False
                    self._pending_marks += 1
                    self._queue.append(marker)
            if waiting_for_close:
                # Closed, never opened, or a close() in progress that drains everything.
                if thread is not None and thread is not threading.current_thread():
                    thread.join(timeout)
                    ok = not thread.is_alive()
                else:
                    ok = True
            else:
                self._wake.set()
                ok = marker.event.wait(timeout)
        except Exception as exc:  # pragma: no cover - defensive: never break the host
            self._note_problem(f"flush failed: {type(exc).__name__}: {exc}")
            ok = False
        if self._problem is not None:
            self._warn()
        return ok

    def fsync(self, timeout: float | None = None) -> bool:
        """Flush, then ask the OS to put the file on stable storage. Returns success."""
        ok = self.flush(timeout)
        with self._lock:
            if self._fd < 0 or self._failed:
                return False
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._note_problem(f"fsync failed: {exc}")
                ok = False
        if self._problem is not None:
            self._warn()
        return ok

    def close(self, timeout: float | None = None) -> None:
        """Write everything enqueued, stop the thread and close the file. Idempotent."""
        with self._lock:
            already = self._closing
            self._closing = True
            thread = self._thread
        if not already and thread is not None:
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():  # pragma: no cover - a write hung past the timeout
                self._note_problem(f"close timed out after {timeout} s; the file may miss frames")
                self._warn()
                return
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue = _DroppingQueue(self)
                self._release_queue(self._deque)  # puts that raced with close
                if self._fd >= 0:
                    _close_fd(self._fd)
                    self._fd = -1
                _unregister(self)
        if self._problem is not None:
            self._warn()

    @property
    def closed(self) -> bool:
        """True once ``close()`` has started (new records are dropped)."""
        return self._closing

    @property
    def failed(self) -> bool:
        """True when the writer could not open or write the file and stopped writing."""
        return self._failed

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "failed" if self._failed else "closed" if self._closing else "open"
        return (
            f"<TraceWriter {self.path!r} {state} records_written={self.records_written} "
            f"frames_written={self.frames_written} dropped={self.dropped}>"
        )

    # -- problems ------------------------------------------------------------------

    def _fail_open(self, exc: OSError) -> None:
        self._failed = True
        self._closing = self._closed = True
        self._queue = _DroppingQueue(self)
        if self._fd >= 0:
            _close_fd(self._fd)
            self._fd = -1
        self._note_problem(f"cannot open the trace file for writing: {exc}")
        self._warn(stacklevel=4)

    def _note_problem(self, message: str) -> None:
        if self._problem is None and not self._warned:
            self._problem = message

    def _warn(self, stacklevel: int = 3) -> None:
        with self._lock:
            if self._warned or self._problem is None:
                return
            self._warned = True
            message = self._problem
            self._problem = None
        warnings.warn(
            f"agentlog could not record to {self.path!r}: {message}. The program continues; "
            f"records that cannot be written are counted in TraceWriter.dropped "
            f"({self.dropped} so far).",
            InstrumentationWarning,
            stacklevel=stacklevel,
        )

    # -- writer thread ---------------------------------------------------------------

    def _run(self) -> None:
        q = self._deque
        wait = self._wake.wait
        clear = self._wake.clear
        interval = self.frame_interval
        while True:
            woken = wait(interval)
            clear()
            self._signalled = False
            closing = self._closing
            # Woken only because frame_records are queued: write whole frames and leave
            # the rest for the next cut. A timeout, cut_frame(), flush() or close()
            # writes everything.
            whole_frames = woken and not closing
            try:
                self._drain(q, whole_frames)
            except BaseException as exc:  # a bug must not leave flush() waiting forever
                self._failed = True
                self._note_problem(f"internal error in the writer thread: {exc!r}")
                self._release_queue(q)
            if closing:
                return

    def _drain(self, q: deque[Any], whole_frames: bool) -> None:
        with self._lock:
            n = len(q)
            pending = self._pending_marks
        if whole_frames and not pending:
            n -= n % self.frame_records
        if not n:
            return
        popleft = q.popleft
        batch = [popleft() for _ in range(n)]
        if not pending:
            self._write_batch(batch)
            return
        start = 0
        markers = 0
        for i, item in enumerate(batch):
            if item is _CUT or type(item) is _FlushMarker:
                if i > start:
                    self._write_batch(batch[start:i])
                if type(item) is _FlushMarker:
                    item.event.set()
                markers += 1
                start = i + 1
        with self._lock:
            self._pending_marks -= markers
        tail = batch[start:]
        if whole_frames and tail:
            # Records after the last cut or flush wait for their own cut, as above.
            keep = len(tail) % self.frame_records
            if keep:
                q.extendleft(reversed(tail[-keep:]))
                del tail[-keep:]
        if tail:
            self._write_batch(tail)

    def _release_queue(self, q: deque[Any]) -> None:
        """Count what is left in ``q`` as dropped and wake every flush waiting in it."""
        while True:
            try:
                item = q.popleft()
            except IndexError:
                return
            if type(item) is _FlushMarker:
                item.event.set()
            elif item is not _CUT:
                self.dropped += 1

    def _write_batch(self, batch: list[Any]) -> None:
        if self._failed:
            self.dropped += len(batch)
            return
        if not all(map(_RECORD_TYPES.__contains__, map(type, batch))):
            batch = self._only_records(batch)
        self._seal(batch)
        ends, self._run_ends = self._run_ends, []
        # The common batch (one open run, no Blob, no RunEnd) advances its run's digest
        # by each frame's payload without looking at a record (agentlog._digest).
        digests = self._digests
        single: Any = None
        if len(digests) == 1 and not ends and not self._batch_blobs:
            single = next(iter(digests.values()))
        self._batch_blobs = False
        start = 0
        for cut in (*ends, len(batch)):
            while start < cut:
                stop = min(start + self._chunk_records, cut)
                self._write_records(batch[start:stop], single)
                start = stop
            if cut < len(batch):
                # A frame ends before a recorder's RunEnd: every frame of its run is
                # written (and hashed), so its digest is complete.
                batch[cut] = _digest.seal_run_end(digests, batch[cut])

    def _seal(self, batch: list[Any]) -> None:
        """Advance each run's receipt chain over ``batch`` and fill the receipts left empty.

        receipt_k = sha256(receipt_{k-1} ‖ window ‖ entry_hash ‖ exit_hash) (DESIGN §5,
        [LBC] Appendix B). The chain runs in queue order, which is the order of the
        file, so the caller needs neither a lock nor a hash for it: a ``WindowExit`` put
        with ``receipt=b""`` gets its receipt here, and a ``RunEnd`` put with
        ``receipt=b""`` gets the head and the run's counts (windows closed, selections,
        continuations: what the file holds, however many threads recorded them). A
        receipt the caller computed itself (it does when spans carry it) is kept and
        continued from.
        """
        chains = self._chains
        entries = self._open_entries
        for i, record in enumerate(batch):
            kind = type(record)
            if kind not in _SEALED_TYPES:
                continue
            try:
                tally = _TALLIED.get(kind)
                if tally is not None:  # the common case, inline: count it into its run
                    chain = chains.get(record.run)
                    if chain is not None:
                        chain[tally] += 1
                    continue
                self._seal_one(batch, i, kind, record, chains, entries)
            except Exception as exc:  # a malformed record: written as it is, never fatal
                self._note_problem(f"could not advance the receipt chain over a "
                                   f"{kind.__name__} record ({type(exc).__name__}: {exc})")

    def _seal_one(self, batch: list[Any], i: int, kind: type, record: Any,
                  chains: dict[int, list[Any]], entries: dict[tuple[int, int], bytes]) -> None:
        if kind is WindowEnter:
            entries[(record.run, record.window)] = record.entry_hash
            return
        if kind is Blob:
            self._batch_blobs = True
            return
        if kind is RunStart:
            chains[record.run] = [receipt_genesis(record.run_id), 0, 0, 0]
            self._digests[record.run] = _digest.RunDigest(record.run_id,
                                                          self.run_keys.pop(record.run, None))
            return
        if kind is RunEnd:
            if record.receipt:  # a RunEnd made by hand, not by a recorder: keep it as it is
                self._digests.pop(record.run, None)
            else:
                self._run_ends.append(i)  # _write_batch seals its digest
        chain = chains.get(record.run)
        if chain is None:  # records of a run whose RunStart this writer never saw
            if kind is WindowExit:
                entries.pop((record.run, record.window), None)
            return
        if kind is WindowExit:
            entry = entries.pop((record.run, record.window), None)
            chain[_WINDOWS] += 1
            if record.receipt:
                chain[_HEAD] = record.receipt
            elif entry is not None:
                key = self._receipt_keys.get(record.name)
                if key is None:
                    key = self._receipt_keys.setdefault(record.name, receipt_key(record.name))
                chain[_HEAD] = _sha256(chain[_HEAD] + key + entry + record.exit_hash).digest()
                batch[i] = _replace(record, receipt=chain[_HEAD])
        else:  # RunEnd
            del chains[record.run]
            if not record.receipt:
                batch[i] = _replace(record, receipt=chain[_HEAD], n_windows=chain[_WINDOWS],
                                    n_selections=chain[_SELECTIONS],
                                    n_continuations=chain[_CONTINUATIONS])

    def _only_records(self, batch: list[Any]) -> list[Any]:
        kept = [r for r in batch if type(r) in _RECORD_TYPES]
        bad = len(batch) - len(kept)
        self.dropped += bad
        first = next(r for r in batch if type(r) not in _RECORD_TYPES)
        self._note_problem(
            f"{bad} object(s) that are not trace records were put, e.g. {type(first).__name__}"
        )
        return kept

    def _write_records(self, records: list[Any], digest: Any = None) -> None:
        if not records:
            return
        encoder = self._encoder
        try:
            content = encoder.encode_records(records)
        except Exception as exc:
            if len(records) == 1:
                self.dropped += 1
                self._note_problem(
                    f"a {type(records[0]).__name__} record cannot be encoded "
                    f"({type(exc).__name__}: {exc})"
                )
                return
            mid = len(records) // 2  # find the bad records without a per-record loop
            self._write_records(records[:mid], digest)
            self._write_records(records[mid:], digest)
            return
        n = len(records)
        if len(content) > FRAME_TARGET_CONTENT and n > 1:
            # Large records: fewer per frame, from now on (one extra encode, once).
            step = self._chunk_records = max(1, n * FRAME_TARGET_CONTENT // len(content))
            for start in range(0, n, step):
                self._write_records(records[start:start + step], digest)
            return
        small_again = 4 * len(content) < FRAME_TARGET_CONTENT
        if small_again and n == self._chunk_records < self.frame_records:
            self._chunk_records = min(self.frame_records, MAX_FRAME_RECORDS, 2 * n)
        if len(content) > MAX_FRAME_CONTENT:
            self.dropped += 1
            self._note_problem(
                f"a {type(records[0]).__name__} record encodes to {len(content)} bytes, over "
                f"the {MAX_FRAME_CONTENT}-byte frame limit"
            )
            return
        header, payload = encoder.encode_parts(content, len(records))
        if len(payload) > MAX_FRAME_PAYLOAD:  # pragma: no cover - zstd never expands 2x
            self.dropped += len(records)
            self._note_problem("a frame compressed past the payload limit")
            return
        if self._digests:
            _digest.advance_frame(self._digests, digest, records, payload)
        try:
            self._write_all([header, payload])
        except OSError as exc:
            self._fail_write(exc, len(records))
            return
        self.records_written += len(records)
        self.frames_written += 1
        self.bytes_written += FRAME_HEADER_SIZE + len(payload)

    def _write_all(self, parts: list[bytes]) -> None:
        total = sum(len(p) for p in parts)
        done = _writev(self._fd, parts)
        if done < total:  # a short write: rare, finish byte by byte
            rest = memoryview(b"".join(parts))[done:]
            while rest:
                n = _write(self._fd, rest)
                rest = rest[n:]

    def _fail_write(self, exc: OSError, n_records: int) -> None:
        self._failed = True
        self.dropped += n_records
        # Cut the torn frame off so the file stays a valid trace of its complete frames.
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self.bytes_written)
        self._note_problem(
            f"writing failed ({exc}); the file keeps the {self.records_written} records "
            "written before and the rest is dropped"
        )


# -- process-wide registry, exit and signal safety ---------------------------------------

_registry_lock = threading.RLock()
_open_writers: dict[int, TraceWriter] = {}
_shared: dict[str, tuple[TraceWriter, int]] = {}
_hooks_installed = False
_sigterm_installed = False
_previous_sigterm: Any = None


def _register(writer: TraceWriter) -> None:
    with _registry_lock:
        _open_writers[id(writer)] = writer
    _install_hooks()


def _unregister(writer: TraceWriter) -> None:
    with _registry_lock:
        _open_writers.pop(id(writer), None)
        for key, (shared, _) in list(_shared.items()):
            if shared is writer:
                del _shared[key]


def _writers() -> list[TraceWriter]:
    with _registry_lock:
        return list(_open_writers.values())


def flush_all(timeout: float | None = None) -> bool:
    """Flush every open writer of this process; False if any timed out."""
    return all([w.flush(timeout) for w in _writers()])


def _close_all() -> None:
    for writer in _writers():
        with contextlib.suppress(Exception):  # exit must go on
            writer.close()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    for writer in _writers():
        with contextlib.suppress(Exception):  # the signal must go on
            writer.flush(SIGNAL_FLUSH_TIMEOUT)
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        # Let the default action (terminate) happen, now that the frames are written.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _install_hooks() -> None:
    global _hooks_installed, _sigterm_installed, _previous_sigterm
    with _registry_lock:
        if not _hooks_installed:
            _hooks_installed = True
            atexit.register(_close_all)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork_in_child)
        if _sigterm_installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            previous = signal.getsignal(signal.SIGTERM)
            # A handler set outside Python (None) cannot be chained; an ignored SIGTERM
            # stays ignored.
            if previous is None or previous == signal.SIG_IGN:
                _sigterm_installed = True
                return
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            return
        _previous_sigterm = previous
        _sigterm_installed = True


def _after_fork_in_child() -> None:
    """A forked child owns no writer thread: its copies of open writers drop records."""
    global _registry_lock
    _registry_lock = threading.RLock()
    for writer in list(_open_writers.values()):
        writer._lock = threading.RLock()
        writer._closing = writer._closed = True
        writer._thread = None
        writer._queue = _DroppingQueue(writer)
        writer._deque = deque()
        if writer._fd >= 0:
            _close_fd(writer._fd)
            writer._fd = -1
    _open_writers.clear()
    _shared.clear()


def shared_writer(path: str | os.PathLike[str], **opts: Any) -> TraceWriter:
    """Return the open writer for ``path`` in this process, or open one with ``opts``.

    Nested recorders that write the same file share one writer; each call must
    be paired with ``release_writer``. The first opener's options win, except
    that ``durability="window"`` from any user upgrades the shared writer.
    """
    key = os.path.realpath(os.fspath(path))
    with _registry_lock:
        entry = _shared.get(key)
        if entry is not None and not entry[0].closed:
            writer, refs = entry
            _shared[key] = (writer, refs + 1)
            if opts.get("durability") == "window":
                writer.durability = "window"
            return writer
        writer = TraceWriter(path, **opts)
        if not writer.failed:
            _shared[key] = (writer, 1)
        return writer


def release_writer(writer: TraceWriter) -> None:
    """Give back a writer from ``shared_writer``; the last release closes it."""
    with _registry_lock:
        for key, (shared, refs) in _shared.items():
            if shared is writer:
                if refs > 1:
                    _shared[key] = (shared, refs - 1)
                    return
                del _shared[key]
                break
    writer.close()

