"""One writer per trace file in a process: runs naming the same file share it.

Example::

    >>> from agentlog._shared_writers import release_writer, shared_writer
    >>> outer = shared_writer("agentlog-shared-doctest.zst", mode="w")
    >>> shared_writer("./agentlog-shared-doctest.zst") is outer
    True
    >>> release_writer(outer); release_writer(outer); outer.closed
    True
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from agentlog._writer import DURABILITY_RANK, FLUSH_TIMEOUT, TraceWriter
from agentlog._writer_pool import writers

__all__ = ["flush_all", "release_writer", "shared_writer"]

_registry_lock = threading.RLock()
# (device, inode) of the file -> (writer, references). An entry stays until its writer
# has closed the file, so a record() opening meanwhile waits for the close instead of
# opening a second writer that would truncate the file under the first.
_shared: dict[tuple[int, int], tuple[TraceWriter, int]] = {}


def _file_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def flush_all(timeout: float = FLUSH_TIMEOUT) -> bool:
    """Flush every open writer of this process within ``timeout`` in all; False if not."""
    deadline = time.monotonic() + timeout
    return all([w.flush(max(0.0, deadline - time.monotonic())) for w in writers()])


def shared_writer(path: str | os.PathLike[str], **opts: Any) -> TraceWriter:
    """Return the open writer of the file at ``path`` in this process, or open one.

    Runs that write the same file (by device and inode: a hard link or another spelling
    of the path is the same file) share one writer; each call must be paired with
    ``release_writer``. The first opener's options win (``mode`` only matters to the
    writer that opens the file), except that a stronger ``durability`` from any user
    upgrades the shared writer.

    Raises:
        TracePathError: as ``TraceWriter``.
    """
    name = os.fspath(path)
    while True:
        with _registry_lock:
            key = _file_key(name)
            entry = _shared.get(key) if key is not None else None
            if entry is None or entry[0]._done.is_set():
                if entry is not None and key is not None:
                    del _shared[key]
                writer = TraceWriter(name, **opts)
                if not writer.failed and writer._key is not None:
                    _shared[writer._key] = (writer, 1)
                return writer
            writer, refs = entry
            if not writer.closed:
                _shared[key] = (writer, refs + 1)  # type: ignore[index]
                wanted = opts.get("durability", "frame")
                if DURABILITY_RANK.get(wanted, 0) > DURABILITY_RANK[writer.durability]:
                    writer.durability = wanted
                return writer
        # The last run on this file is closing it: wait (bounded) and open it again.
        if not writer._done.wait(writer.close_timeout):
            with _registry_lock:
                if key is not None and _shared.get(key, (None, 0))[0] is writer:
                    del _shared[key]  # stuck: the lock it holds will refuse the new writer


def release_writer(writer: TraceWriter) -> None:
    """Give back a writer from ``shared_writer``; the last release closes it."""
    key = writer._key
    with _registry_lock:
        entry = _shared.get(key) if key is not None else None
        if entry is not None and entry[0] is writer and entry[1] > 1:
            _shared[key] = (writer, entry[1] - 1)  # type: ignore[index]
            return
    writer.close()
    with _registry_lock:
        if key is not None and _shared.get(key, (None, 0))[0] is writer and writer._done.is_set():
            del _shared[key]
