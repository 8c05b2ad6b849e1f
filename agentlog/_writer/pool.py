"""The writer threads of a process, shared by every open trace writer, and the exit paths.

A small pool (at most ``POOL_SIZE`` threads, started as writers open) services every
open ``TraceWriter``: 1,000 runs recording to 1,000 files at once use 4 threads, not
1,000. A writer is serviced by one pool thread at a time (its ``_busy`` lock), so its
frames are written in queue order exactly as with a thread of its own; a writer whose
storage stalls holds one pool thread, the others keep servicing the other files.

Wake-ups go through a self-pipe: callers write a byte, pool threads wait in
``select`` with a timeout (the next ``frame_interval`` due). Nothing here waits on a
lock that a caller's thread may hold, which is what makes the SIGTERM handler safe:
a Python signal handler runs on the main thread between two bytecodes, possibly while
that thread is inside ``threading.Event.set()`` or holds a writer's lock, so the
handler only sets a flag, writes to the pipe and waits (bounded) for a byte on an
acknowledgement pipe, which a pool thread writes once every queued record is handed to
the OS. Then the previous handler runs, or the default action (terminate) is taken.

When the default action follows, the handler first swaps each writer's queue for a
``HoldingQueue``: the program's other threads go on running while the last frames are
written, and a thread that would enqueue a record (a window about to return) waits there
until the process ends, so every window that returned before the signal is in the file
and no thread can keep the writer busy. A pool thread busy with a writer that keeps
receiving records looks at the signal between two frames. The time from the signal to
the end of the process is bounded by ``SIGNAL_FLUSH_TIMEOUT`` (storage that stalls); it
is the time to write what was queued, plus ``_STRAGGLER_QUIET``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from types import FrameType
from typing import TYPE_CHECKING, Any

from agentlog.context import block_async_signals

from .queue import HoldingQueue

if TYPE_CHECKING:  # pragma: no cover
    from agentlog._writer.writer import TraceWriter

__all__ = ["POOL_SIZE", "SIGNAL_FLUSH_TIMEOUT", "close_all", "register", "service", "settle",
           "unregister", "writers"]

# At most this many writer threads per process, however many files are open.
POOL_SIZE = 4

# How long the SIGTERM handler waits for the queued records to be written before it
# lets the signal take its course.
SIGNAL_FLUSH_TIMEOUT = 5.0
# After a SIGTERM has held back the recording threads, a thread that had taken the queue
# just before the swap still adds its record within its next turn of the GIL: the last
# frames are written once the queues stayed empty this long (seconds).
_STRAGGLER_QUIET = 0.02

# How long interpreter exit waits, in all, for open writers to finish.
EXIT_TIMEOUT = 10.0

# Open writers by id(writer). Mutated with single dict operations (atomic under the
# GIL) so that pool threads can snapshot it without a lock a caller might hold.
_open_writers: dict[int, TraceWriter] = {}


# Writers closed by a pool thread with a problem no caller has been warned about yet
# (agentlog._writer.shared warns at the next record() or flush()). Bounded: a writer is
# added once, when it closes, and taken off at the next open or flush.
unwarned: deque[TraceWriter] = deque()


def writers() -> list[TraceWriter]:
    """The open writers of this process (a snapshot)."""
    return list(_open_writers.values())


class _Service:
    """The pool threads and their wake-up pipes."""

    def __init__(self) -> None:
        self.rfd, self.wfd = os.pipe()
        self.ack_r, self.ack_w = os.pipe()
        for fd in (self.rfd, self.wfd, self.ack_r, self.ack_w):
            os.set_blocking(fd, False)
        self.ready: deque[TraceWriter] = deque()
        self.threads: list[threading.Thread] = []
        self.start_lock = threading.Lock()  # taken by callers only, never by pool threads
        self.scan_lock = threading.Lock()  # one pool thread at a time scans for due frames
        self.signal_pending = False
        self.signal_hold = False  # the SIGTERM handler holds back recording threads
        self.tick = 1.0  # how often frames fall due: the smallest frame_interval seen
        self.next_scan = 0.0

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is pending anyway
            os.write(self.wfd, b"\0")

    def want(self, writer: TraceWriter) -> None:
        """Ask a pool thread to service ``writer`` (lock-free, safe from any thread)."""
        writer._wanted = True
        self.ready.append(writer)
        self.wake()

    def ensure_threads(self, n_writers: int) -> None:
        with self.start_lock:
            # Frames fall due at the open writers' intervals: scan as often as the smallest
            # (and at least once a second), starting now for a writer that just opened.
            self.tick = max(0.001, min([1.0, *(w.frame_interval for w in writers())]))
            scan = time.monotonic() + self.tick
            if scan < self.next_scan:
                self.next_scan = scan
                # Threads sleeping until the old next scan recompute it. Only then: a
                # wake-up hands the GIL to a pool thread, which costs the opener ~50 µs.
                self.wake()
            self.threads = [t for t in self.threads if t.is_alive()]
            while len(self.threads) < min(POOL_SIZE, max(1, n_writers)):
                t = threading.Thread(target=self._loop, name=f"agentlog-writer-{len(self.threads)}",
                                     daemon=True)
                t.start()
                self.threads.append(t)

    def _loop(self) -> None:
        # A SIGTERM (or Ctrl-C) that landed here while the main thread slept in
        # ``time.sleep(60)`` ran its handler (the flush, then the termination) only when
        # that call returned: blocked here, it goes to the main thread.
        block_async_signals()
        while True:
            timeout = max(0.0, self.next_scan - time.monotonic())
            try:
                readable, _, _ = select.select([self.rfd], [], [], timeout)
            except (OSError, ValueError):  # pragma: no cover - closed after fork
                return
            if readable:
                with contextlib.suppress(OSError):
                    os.read(self.rfd, 65536)
            try:
                self._step()
            except BaseException:  # pragma: no cover - a pool thread must survive
                time.sleep(0.01)

    def _step(self) -> None:
        if self.signal_pending:
            self._signal_flush()
        ready = self.ready
        # Producers that keep a writer wanted would keep this loop going: a signal ends it.
        while not self.signal_pending:
            try:
                writer = ready.popleft()
            except IndexError:
                break
            _service_writer(writer, whole_frames=True, svc=self)
        if self.signal_pending:
            self._signal_flush()
        now = time.monotonic()
        if now >= self.next_scan and self.scan_lock.acquire(blocking=False):
            try:
                self.next_scan = now + self.tick
                for writer in writers():
                    # A closing writer nobody waits for (an evicted kept writer,
                    # agentlog._writer.shared) is finished here, should a wake-up be lost.
                    if (writer._deque and now >= writer._next_due) or (
                            writer._closing and not writer._finished):
                        _service_writer(writer, whole_frames=False, svc=self)
            finally:
                self.scan_lock.release()

    def _others_run(self) -> bool:
        """Whether a thread besides the main one (in the handler) and this pool may record.

        ``sys._current_frames`` rather than ``threading.enumerate``: the latter takes a
        lock that the main thread may hold where the signal interrupted it.
        """
        ours = {threading.main_thread().ident, *(t.ident for t in self.threads)}
        return any(ident not in ours for ident in sys._current_frames())

    def _signal_flush(self) -> None:
        self.signal_pending = False
        deadline = time.monotonic() + SIGNAL_FLUSH_TIMEOUT
        deferred: list[Any] = []  # flush markers, woken after the acknowledgement
        _flush_writers(writers(), deadline, deferred)
        if self.signal_hold and self._others_run():
            # Threads that took the queue before the handler swapped it add their record
            # now: write until the queues stay empty (the others wait in HoldingQueue).
            quiet = time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(0.001)
                busy = [w for w in writers() if w._deque]
                now = time.monotonic()
                if busy:
                    _flush_writers(busy, deadline, deferred)
                    quiet = now
                elif now - quiet >= _STRAGGLER_QUIET:
                    break
        with contextlib.suppress(OSError):
            os.write(self.ack_w, b"\0")
        for marker in deferred:
            marker.event.set()


def _flush_writers(todo: list[TraceWriter], deadline: float, deferred: list[Any]) -> None:
    """Write everything queued for each writer (the SIGTERM flush), bounded by ``deadline``."""
    for writer in todo:
        left = deadline - time.monotonic()
        if left <= 0 or not writer._busy.acquire(timeout=left):
            continue  # a pool thread stuck on this file's storage: do not wait longer
        try:
            writer._service(whole_frames=False, deferred=deferred)
        except BaseException:  # pragma: no cover - the signal must go on
            pass
        finally:
            writer._busy.release()


def _service_writer(writer: TraceWriter, *, whole_frames: bool, svc: _Service) -> None:
    while True:
        if not writer._busy.acquire(blocking=False):
            return  # another pool thread has it and will look at _wanted again
        try:
            writer._wanted = False
            writer._service(whole_frames=whole_frames)
        finally:
            writer._busy.release()
        if not writer._wanted or svc.signal_pending:
            return  # a SIGTERM first: its flush writes this writer's queue too


_service: _Service | None = None
_service_lock = threading.Lock()

def service() -> _Service:
    """The process's pool, created on first use."""
    global _service
    svc = _service
    if svc is None:
        with _service_lock:
            if _service is None:
                _service = _Service()
            svc = _service
    return svc


