"""One writer per trace file in a process, and one writing process per file.

The first run that records to a file opens it and takes its exclusive lock; the runs of
this process that name the same file (by device and inode: a hard link or another
spelling of the path is the same file) share that writer, from any thread or task.
When the last of them ends, the writer stays open and keeps the lock: the file belongs
to this process until ``al.flush()`` outside a run, exit, a fork, a run of the file that
needs other options (``mode="w"``, another ``frame_interval``...), or more than
``MAX_KEPT`` files are held (the least recently used is closed first). Its last records
reach the file in the background within ``frame_interval``; a run with
``durability="window"`` or ``"fsync"`` is written (and synced) before ``record()`` returns.

Another process that opens a held file gets a ``TracePathError`` saying so: processes
that record at the same time write one file each, into a folder, which every reader and
estimator takes as one trace set.

Example::

    >>> from agentlog._writer.shared import flush_all, release_writer, shared_writer
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

from agentlog._writer import file as _trace_file
from agentlog._writer import pool as _pool
from agentlog._writer.pool import writers
from agentlog._writer.writer import DURABILITY_RANK, FLUSH_TIMEOUT, TraceWriter

__all__ = ["MAX_KEPT", "flush_all", "release_writer", "shared_writer"]

# At most this many files stay held with no run using them (each an open descriptor).
MAX_KEPT = 8
# The options a kept writer must share with the run that would reuse it.
_SAME_OPTS = ("frame_interval", "close_timeout", "max_queue_bytes", "on_full")
# How long a new run waits for a pool thread finishing the last run's write (see _reusable).
_IDLE_WAIT = 0.5

_registry_lock = threading.RLock()
# (device, inode) of the file -> (writer, references; 0 while kept for a next run). An
# entry stays until its writer has closed the file, so a record() opening meanwhile waits
# for the close instead of opening a second writer that would truncate the file under the
# first.
_shared: dict[tuple[int, int], tuple[TraceWriter, int]] = {}


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path (the writer refuses it)
        return None


def flush_all(timeout: float = FLUSH_TIMEOUT) -> bool:
    """Flush every open writer of this process within ``timeout`` in all; False if not.

    Kept writers (no run is using them) are closed, so every file whose runs have all
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
    """Whether the next run may take the kept ``writer`` as it is."""
    if writer.failed or opts.get("mode", "x") == "w":
        return False
    if any(opts.get(k) != writer._opts.get(k) for k in _SAME_OPTS):
        return False
    # A pool thread may still hold the writer for a moment after the last flush returned
    # (the flush's marker is released mid-service): wait for it, briefly, so a file cut by
    # someone else in that moment is still checked. Polled, not acquired: taking ``_busy``
    # would turn the pool thread away from a service it was asked for.
    deadline = time.monotonic() + _IDLE_WAIT
    while writer._busy.locked() and not writer._deque and time.monotonic() < deadline:
        time.sleep(0.001)
    if writer._deque or writer._busy.locked():
        return True  # the last run's records are still being written: the file is ours
    # Idle: the file must end where the writer left it. Truncated or rewritten by someone
    # else (same inode, e.g. Path.write_bytes): reopen, which checks it again.
    now = _stat(writer.path)
    return now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) and (
        now.st_size == writer._end)


