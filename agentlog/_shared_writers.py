"""One writer per trace file in a process: runs naming the same file share it.

A writer whose last run has ended with ``durability="frame"`` stays open ("parked")
for the next run of the file: that run does not pay for opening, locking and checking
the file again, and leaving ``record()`` does not wait for the writer (the run's last
records reach the file in the background, within about a second). A parked writer is
closed by a pool thread once no run has used it for ``PARK_IDLE`` seconds, or at the
pool's next scan (within a second) when another process waits for the file's lock, when
more than ``MAX_PARKED`` are parked (the oldest first), at ``al.flush()`` outside a run,
when the next run of the file needs other options (``mode="w"``, another
``frame_interval``...) or finds the file changed by someone else, and at exit. A run
that finds another process waiting for the file (``_trace_file.waited_for``) closes it
and lets that process go first, so processes appending runs to one file take turns.

Example::

    >>> from agentlog._shared_writers import flush_all, release_writer, shared_writer
    >>> outer = shared_writer("agentlog-shared-doctest.zst", mode="w")
    >>> shared_writer("./agentlog-shared-doctest.zst") is outer
    True
    >>> release_writer(outer); release_writer(outer); outer.closed
    False
    >>> flush_all() and outer.closed
    True
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from agentlog import _trace_file
from agentlog import _writer_pool as _pool
from agentlog._writer import DURABILITY_RANK, FLUSH_TIMEOUT, TraceWriter
from agentlog._writer_pool import writers

__all__ = ["MAX_PARKED", "PARK_IDLE", "flush_all", "release_writer", "shared_writer"]

# A parked writer no run has used for this long is closed (seconds).
PARK_IDLE = 1.0
# At most this many writers stay parked (open files, each holding a descriptor and a lock).
MAX_PARKED = 8
# Evicted writers are closed by the pool's next scan (no wake-up, which would cost the
# caller a GIL hand-off); past this many still closing, eviction wakes the pool.
_MAX_CLOSING = 16
# The options a parked writer must share with the run that would reuse it.
_SAME_OPTS = ("frame_interval", "close_timeout", "max_queue_bytes", "on_full")

_registry_lock = threading.RLock()
# (device, inode) of the file -> (writer, references; 0 while parked). An entry stays
# until its writer has closed the file, so a record() opening meanwhile waits for the
# close instead of opening a second writer that would truncate the file under the first.
_shared: dict[tuple[int, int], tuple[TraceWriter, int]] = {}


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path (the writer refuses it)
        return None


def flush_all(timeout: float = FLUSH_TIMEOUT) -> bool:
    """Flush every open writer of this process within ``timeout`` in all; False if not.

    Parked writers (no run is using them) are closed, so every file whose runs have all
    ended is complete and unlocked when this returns True.
    """
    deadline = time.monotonic() + timeout
    with _registry_lock:
        for writer, refs in list(_shared.values()):
            if refs == 0:
                writer._begin_close()
    ok = all([w.flush(max(0.0, deadline - time.monotonic())) for w in writers()])
    if _pool.unwarned:
        _warn_unwarned()
    return ok


def _warn_unwarned() -> None:
    """Warn (on the caller's thread) about writers a pool thread closed with a problem."""
    while True:
        try:
            writer = _pool.unwarned.popleft()
        except IndexError:
            return
        writer._warn(stacklevel=5)  # _warn, here, flush_all or shared_writer, theirs, user


def _reusable(writer: TraceWriter, st: os.stat_result, opts: dict[str, Any]) -> bool:
    """Whether the next run may take the parked ``writer`` as it is."""
    if writer.failed or opts.get("mode", "x") == "w":
        return False
    if any(opts.get(k) != writer._opts.get(k) for k in _SAME_OPTS):
        return False
    if writer._deque or writer._busy.locked():
        return True  # the last run's records are still being written: the file is ours
    # Idle: the file must end where the writer left it. Truncated or rewritten by someone
    # else (same inode, e.g. Path.write_bytes): reopen, which checks it again.
    return st.st_size == writer._end


def shared_writer(path: str | os.PathLike[str], **opts: Any) -> TraceWriter:
    """Return the open writer of the file at ``path`` in this process, or open one.

    Runs that write the same file (by device and inode: a hard link or another spelling
    of the path is the same file) share one writer; each call must be paired with
    ``release_writer``. The first opener's options win (``mode`` only matters to the
    writer that opens the file), except that a stronger ``durability`` from any user
    upgrades the shared writer. A parked writer is taken over with the new run's
    ``durability`` when its other options match (see the module docstring).

    Raises:
        TracePathError: as ``TraceWriter``.
    """
    if _pool.unwarned:
        _warn_unwarned()
    name = os.fspath(path)
    wanted = opts.get("durability", "frame")
    while True:
        with _registry_lock:
            st = _stat(name)
            key = None if st is None else (st.st_dev, st.st_ino)
            entry = _shared.get(key) if key is not None else None
            if entry is None or entry[0]._done.is_set():
                if entry is not None and key is not None:
                    del _shared[key]
                writer = TraceWriter(name, **opts)
                if not writer.failed and writer._key is not None:
                    writer._opts = opts
                    _shared[writer._key] = (writer, 1)
                return writer
            writer, refs = entry
            gave_way = False
            if not writer.closed:
                if refs == 0:
                    assert st is not None and key is not None  # found by the file's key
                    if _reusable(writer, st, opts):
                        if not _trace_file.waited_for(writer._fd):
                            writer._parked_at = 0.0
                            writer.durability = wanted
                            _shared[key] = (writer, 1)
                            return writer
                        # Another process waits for the file: this run queues behind it
                        # (each run then opens and closes the file, as before parking).
                        gave_way = True
                    writer._begin_close()  # wait for it below, then open the file again
                else:
                    _shared[key] = (writer, refs + 1)  # type: ignore[index]
                    if DURABILITY_RANK.get(wanted, 0) > DURABILITY_RANK[writer.durability]:
                        writer.durability = wanted
                    return writer
        # The last run on this file is closing it: wait (bounded) and open it again.
        _pool.service().want(writer)  # a close left to the pool's next scan: now
        if not writer._done.wait(writer.close_timeout):
            with _registry_lock:
                if key is not None and _shared.get(key, (None, 0))[0] is writer:
                    del _shared[key]  # stuck: the lock it holds will refuse the new writer
        elif gave_way:
            _trace_file.yield_to_waiter(name)


def release_writer(writer: TraceWriter) -> None:
    """Give back a writer from ``shared_writer``; the last release closes (or parks) it.

    A writer with ``durability="frame"`` is parked: its queue is written by the pool in
    the background and this returns at once. Otherwise this waits for the close
    (``close_timeout``), so the run is in the file when it returns.
    """
    key = writer._key
    with _registry_lock:
        entry = _shared.get(key) if key is not None else None
        if entry is not None and entry[0] is writer:
            if entry[1] > 1:
                _shared[key] = (writer, entry[1] - 1)  # type: ignore[index]
                return
            if writer.durability == "frame" and not writer.failed and not writer.closed:
                _shared[key] = (writer, 0)  # type: ignore[index]
                writer._parked_at = time.monotonic()
                _tidy()
                return
    writer.close()
    with _registry_lock:
        if key is not None and _shared.get(key, (None, 0))[0] is writer and writer._done.is_set():
            del _shared[key]


def _tidy() -> None:
    """Drop closed writers' entries; close the oldest parked beyond ``MAX_PARKED``.

    Under ``_registry_lock``. Runs at every park, so the registry holds at most the
    files in use, ``MAX_PARKED`` parked ones and those closing since the last park.
    """
    parked: list[tuple[float, TraceWriter]] = []
    closing = 0
    for key, (writer, refs) in list(_shared.items()):
        if writer._done.is_set():
            del _shared[key]
        elif writer.closed:
            closing += 1
        elif refs == 0:
            parked.append((writer._parked_at, writer))
    if len(parked) <= MAX_PARKED:
        return
    parked.sort(key=lambda p: p[0])
    svc = _pool.service()
    for _, writer in parked[: len(parked) - MAX_PARKED]:
        with writer._lock:
            writer._closing = True
        # Serviced (finished) at the pool's next wake-up, whoever's it is, or next scan.
        writer._wanted = True
        svc.ready.append(writer)
        closing += 1
    if closing > _MAX_CLOSING:
        svc.wake()  # keep the open files bounded: close them now


def _close_idle(now: float) -> None:
    """Mark writers parked for ``PARK_IDLE`` seconds as closing (a pool thread, each scan).

    Only try-locks: a pool thread never waits on a lock a caller may hold.
    """
    if not _registry_lock.acquire(blocking=False):
        return  # a caller is opening or releasing a writer: the next scan does it
    try:
        for writer, refs in list(_shared.values()):
            if (refs == 0 and writer._parked_at and not writer.closed
                    and (now - writer._parked_at >= PARK_IDLE
                         or _trace_file.waited_for(writer._fd))
                    and writer._lock.acquire(blocking=False)):
                try:
                    writer._closing = True
                finally:
                    writer._lock.release()
    finally:
        _registry_lock.release()


def _release_kept(key: tuple[int, int]) -> bool:
    """Close the writer of ``key`` if no run is using it; True once it is closed.

    Another open of the file in this process (a ``TraceWriter`` made directly) finds it
    locked by the writer kept for a next run: that writer gives way, as a closed one did.
    """
    with _registry_lock:
        entry = _shared.get(key)
        if entry is None or entry[1] != 0:
            return False
        writer = entry[0]
        writer._begin_close()
    _pool.service().want(writer)
    return writer._done.wait(writer.close_timeout)


def _close_parked_before_fork() -> None:
    """Close the parked writers before ``os.fork()`` (bounded: ``_FORK_TIMEOUT`` in all).

    A forked child shares its parent's open files and their locks: a file kept open for a
    next run would refuse the child's ``record()`` of it, which worked when every run
    closed its file.
    """
    if not _shared or not _registry_lock.acquire(timeout=_FORK_TIMEOUT):
        return
    try:
        parked = [w for w, refs in _shared.values() if refs == 0 and not w.closed]
        for writer in parked:
            writer._begin_close()
    finally:
        _registry_lock.release()
    deadline = time.monotonic() + _FORK_TIMEOUT
    for writer in parked:
        writer._done.wait(max(0.0, deadline - time.monotonic()))


_FORK_TIMEOUT = 1.0
_pool.idle_hook = _close_idle
_trace_file.release_kept = _release_kept
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_close_parked_before_fork)