def register(writer: TraceWriter) -> None:
    _open_writers[id(writer)] = writer
    _install_hooks()
    service().ensure_threads(len(_open_writers))


def unregister(writer: TraceWriter) -> None:
    _open_writers.pop(id(writer), None)


def settle(path: str | os.PathLike[str], timeout: float = 10.0) -> bool:
    """Wait until this process's writers of the file at ``path`` have written what they hold.

    Leaving ``record()`` with the default ``durability="frame"`` only enqueues the run's
    last records: a pool thread writes them in the background (within about a second).
    Every reader of agentlog (``read``, ``iter_runs``, ``iter_frames``, ``verify``, the
    CLI, the estimators' and replay's file hashes) calls this first, so a file read in the
    process that recorded it holds every run that has left its ``record()`` block. Call it
    before reading a trace's bytes by other means (``open``, ``shutil.copy``); use
    ``al.flush()`` before handing the file to another process (it also closes the files
    no run is using, releasing their lock).

    Costs nothing in a process that has no open writer. Waits at most ``timeout``
    seconds in all.

    Args:
        path: a trace file (any spelling or hard link of it: matched by device and inode).
        timeout: the longest wait, in seconds.

    Returns:
        False if the wait timed out (the file may lack records still queued), else True
        (also when no writer of this process has the file open, or it does not exist).
    """
    if not _open_writers:
        return True
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return True  # a missing file: the reader reports it
    key = (st.st_dev, st.st_ino)
    deadline = time.monotonic() + timeout
    ok = True
    for writer in writers():
        if writer._key == key:
            ok = writer.flush(max(0.0, deadline - time.monotonic())) and ok
    return ok