def shared_writer(path: str | os.PathLike[str], **opts: Any) -> TraceWriter:
    """Return the open writer of the file at ``path`` in this process, or open one.

    Each call must be paired with ``release_writer``. The first opener's options win
    (``mode`` only matters to the writer that opens the file), except that a stronger
    ``durability`` from any user upgrades the shared writer. A kept writer is taken over
    with the new run's ``durability`` when its other options match.

    Raises:
        TracePathError: as ``TraceWriter`` (another process holds the file, ...).
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
                    _evict()
                return writer
            writer, refs = entry
            if not writer.closed:
                assert st is not None and key is not None  # found by the file's key
                if refs or _reusable(writer, st, opts):
                    writer._kept_at = 0.0
                    _shared[key] = (writer, refs + 1)
                    # A kept writer takes the new run's durability; a shared one the
                    # stronger of its users'.
                    if not refs or (DURABILITY_RANK.get(wanted, 0)
                                    > DURABILITY_RANK[writer.durability]):
                        writer.durability = wanted
                    return writer
                writer._begin_close()  # wait for it below, then open the file again
        # The last run on this file is closing it: wait (bounded) and open it again.
        _pool.service().want(writer)
        if not writer._done.wait(writer.close_timeout):
            with _registry_lock:
                if key is not None and _shared.get(key, (None, 0))[0] is writer:
                    del _shared[key]  # stuck: the lock it holds will refuse the new writer


def release_writer(writer: TraceWriter) -> None:
    """Give back a writer from ``shared_writer``; the last release keeps it open.

    With ``durability="frame"`` its queue is written by the pool in the background and
    this returns at once; otherwise this waits (``close_timeout``) until the run is in
    the file (and synced, with ``"fsync"``). A writer that failed is closed.
    """
    key = writer._key
    with _registry_lock:
        entry = _shared.get(key) if key is not None else None
        mine = entry is not None and entry[0] is writer
        if mine and entry[1] > 1:  # type: ignore[index]
            _shared[key] = (writer, entry[1] - 1)  # type: ignore[index]
            return
        kept = mine and not writer.failed and not writer.closed
        if kept:
            _shared[key] = (writer, 0)  # type: ignore[index]
            writer._kept_at = time.monotonic()
            _evict()
    if kept:
        if writer.durability == "frame":
            return
        wait = writer.close_timeout
        ok = writer.fsync(wait) if writer.durability == "fsync" else writer.flush(wait)
        if not ok:
            writer._note_problem(
                f"leaving the run timed out after {wait:g} s with {writer.pending} records "
                "not yet written (is the storage stalled?); the program continues, and the "
                "file keeps the frames written so far")
            writer._warn(stacklevel=4)  # _warn, here, the recorder's exit, the user
        return
    writer.close()
    with _registry_lock:
        if key is not None and _shared.get(key, (None, 0))[0] is writer and writer._done.is_set():
            del _shared[key]


def _evict() -> None:
    """Drop closed writers' entries; close the least recently used kept writers beyond
    ``MAX_KEPT`` (under ``_registry_lock``, at every open and every release)."""
    kept: list[tuple[float, TraceWriter]] = []
    for key, (writer, refs) in list(_shared.items()):
        if writer._done.is_set():
            del _shared[key]
        elif refs == 0 and not writer.closed:
            kept.append((writer._kept_at, writer))
    kept.sort(key=lambda k: k[0])
    for _, writer in kept[: max(0, len(kept) - MAX_KEPT)]:
        writer._begin_close()  # finished by a pool thread


def _release_kept(key: tuple[int, int]) -> bool:
    """Close the writer of ``key`` if no run is using it; True once it is closed.

    Another open of the file in this process (a ``TraceWriter`` made directly) finds it
    locked by the writer kept for a next run: that writer gives way.
    """
    with _registry_lock:
        entry = _shared.get(key)
        if entry is None or entry[1] != 0:
            return False
        writer = entry[0]
        writer._begin_close()
    return writer._done.wait(writer.close_timeout)


def _close_kept_before_fork() -> None:
    """Close the kept writers before ``os.fork()`` (bounded: ``_FORK_TIMEOUT`` in all).

    A forked child shares its parent's open files and their locks: a file kept open for a
    next run would refuse the child's ``record()`` of it.
    """
    if not _shared or not _registry_lock.acquire(timeout=_FORK_TIMEOUT):
        return
    try:
        kept = [w for w, refs in _shared.values() if refs == 0 and not w.closed]
        for writer in kept:
            writer._begin_close()
    finally:
        _registry_lock.release()
    deadline = time.monotonic() + _FORK_TIMEOUT
    for writer in kept:
        writer._done.wait(max(0.0, deadline - time.monotonic()))


_FORK_TIMEOUT = 1.0
_trace_file.release_kept = _release_kept
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_close_kept_before_fork)
