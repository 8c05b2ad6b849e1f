"""What a trace writer's queue holds besides records, and the writer's argument checks.

A ``TraceWriter``'s queue (``agentlog._writer``) holds records and two markers: a
``FlushMarker`` (``flush()``, a window-durable ``cut_frame()``: its event is set once
everything before it is handed to the OS) and ``CUT`` (a frame ends here). A writer that
cannot write swaps its queue for a ``DroppingQueue``, which counts what it is given, and
while a SIGTERM ends the process (``agentlog._writer.pool``) its queue is a
``HoldingQueue``, which holds back the threads that would add to it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from agentlog._writer.writer import TraceWriter

__all__ = ["CUT", "DURABILITY_RANK", "MARKERS", "CutMarker", "DroppingQueue", "FlushMarker",
           "HoldingQueue", "RecordQueue", "check_writer_args", "positive_seconds"]

DURABILITY_RANK = {"frame": 0, "window": 1, "fsync": 2}


class RecordQueue(Protocol):
    def append(self, item: Any, /) -> None: ...

    def __len__(self) -> int: ...


class FlushMarker:
    """Placed in the queue by ``flush``; set once everything before it is written."""

    __slots__ = ("event", "fsync")

    def __init__(self, fsync: bool = False) -> None:
        self.event = threading.Event()
        self.fsync = fsync


class CutMarker:
    """Placed in the queue by ``cut_frame``: a frame ends here."""

    __slots__ = ()


CUT = CutMarker()
MARKERS = frozenset((FlushMarker, CutMarker))


class DroppingQueue:
    """Stands in for the queue of a writer that cannot write: counts, keeps nothing."""

    __slots__ = ("_writer",)

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer

    def append(self, item: Any, /) -> None:
        if type(item) is FlushMarker:
            item.event.set()
        elif item is not CUT:
            self._writer.dropped += 1

    def __len__(self) -> int:
        return 0


class HoldingQueue:
    """Stands in for a writer's queue while a SIGTERM ends the process.

    The SIGTERM handler swaps it in before the last frames are written: a thread that
    would add a record (a window's exit, so the window would return) waits here instead,
    and the process ends before it returns. What the queue held is written, so no window
    that returned before the swap is lost, however many threads keep recording. The wait
    is a sleep loop, not a lock (the handler may run while its thread holds any lock);
    it ends when the handler releases it (the process was not terminated after all) or
    after ``timeout`` seconds, and the record then goes to the queue as usual.
    """

    __slots__ = ("_deque", "_until", "released")

    def __init__(self, queue: deque[Any], timeout: float) -> None:
        self._deque = queue
        self._until = time.monotonic() + timeout
        self.released = False

    def append(self, item: Any, /) -> None:
        while not self.released and time.monotonic() < self._until:
            time.sleep(0.005)
        self._deque.append(item)

    def __len__(self) -> int:
        return 0  # ``put`` takes its short path straight to ``append``


def positive_seconds(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"`{name}` must be a finite number of seconds > 0; found {value!r}")
    return float(value)


def check_writer_args(frame_records: int, frame_interval: float, durability: str, mode: str,
                     on_full: str, max_queue_bytes: int) -> None:
    if isinstance(frame_records, bool) or not isinstance(frame_records, int) or frame_records < 1:
        raise ValueError(f"`frame_records` must be an int >= 1; found {frame_records!r}")
    positive_seconds("frame_interval", frame_interval)
    if durability not in DURABILITY_RANK:
        raise ValueError(
            f"`durability` must be 'frame', 'window' or 'fsync'; found {durability!r}"
        )
    if mode not in ("x", "a", "w"):
        raise ValueError(
            f"`mode` must be 'x' (new trace), 'a' (append runs) or 'w' (replace); found {mode!r}"
        )
    if on_full not in ("block", "drop"):
        raise ValueError(f"`on_full` must be 'block' or 'drop'; found {on_full!r}")
    if (isinstance(max_queue_bytes, bool) or not isinstance(max_queue_bytes, int)
            or max_queue_bytes < 1 << 16):
        raise ValueError(
            f"`max_queue_bytes` must be an int >= 65536; found {max_queue_bytes!r}"
        )
