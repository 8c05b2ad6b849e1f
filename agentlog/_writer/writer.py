"""The trace writer: callers enqueue records, a shared pool of threads writes frames.

Example::

    >>> from agentlog._records import Score
    >>> from agentlog._writer import TraceWriter
    >>> w = TraceWriter("agentlog-writer-doctest.zst")
    >>> w.put(Score(run=0, window=-1, name="f1", value=0.83))
    >>> w.close()
    >>> w.records_written
    1

The caller's side of ``put`` is a length check plus a ``deque.append``; a pool thread
(``agentlog._writer.pool``: at most four per process, however many files are open)
drains the queue, encodes each batch in one msgspec call, compresses it into one zstd
frame (``agentlog._trace_format``) and hands it to the OS with ``os.writev``. A frame is
cut every ``frame_records`` records (fewer when records are large) or ``frame_interval``
seconds, whichever comes first, on ``flush()``, on ``cut_frame()``, at ``close()``, at
interpreter exit (``atexit``) and on SIGTERM. The pool threads and exit paths live in
``agentlog._writer.pool``, the queue's markers and the argument checks in
``agentlog._writer.queue``, the receipt chains in ``agentlog._writer.seal``.

Durability: ``"frame"`` (default) writes a frame about every ``frame_interval`` seconds
(a crash of the process loses at most that); with ``"window"`` ``cut_frame()`` (called
at every window exit) returns once the window's frame is handed to the OS, with
``"fsync"`` once it is synced. Which file (``mode=``, FIFOs, the lock): see
``agentlog._writer.file``. Bounds: the queue holds about ``max_queue_bytes`` (estimated
from the encoded size of recent records; when full, ``put`` waits up to
``full_timeout`` with ``on_full="block"``, then drops and counts). What a reader needs
to make sense of what was kept is never dropped: a run's ``RunStart`` and its
``RunEnd`` (which carries the count of the run's dropped records) and the exit of every
window whose entry was kept go past the bound (a few records per run and open window);
the exit of a window whose entry was dropped is dropped with it, so a reader never sees
a window exit without its entry. ``flush()``,
``close()`` and a window-durable ``cut_frame()`` wait at most ``FLUSH_TIMEOUT``,
``close_timeout`` and ``window_timeout`` (after one timeout, cuts stop waiting until
the writer catches up).

Failure policy: recording must never break the host program. When the file cannot be
written (disk full, I/O error, the file was deleted with its directory), the writer
emits one ``InstrumentationWarning``, stops writing (the file keeps every complete frame
written before the failure), and counts the records it could not write in ``dropped``.
``put``, ``put_blob``, ``flush``, ``cut_frame`` and ``close`` never raise (a warnings
filter that turns the warning into an error is the one exception: that is the user's
choice). Warnings about failures found by a pool thread are emitted on the caller's
thread, at the next ``flush()``, ``cut_frame()``, ``fsync()`` or ``close()``. Only
opening refuses, with ``TracePathError``, a path that must not be written to.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from collections import deque
from typing import Any, Literal

from agentlog import _digest
from agentlog._errors import InstrumentationWarning
from agentlog._records import (
    RECORD_TYPES,
    Blob,
    Record,
    RunEnd,
    RunStart,
    WindowEnter,
    WindowExit,
)
from agentlog._trace_format import (
    FORMAT_VERSION,
    MAX_FRAME_RECORDS,
    FrameEncoder,
)
from agentlog._writer import pool as _pool
from agentlog._writer.file import Mode, open_trace, remember
from agentlog._writer.frames import FRAME_TARGET_CONTENT, FrameWriting
from agentlog._writer.queue import (
    CUT,
    DURABILITY_RANK,
    MARKERS,
    CutMarker,
    DroppingQueue,
    FlushMarker,
    RecordQueue,
    check_writer_args,
    positive_seconds,
)
from agentlog._writer.seal import RunSealer

__all__ = ["CLOSE_TIMEOUT", "DURABILITY_RANK", "FLUSH_TIMEOUT", "MAX_BLOB_HASHES",
           "MAX_QUEUE_BYTES", "TraceWriter"]

Durability = Literal["frame", "window", "fsync"]
OnFull = Literal["block", "drop"]


# The default bounds of every wait and of the queue (see the module docstring).
FLUSH_TIMEOUT = 10.0
CLOSE_TIMEOUT = 10.0
WINDOW_TIMEOUT = 5.0
FULL_TIMEOUT = 1.0
MAX_QUEUE_BYTES = 64 * 1024 * 1024
# Blob hashes a writer remembers to write each blob once (~120 bytes each: ~8 MB).
MAX_BLOB_HASHES = 65_536

# Before anything is encoded the writer does not know how large records are: it wakes
# after this many, and producers wait (bounded) at twice as many until a pool thread has
# measured them; from then on it learns from every frame.
_FIRST_WAKE = 64
_GUESS_RECORD_BYTES = 1024
# What a queued record costs in memory beyond its encoded size (the Python objects).
_RECORD_OVERHEAD = 512

_RECORD_TYPES = frozenset(RECORD_TYPES)
# Records a full queue never drops: a run's start and end, and a window's exit (unless
# its entry was dropped, and then with it).
_PAIRED = frozenset((RunStart, RunEnd, WindowExit))


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class TraceWriter(RunSealer, FrameWriting):
    """Writes records to a trace file from the process's pool of writer threads.

    Args:
        path: the trace file; created (with its parent directories) when missing.
        mode: ``"x"`` (default): a new trace; an existing non-empty file this process
            did not record to is refused. ``"a"``: append runs to an existing trace.
            ``"w"``: replace the file.
        frame_records: cut a frame once this many records are queued.
        frame_interval: cut a frame at least this often (seconds) while records arrive.
        durability: ``"frame"``, ``"window"`` or ``"fsync"`` (see the module docstring).
        close_timeout: ``close()`` waits at most this long (seconds) for the last frames.
        window_timeout: with ``durability="window"``/``"fsync"``, ``cut_frame()`` waits
            at most this long (seconds) for the window's frame (default ``WINDOW_TIMEOUT``).
        max_queue_bytes: about how many bytes of records may wait to be written.
        on_full: ``"block"`` (wait up to ``full_timeout`` for room, then drop) or
            ``"drop"`` (drop at once) when the queue is full; drops are counted.
        full_timeout: the longest a ``put`` waits for room with ``on_full="block"``.

    Raises:
        TracePathError: ``path`` is a FIFO, device or directory, another writer holds
            it, or it is an existing trace that ``mode`` protects (or that cannot be
            appended to). Nothing is written then.

    Attributes:
        path: the file path, as given.
        records_written: records in frames handed to the OS.
        frames_written: frames handed to the OS.
        bytes_written: bytes handed to the OS by this writer, file header included
            (with ``mode="a"``, what the file held before is not counted).
        dropped: records that could not be written (open or write failure, full queue,
            unencodable record, ``put`` after ``close``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: Mode = "x",
        frame_records: int = 4096,
        frame_interval: float = 1.0,
        durability: Durability = "frame",
        close_timeout: float = CLOSE_TIMEOUT,
        window_timeout: float | None = None,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        on_full: OnFull = "block",
        full_timeout: float = FULL_TIMEOUT,
    ) -> None:
        check_writer_args(frame_records, frame_interval, durability, mode, on_full,
                         max_queue_bytes)
        self.path = os.fspath(path)
        self.mode: Mode = mode
        self.frame_records = frame_records
        self.frame_interval = float(frame_interval)
        self.durability: Durability = durability
        self.close_timeout = positive_seconds("close_timeout", close_timeout)
        self.window_timeout = positive_seconds(
            "window_timeout", WINDOW_TIMEOUT if window_timeout is None else window_timeout)
        self.full_timeout = positive_seconds("full_timeout", full_timeout)
        self.max_queue_bytes = max_queue_bytes
        self.on_full: OnFull = on_full
        self.records_written = 0
        self.frames_written = 0
        self.bytes_written = 0
        self.dropped = 0
        self._signalled = False  # put() asked for service because records piled up
        self._wanted = False  # a pool thread should look at this writer (again)
        self._busy = threading.Lock()  # held by the one pool thread servicing the writer
        self._done = threading.Event()  # set by the pool once the file is closed
        self._lock = threading.RLock()  # caller side only: markers versus close()
        self._closing = False
        self._closed = False
        # Kept open for the next run of the file (agentlog._writer.shared): since when,
        # by time.monotonic(); 0.0 while a run uses it. Also the options it was opened with.
        self._kept_at = 0.0
        self._opts: dict[str, Any] = {}
        self._finished = False  # the pool has written the last frame and closed the file
        self._failed = False  # no more writes: the file keeps its complete frames
        self._problem: str | None = None  # first problem, waiting to be warned about
        self._warned = False
        self._stalled = False  # a bounded wait expired: later waits are skipped
        self._stalled_cut: FlushMarker | None = None  # a cut whose wait timed out
        self._blob_hashes: dict[bytes, object] = {}
        # (run, window id) of the windows whose WindowEnter was dropped and whose exit has
        # not come yet: while it is not empty every put takes the checked path.
        self._dropped_windows: set[tuple[int, int]] = set()
        self._init_sealing()  # receipt chains and run digests (agentlog._writer.seal)
        self._fd = -1
        self._key: tuple[int, int] | None = None
        self._end = 0
        self._next_run = 0
        self._started = False
        self._deque: deque[Any] = deque()
        self._queue: RecordQueue = self._deque
        # Queue bounds in records, from the bytes per record seen so far (pool-updated).
        # Records per frame; fewer when they are large, never more than readers accept.
        self._chunk_records = min(frame_records, MAX_FRAME_RECORDS)
        self._learned = False
        self._set_bounds(_GUESS_RECORD_BYTES, min(frame_records, _FIRST_WAKE))
        self._next_due = time.monotonic() + self.frame_interval
        self._version = FORMAT_VERSION
        try:
            opened = open_trace(self.path, mode)
        except OSError as exc:
            self._fail_open(exc)
            return
        self._fd = opened.fd
        self._key = opened.key
        self._next_run = opened.next_run
        self._keyed_chain = _digest.KeyedChain(*opened.chain)
        self._version = opened.version  # frames are written in the file's format
        self._end = opened.end  # the file's size: where a torn frame is cut off
        self.bytes_written = opened.end if opened.fresh else 0
        # Made by the pool thread that first writes (two zstd contexts: ~10 µs the
        # opener does not pay); then used by one pool thread at a time.
        self._frame_encoder: FrameEncoder | None = None
        self._started = True
        _pool.register(self)

    # -- caller side -----------------------------------------------------------------

    def put(self, record: Record) -> None:
        """Enqueue one record. Thread-safe, never raises; waits only when the queue is full."""
        q = self._queue
        if len(q) < self._wake_before:
            q.append(record)
            return
        self._put_slow(record)

    def _put_slow(self, record: Any) -> None:
        q = self._queue
        if not self._learned and len(q) >= 2 * self._wake_at and self._started:
            self._await_learning()
        kind = type(record)
        if kind in _PAIRED and self._dropped_windows and self._paired_drop(record, kind):
            self.dropped += 1
            return
        if len(q) >= self._limit and kind not in _PAIRED and not self._room():
            self.dropped += 1
            if kind is WindowEnter:
                self._dropped_windows.add((record.run, record.window))
                self._wake_before = -1  # after the add: see _refresh_fast_path
            return
        q = self._queue  # swapped while it waited for room (a SIGTERM holds it)
        q.append(record)
        if len(q) >= self._wake_at and not self._signalled:
            self._signalled = True
            _pool.service().want(self)

    def _paired_drop(self, record: Any, kind: type) -> bool:
        """Whether ``record`` (a window exit, a RunStart or a RunEnd) goes with a dropped
        WindowEnter; forgets the windows it closes."""
        dropped = self._dropped_windows
        if kind is WindowExit:
            key = (record.run, record.window)
            if key not in dropped:
                return False
            dropped.discard(key)
        elif kind is RunEnd:  # windows of the run that never exited
            for key in [k for k in dropped if k[0] == record.run]:
                dropped.discard(key)
        else:
            return False
        self._refresh_fast_path()
        return kind is WindowExit

    def _refresh_fast_path(self) -> None:
        """Let ``put`` take its short path again unless a dropped window awaits its exit.

        Written by callers and the pool thread without a lock: whoever adds to
        ``_dropped_windows`` sets ``_wake_before = -1`` after adding, and this sets it
        last when the set is not empty, so no interleaving leaves the short path open
        while a dropped window's exit may come.
        """
        self._wake_before = self._wake_at - 1
        if self._dropped_windows:
            self._wake_before = -1

    def _room(self) -> bool:
        """Wait (bounded) until the queue has room; False if the record must be dropped."""
        if self.on_full == "drop" or self._stalled or not self._started:
            self._note_problem(
                f"the queue is full ({len(self._deque)} records, about "
                f"{self.max_queue_bytes >> 20} MiB) and on_full={self.on_full!r}; records "
                "are dropped until the writer catches up"
            )
            return False
        _pool.service().want(self)
        deadline = time.monotonic() + self.full_timeout
        delay = 0.0005
        while len(self._deque) >= self._limit:
            if time.monotonic() >= deadline:
                self._stalled = True
                self._note_problem(
                    f"the writer could not keep up: the queue stayed full ({len(self._deque)} "
                    f"records) for full_timeout={self.full_timeout} s; records are dropped "
                    "until it catches up"
                )
                return False
            time.sleep(delay)  # polling, not a lock: see agentlog._writer.pool
            delay = min(2 * delay, 0.02)
        return True

    def _await_learning(self) -> None:
        """Wait (bounded) until a pool thread has measured the first records' size."""
        _pool.service().want(self)
        deadline = time.monotonic() + self.full_timeout
        delay = 0.0002
        while not self._learned and not self._stalled and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
        self._learned = True  # measured, or keep the guess: producers wait here once

    def put_blob(self, hash: bytes, data: bytes, kind: str = "artifact") -> None:
        """Enqueue a ``Blob`` the first time this writer sees ``hash`` (content-addressed).

        The hashes seen are bounded (``MAX_BLOB_HASHES``; a writer kept open across runs
        of an agent with a new candidate pool every step would otherwise grow without
        end): past the bound they are forgotten, and a blob seen again is written again,
        a duplicate every reader and ``verify`` accept (the same bytes under one name).
        A blob a full queue dropped is forgotten too, so the next record that uses it
        puts it again.
        """
        seen = self._blob_hashes
        if hash in seen:  # the common case (a pool drawn from again): nothing to make
            return
        token = object()
        # dict.setdefault is atomic for bytes keys: exactly one caller wins the race.
        if seen.setdefault(hash, token) is token:
            if len(seen) > MAX_BLOB_HASHES:
                seen.clear()
                seen[hash] = token
            dropped = self.dropped
            self.put(Blob(hash=hash, data=data, kind=kind))
            if self.dropped != dropped:  # perhaps another thread's drop: a duplicate at worst
                seen.pop(hash, None)

    def new_run_index(self) -> int:
        """The next free run index in this file (after the runs it already holds).

        It also ends the frame being filled (without waking the pool): the new run's
        records, from its ``RunStart`` on, start a frame, as its ``RunEnd`` does. Runs
        recorded one after another thus never share a frame, so the frames of a run that
        a crash cut short hold no record of another run, and can be set aside whole
        without touching the bytes a complete run's digest covers (what a replay's
        resume does, ``agentlog.replay``).
        """
        with self._lock:
            index = self._next_run
            self._next_run += 1
            if not self._closing:
                self._queue.append(CUT)
        return index

    def cut_frame(self) -> None:
        """End a frame after the records enqueued so far.

        With ``durability="frame"`` it does not wait. With ``"window"`` (``"fsync"``) it
        returns once the frame is handed to the OS (and synced), at most
        ``window_timeout`` seconds later; after a timeout it stops waiting until the
        writer has caught up. The frame boundary lands exactly here even when several
        cuts are requested before the writer catches up.
        """
        if self.durability == "frame":
            with self._lock:
                if not self._closing:
                    self._queue.append(CUT)
            if self._started:
                _pool.service().want(self)
        else:
            # Every cut waits for its own frame, whatever thread makes it: the promise is
            # per returned window. Only after a wait timed out (storage stalled) do cuts
            # stop waiting, until the frame that timed out has been written.
            stalled = self._stalled_cut
            if stalled is not None and stalled.event.is_set():
                self._stalled_cut = stalled = None  # the writer caught up
            marker = self._enqueue_marker(fsync=self.durability == "fsync")
            if marker is not None and stalled is None and not marker.event.wait(
                    self.window_timeout):
                self._stalled_cut = marker
                self._note_problem(
                    f"a window's frame was not written within window_timeout="
                    f"{self.window_timeout} s (is the storage stalled?); windows stop "
                    "waiting for their frames until the writer catches up"
                )
        if self._problem is not None:
            self._warn()

    def _enqueue_marker(self, fsync: bool = False) -> FlushMarker | None:
        """Queue a flush marker and wake the pool; None when the writer is closing."""
        marker = FlushMarker(fsync)
        with self._lock:
            if self._closing:
                return None
            self._queue.append(marker)
        if self._started:
            _pool.service().want(self)
        return marker

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Block until every record enqueued before this call is handed to the OS.

        No fsync (see ``fsync``). Records that cannot be written are counted in
        ``dropped`` rather than waited for. Returns False if ``timeout`` seconds
        (default ``FLUSH_TIMEOUT``) passed first.
        """
        return self._flush(timeout, fsync=False)

    def _flush(self, timeout: float, *, fsync: bool) -> bool:
        try:
            marker = self._enqueue_marker(fsync)
            if marker is not None:
                ok = marker.event.wait(timeout)
            elif self._started:  # closed or closing: the close drains everything
                if not self._done.is_set():
                    _pool.service().want(self)  # a close left to the pool's next scan
                ok = self._done.wait(timeout)
            else:
                ok = True
        except Exception as exc:  # pragma: no cover - defensive: never break the host
            self._note_problem(f"flush failed: {type(exc).__name__}: {exc}")
            ok = False
        if self._problem is not None:
            self._warn()
        return ok

    def fsync(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Flush, then have the OS put the file on stable storage. Returns success."""
        ok = self._flush(timeout, fsync=True)
        return ok and not self._failed and self._started

    def _begin_close(self) -> None:
        with self._lock:
            already = self._closing
            self._closing = True
        if not already and self._started:
            _pool.service().want(self)

    def close(self, timeout: float | None = None) -> None:
        """Write everything enqueued, close the file. Idempotent; never raises.

        Waits at most ``timeout`` seconds (default: the writer's ``close_timeout``). On a
        timeout it warns, stops accepting records (they are counted as dropped) and
        returns; a pool thread finishes the file if the storage recovers.
        """
        wait = self.close_timeout if timeout is None else timeout
        self._begin_close()
        if self._started and not self._done.wait(wait):
            self._queue = DroppingQueue(self)
            self._note_problem(
                f"close timed out after {wait} s with {len(self._deque)} records not yet "
                "written (is the storage stalled?); the program continues, and the file "
                "keeps the frames written so far"
            )
            self._warn()
            return
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue = DroppingQueue(self)
                self._release_queue(self._deque)  # puts that raced with close
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

    @property
    def pending(self) -> int:
        """Records (and markers) waiting in the queue."""
        return len(self._deque)

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
        self._closing = self._closed = self._finished = True
        self._queue = DroppingQueue(self)
        self._done.set()
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

    def _orphan_after_fork(self) -> None:
        """In a forked child: this copy owns no pool thread; it drops what it is given."""
        self._lock = threading.RLock()
        self._busy = threading.Lock()
        self._done = threading.Event()
        self._done.set()
        self._closing = self._closed = self._finished = True
        self._queue = DroppingQueue(self)
        self._deque = deque()
        if self._fd >= 0:
            _close_fd(self._fd)
            self._fd = -1

    # -- pool thread -----------------------------------------------------------------

    def _service(self, *, whole_frames: bool, deferred: list[Any] | None = None) -> None:
        """Write what is queued (a pool thread holding ``_busy``).

        ``whole_frames``: serviced because records piled up (or a marker came): records
        after the last marker are written only in whole frames. Otherwise (a frame fell
        due, close, SIGTERM) everything is written.
        """
        if self._finished:
            self._release_queue(self._deque)
            return
        self._signalled = False
        closing = self._closing
        whole = whole_frames and not closing
        try:
            if self._drain(self._deque, whole, deferred):
                self._stalled = False
                self._check_linked()
        except BaseException as exc:  # a bug must not leave flush() waiting forever
            self._failed = True
            self._note_problem(f"internal error in the writer thread: {exc!r}")
            self._release_queue(self._deque)
        if not whole:
            self._next_due = time.monotonic() + self.frame_interval
        if closing:
            self._finish()

    def _finish(self) -> None:
        self._finished = True
        if self._fd >= 0:
            if self._key is not None and not self._failed:
                remember(self._key, self._fd, self._next_run, self._end,
                         (self._keyed_chain.count, self._keyed_chain.head), self._version)
            _close_fd(self._fd)
            self._fd = -1
        _pool.unregister(self)
        if self._problem is not None and self._kept_at:
            # Closed with no run left to warn: the next caller of record() or flush() does.
            _pool.unwarned.append(self)
        self._done.set()

    def _check_linked(self) -> None:
        # A file whose directory was deleted keeps taking writes that no one can read.
        try:
            linked = os.fstat(self._fd).st_nlink > 0
        except OSError:  # pragma: no cover
            return
        # Deleted after its last run ended (a writer kept open for a next run): nothing
        # anyone could read is lost, and the file is closed before it is written again.
        if not linked and not self._failed and not self._kept_at:
            self._failed = True
            self._note_problem(
                f"the trace file was deleted while recording (was its directory removed?); "
                f"the {self.records_written} records written so far went with it, and later "
                "records are dropped"
            )

    def _set_bounds(self, record_bytes: float, wake_at: int) -> None:
        limit = max(16, int(self.max_queue_bytes / (record_bytes + _RECORD_OVERHEAD)))
        half = limit // 2  # a frame never needs more than half the queue
        self._chunk_records = min(self._chunk_records, half)
        self._wake_at = max(1, min(wake_at, half))
        self._refresh_fast_path()
        self._limit = limit

    def _learn(self, n_records: int, n_bytes: int) -> None:
        """Update the queue bounds from an encoded batch (pool thread)."""
        per = n_bytes / max(n_records, 1)
        if not self._learned:
            self._learned = True
            self._chunk_records = max(1, min(self.frame_records, MAX_FRAME_RECORDS,
                                             int(FRAME_TARGET_CONTENT // max(per, 1.0))))
        self._set_bounds(per, min(self.frame_records, self._chunk_records))

    def _drain(self, q: deque[Any], whole_frames: bool, deferred: list[Any] | None) -> bool:
        n = len(q)
        if not n:
            return False
        popleft = q.popleft
        batch = [popleft() for _ in range(n)]
        kinds = set(map(type, batch))
        if not kinds & MARKERS:
            if whole_frames:
                keep = n % self._chunk_records
                if keep:
                    q.extendleft(reversed(batch[-keep:]))
                    del batch[-keep:]
                    if not batch and not self._learned:
                        self._peek(q, keep)
            if not batch:
                return False
            self._write_batch(batch, kinds)
            return True
        start = 0
        wrote = False
        for i, item in enumerate(batch):
            kind = type(item)
            if kind is CutMarker or kind is FlushMarker:
                if i > start:
                    self._write_batch(batch[start:i])
                    wrote = True
                if kind is FlushMarker:
                    if item.fsync:
                        self._sync()
                    if deferred is None:
                        item.event.set()
                    else:
                        deferred.append(item)
                start = i + 1
        tail = batch[start:]
        if whole_frames and tail:
            # Records after the last cut or flush wait for their own cut, as above.
            keep = len(tail) % self._chunk_records
            if keep:
                q.extendleft(reversed(tail[-keep:]))
                del tail[-keep:]
        if tail:
            self._write_batch(tail)
            wrote = True
        return wrote

    def _release_queue(self, q: deque[Any]) -> None:
        """Count what is left in ``q`` as dropped and wake every flush waiting in it."""
        while True:
            try:
                item = q.popleft()
            except IndexError:
                return
            if type(item) is FlushMarker:
                item.event.set()
            elif item is not CUT:
                self.dropped += 1
