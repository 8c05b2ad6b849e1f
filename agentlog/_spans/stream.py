"""A stored trace's records, streamed run by run into what ``agentlog.export`` makes spans of.

``RunStream(source, prepare)`` reads a trace file a frame at a time (``iter_frames``) and
groups each run's records by span (``RunRecords``): window entries and exits, and what
``prepare`` makes of the rest as each record is read (a selection's, continuation's or
score's span event, a tool or model call's span attributes), so that no vector, prompt or
completion is held once it has been summarised. A run is handed over at the end of the
frame that holds its ``RunEnd`` (runs that never ended, at the end of the file), then
forgotten: records of a run already handed over, or of a run whose ``RunStart`` was not
read, are skipped as they come. A run that holds more than ``HELD_RECORDS`` items is
handed over in parts as it goes: its closed windows, tool and model calls so far (span
ids and parents stay those of the whole run: window ids, and tool and model indices
counted from the run's start), its own span with its last part.

Memory holds one frame, what the runs still open hold (at most ``HELD_RECORDS`` items
each, plus their open windows; a run that went out in parts keeps a bit per window id),
and the file's Blobs that can be candidate pools (a pool serves every later selection that
names it; each distinct content is kept once; an artifact that is not a list is not
kept), whatever the number of runs. A run's spans come out in
the order of ``agentlog.export``'s first version (run, windows in order of entry, tool
calls, model calls) unless it went out in parts; runs come out in the order they end
(the order they start, when they do not nest or interleave).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from agentlog._frames import iter_frames, iter_records
from agentlog._records import (
    Blob,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)
from agentlog._trace import Trace

__all__ = ["HELD_RECORDS", "Prepare", "RunRecords", "RunStream"]

# Items (window records, prepared events and calls, ~0.5-1 KB each) one run may hold
# before its finished spans go out in parts: ~10 MB.
HELD_RECORDS = 1 << 14


class Prepare(Protocol):
    """What a record becomes as it is read (``agentlog.export``'s span maker)."""

    def event(self, rec: Selection | Continuation | Score) -> Any:
        """The span event of a selection, continuation or score."""

    def call(self, run_id: str, rec: ToolCall | LLMCall) -> Any:
        """What the span of a tool or model call needs, the call's bytes left behind."""


def _may_be_pool(data: bytes) -> bool:
    """Whether a Blob can be a candidate pool: a msgpack array (what a selection's span
    reads). Artifacts of any other shape (an entry is a map of arguments) are not kept."""
    return bool(data) and (0x90 <= data[0] <= 0x9F or data[0] in (0xDC, 0xDD))


class _Ids:
    """A set of window ids: a bit each for the ids a recorder hands out (0, 1, 2, ... in
    each run), a plain set for others (a file agentlog did not write)."""

    __slots__ = ("bits", "others")
    BITS = 1 << 27  # ids below it take a bit: 16 MB at most

    def __init__(self) -> None:
        self.bits = bytearray()
        self.others: set[int] = set()

    def add(self, window: int) -> None:
        if not 0 <= window < self.BITS:
            self.others.add(window)
            return
        byte = window >> 3
        if byte >= len(self.bits):
            self.bits.extend(bytes(max(byte + 1, 2 * len(self.bits)) - len(self.bits)))
        self.bits[byte] |= 1 << (window & 7)

    def __contains__(self, window: int) -> bool:
        if not 0 <= window < self.BITS:
            return window in self.others
        byte = window >> 3
        return byte < len(self.bits) and bool(self.bits[byte] >> (window & 7) & 1)


class RunRecords:
    """One run's records, grouped by the span they make (what has not gone out yet).

    Attributes:
        start, end: the ``RunStart`` and ``RunEnd`` (None: not read, or not yet).
        windows: window id -> ``[enter, exit or None, events or None]``, in order of entry
            (events as ``Prepare.event`` made them).
        tools, models: tool and model calls (``Prepare.call``'s) in file order; the first
            is the run's ``first_tool``-th (``first_model``-th), counting from 0.
        scores: the span events of the run's own scores (outside any window).
        gone: ids of the windows whose spans went out in an earlier part.
        last_t: the latest timestamp of the run's records.
    """

    __slots__ = ("end", "first_model", "first_tool", "gone", "held", "last_t", "models",
                 "next_part", "scores", "seq", "start", "tools", "windows")

    def __init__(self, start: RunStart, seq: int = 0) -> None:
        self.start = start
        self.seq = seq  # order of appearance in the file
        self.end: RunEnd | None = None
        self.windows: dict[int, list[Any]] = {}
        self.tools: list[Any] = []
        self.models: list[Any] = []
        self.scores: list[Any] = []
        self.gone: _Ids | None = None  # made at the first part
        self.first_tool = 0
        self.first_model = 0
        self.last_t = start.t_ns
        self.held = 0
        self.next_part = HELD_RECORDS

    def has_window(self, window: int) -> bool:
        """Whether ``window`` is one of the run's windows (its span, a parent)."""
        return window >= 0 and (window in self.windows
                                or (self.gone is not None and window in self.gone))

    def add(self, rec: Any, prepare: Prepare) -> None:
        """Attribute one record (of this run, not a ``RunStart``) to its span."""
        self.held += 1
        t = rec.t_ns
        if t > self.last_t:
            self.last_t = t
        if isinstance(rec, RunEnd):
            self.end = rec
        elif isinstance(rec, WindowEnter):
            self.windows[rec.window] = [rec, None, None]
        elif isinstance(rec, WindowExit):
            entry = self.windows.get(rec.window)
            if entry is not None:
                entry[1] = rec
        elif isinstance(rec, ToolCall):
            self.tools.append(prepare.call(self.start.run_id, rec))
        elif isinstance(rec, LLMCall):
            self.models.append(prepare.call(self.start.run_id, rec))
        elif isinstance(rec, Selection | Continuation | Score):
            entry = self.windows.get(rec.window)
            if entry is not None:
                if entry[2] is None:
                    entry[2] = []
                entry[2].append(prepare.event(rec))
            elif isinstance(rec, Score) and not self.has_window(rec.window):
                self.scores.append(prepare.event(rec))

    def part_done(self) -> None:
        """Forget what the part just handed over held: closed windows, tool and model
        calls. The next part is due when the run holds ``HELD_RECORDS`` items, or twice
        what is left if more (a run of many open windows is not walked at every frame)."""
        closed = [wid for wid, entry in self.windows.items() if entry[1] is not None]
        gone = self.gone = self.gone if self.gone is not None else _Ids()
        for wid in closed:
            del self.windows[wid]
            gone.add(wid)
        self.first_tool += len(self.tools)
        self.first_model += len(self.models)
        self.tools = []
        self.models = []
        self.held = len(self.scores) + sum(
            1 + len(entry[2] or ()) for entry in self.windows.values())
        self.next_part = max(HELD_RECORDS, 2 * self.held)


class RunStream:
    """The runs of one trace (a file, or a ``Trace`` already read), in parts.

    Iterating yields ``(run, last)``: ``last`` is False for a part of a run still open (its
    closed windows, tool and model calls so far), True for a run's last part. After the
    iteration ``truncated`` and ``bytes_dropped`` say whether the file ended inside a
    frame. ``blob(hash)`` gives a Blob read so far (``prepare`` may ask for one).
    """

    def __init__(self, source: Trace | Path, prepare: Prepare) -> None:
        self._source = source
        self._prepare = prepare
        self.path = source.path if isinstance(source, Trace) else os.fspath(source)
        self.truncated = source.truncated if isinstance(source, Trace) else False
        self.bytes_dropped = source.bytes_dropped if isinstance(source, Trace) else 0
        self._blobs: dict[bytes, bytes] = {}
        self._parents: dict[str, str | None] | None = None

    def blob(self, hash: bytes) -> bytes | None:
        """The data of the Blob ``hash`` if it was read so far (a pool precedes its use) and
        can be a candidate pool (a msgpack array)."""
        return self._blobs.get(hash)

    def __iter__(self) -> Iterator[tuple[RunRecords, bool]]:
        source = self._source
        if isinstance(source, Trace):  # in memory already: one frame
            yield from self._runs([source.records])
            return
        frames = iter_frames(source)
        with frames:
            yield from self._runs(frame.records for frame in frames)
            self.truncated = frames.truncated
            self.bytes_dropped = frames.bytes_dropped
            self.path = frames.path

    def _runs(self, frames: Iterable[list[Any]]) -> Iterator[tuple[RunRecords, bool]]:
        blobs, prepare = self._blobs, self._prepare
        open_runs: dict[int, RunRecords] = {}  # by run index, in order of appearance
        ended: list[RunRecords] = []  # in this frame
        due: list[RunRecords] = []  # grown past their part's size in this frame
        seq = 0
        for records in frames:
            for rec in records:
                t = type(rec)
                if t is Blob:
                    if _may_be_pool(rec.data):
                        blobs.setdefault(rec.hash, rec.data)
                    continue
                if t is RunStart:
                    open_runs.pop(rec.run, None)  # a second start: the run begins afresh
                    open_runs[rec.run] = RunRecords(rec, seq)
                    seq += 1
                    continue
                run = open_runs.get(rec.run)
                if run is None:
                    continue  # a run handed over, or whose start was never read
                if t is RunEnd and run.end is None:
                    ended.append(run)
                run.add(rec, prepare)
                if run.held == run.next_part:  # once, as it crosses
                    due.append(run)
            # At the frame's end: the runs that ended (in order of appearance), then parts
            # of the runs grown large. Only these are looked at: a file of many runs that
            # never end (all open at once) costs no walk over them at every frame.
            ended.sort(key=lambda r: r.seq)
            for run in ended:
                if open_runs.get(run.start.run) is run:
                    del open_runs[run.start.run]
                yield run, True
            for run in due:
                if run.end is None and open_runs.get(run.start.run) is run:
                    yield run, False
                    run.part_done()
            ended.clear()
            due.clear()
        for run in open_runs.values():  # never ended: after the truncation is known
            yield run, True

    def parents(self) -> dict[str, str | None]:
        """The parent run id of every run of the file, by run id: one more pass over the
        file, made only for a nested run of an older trace (no ``root_run``), whose trace
        id and parent span come from its file's runs."""
        if self._parents is None:
            source = self._source
            records: Iterable[Any] = (source.records if isinstance(source, Trace)
                                      else iter_records(source))
            self._parents = {r.run_id: r.parent_run for r in records
                             if isinstance(r, RunStart)}
        return self._parents

    def root_of(self, start: RunStart) -> str:
        """The run id whose trace a run's spans join: its outermost run's."""
        if start.root_run:
            return start.root_run
        rid, parent = start.run_id, start.parent_run
        if parent is None:
            return rid
        parents = self.parents()  # an older trace names the parent only
        seen = {rid}
        while parent in parents and parent not in seen:
            rid = parent
            seen.add(rid)
            parent = parents[rid]
        return rid

    def parent_key(self, start: RunStart) -> str | None:
        """The key (``span_id``'s) of a run's parent span in its parent run, or None.

        The rule live spans follow too: a nested run is the child of the enclosing run's
        window it was opened in (``RunStart.parent_window``), else of that run's span, and
        joins the outermost run's trace (``RunStart.root_run``), so a nested run stored in
        its own file exports into its parent's trace. A trace written before those fields
        existed links a nested run to its parent run's span when both are in this file.
        """
        if start.parent_run is None:
            return None
        if start.root_run is None:  # older trace
            return "run" if start.parent_run in self.parents() else None
        if start.parent_window is None or start.parent_window < 0:
            return "run"
        return f"w{start.parent_window}"