def close_all(timeout: float = EXIT_TIMEOUT) -> None:
    """Close every open writer, waiting at most ``timeout`` seconds in all (at exit)."""
    open_now = writers()
    for writer in open_now:
        with contextlib.suppress(Exception):
            writer._begin_close()
    deadline = time.monotonic() + timeout
    for writer in open_now:
        with contextlib.suppress(Exception):  # exit must go on
            writer.close(max(0.0, deadline - time.monotonic()))


# -- SIGTERM -------------------------------------------------------------------------------

# The longest a thread is held back by a SIGTERM that does not end the process (seconds).
_HOLD_TIMEOUT = SIGNAL_FLUSH_TIMEOUT + 5.0

_hooks_lock = threading.Lock()
_hooks_installed = False
_sigterm_installed = False
_previous_sigterm: Any = None


def _flush_for_signal(*, hold: bool = False) -> None:
    """Have a pool thread write every queued record; wait for it, bounded. Lock-free.

    ``hold``: the process ends next, so threads that would enqueue more records are held
    back first (``HoldingQueue``) instead of racing the flush.
    """
    svc = _service
    if svc is None or not _open_writers:
        return
    with contextlib.suppress(OSError):
        while os.read(svc.ack_r, 65536):  # stale acknowledgements of an earlier signal
            pass
    if hold:
        for writer in writers():
            if writer._queue is writer._deque:  # not a closed or failed writer's
                writer._queue = HoldingQueue(writer._deque, _HOLD_TIMEOUT)
        svc.signal_hold = True
    svc.signal_pending = True
    svc.wake()
    with contextlib.suppress(OSError, ValueError):
        readable, _, _ = select.select([svc.ack_r], [], [], SIGNAL_FLUSH_TIMEOUT)
        if readable:
            os.read(svc.ack_r, 65536)


def _release_held() -> None:
    """Give the held writers their queue back (the process outlived its SIGTERM)."""
    svc = _service
    if svc is not None:
        svc.signal_hold = False
    for writer in writers():
        held = writer._queue
        if type(held) is HoldingQueue:
            writer._queue = writer._deque
            held.released = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _previous_sigterm
    terminate = not callable(previous) and previous == signal.SIG_DFL
    with contextlib.suppress(Exception):  # the signal must go on
        _flush_for_signal(hold=terminate)
    try:
        if callable(previous):
            previous(signum, frame)
        elif terminate:
            # Let the default action (terminate) happen, now that the frames are written.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        # Reached only when the process goes on (the signal was blocked or handled again).
        _release_held()


def _install_hooks() -> None:
    global _hooks_installed, _sigterm_installed, _previous_sigterm
    with _hooks_lock:
        if not _hooks_installed:
            _hooks_installed = True
            atexit.register(close_all)
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
    """A forked child owns no pool thread: its copies of open writers drop records."""
    global _service, _service_lock, _hooks_lock
    _service_lock = threading.Lock()
    _hooks_lock = threading.Lock()
    old = _service
    _service = None
    if old is not None:
        for fd in (old.rfd, old.wfd, old.ack_r, old.ack_w):
            with contextlib.suppress(OSError):
                os.close(fd)
    for writer in writers():
        writer._orphan_after_fork()
    _open_writers.clear()
    unwarned.clear()  # the parent's to report
