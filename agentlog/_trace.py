"""The in-memory ``Trace``: its index by run and window, the views and the vector helpers.

``read`` builds one from every record of a file; the views (``RunView``,
``WindowView``, ``Transition``) and the helpers (``probs``, ``draws``,
``decode_pool``, ...) answer from the records only, never from code named by
the file.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from agentlog._errors import BlobNotFoundError, MissingDependencyError, TraceFormatError
from agentlog._records import (
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_OK,
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
from agentlog._trace_arrow import _runs_table, _selections_table, _struct_table, _windows_table
from agentlog._vectors import decode_pool, draws, policy_probs, probs, raw_probs
from agentlog.display import MAX_ROWS, html_repr, render_fields, render_table

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "BlobNotFoundError",
    "RunView",
    "Trace",
    "Transition",
    "WindowView",
    "decode_pool",
    "draws",
    "policy_probs",
    "probs",
    "raw_probs",
]

ArrowKind = Literal[
    "windows", "selections", "continuations", "scores", "runs", "llm_calls", "tool_calls"
]

# -- views -----------------------------------------------------------------------------

_WINDOW_STATUS = {None: "open", EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CLOSED: "closed"}


def _run_status(run: RunView) -> str:
    """``ok``, ``failed (ErrorType)`` or ``not ended``, as ``agentlog inspect`` says it."""
    if run.end is None:
        return "not ended"
    return "ok" if run.end.status == 0 else f"failed ({run.end.error_type or 'error'})"


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


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

    @html_repr
    def _repr_html_(self) -> str:
        s = self.start
        head = render_fields([
            ("run", self.run), ("run_id", self.run_id), ("system", s and s.system),
            ("task", s and s.task), ("seed", s and s.seed), ("status", _run_status(self)),
            ("records", len(self.records)), ("windows", len(self.windows)),
        ], caption=f"Run {self.run}")
        windows = render_table(
            ["window", "name", "parent", "status", "wall ms"],
            ((w.window, w.name, w.parent, _WINDOW_STATUS.get(w.status, str(w.status)),
              _ms(w.wall_ns)) for w in self.windows),
            caption="Windows, in order of entry", total=len(self.windows))
        scores = [r for r in self.records if isinstance(r, Score)]
        return head + windows + (render_table(
            ["score", "value", "window", "channel"],
            ((r.name, r.value, "run" if r.window < 0 else r.window, r.channel)
             for r in scores), caption="Scores", total=len(scores)) if scores else "")


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
    def trace(self) -> Trace:
        """The trace this window instance was read from."""
        return self._trace

    @property
    def arguments_bytes(self) -> bytes | None:
        """The canonical bound-argument map of a window whose ``entry=`` projects (stored
        beside the projection, scrubbed; replay re-invokes the function from it). None
        when the entry is the argument map itself, or when the arguments had no canonical
        encoding and were not stored."""
        h = self.enter.args_hash
        return None if h is None else self._trace.blob(h)

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
        return (
            f"<WindowView {self.name!r} run={self.run} window={self.window} "
            f"{_WINDOW_STATUS.get(self.status, str(self.status))}>"
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
        self._positions: dict[int, int] | None = None
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

    def positions(self) -> dict[int, int]:
        """``id(record) -> its place among its run's records`` (file order), built once:
        every table of ``to_arrow`` reads it (its ``seq`` column)."""
        if self._positions is None:
            self._positions = {id(r): i for run in self.runs
                               for i, r in enumerate(run.records)}
        return self._positions


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

    @html_repr
    def _repr_html_(self) -> str:
        runs = self.runs
        head = render_fields([
            ("path", self.path), ("format version", self.format_version),
            ("records", self.records_recovered), ("frames", self.frames), ("runs", len(runs)),
            ("truncated", f"yes ({self.bytes_dropped} bytes dropped)" if self.truncated
             else "no"),
        ], caption="Trace")
        table = render_table(
            ["run", "run_id", "system", "task", "seed", "status", "windows"],
            ((r.run, r.run_id, r.start and r.start.system, r.start and r.start.task,
              r.start and r.start.seed, _run_status(r), len(r.windows))
             for r in runs[:MAX_ROWS]), caption="Runs", total=len(runs))
        names: dict[str, list[int]] = {}
        for w in self.windows():
            counts = names.setdefault(w.name, [0, 0])
            counts[0] += 1
            counts[1] += w.status != EXIT_OK
        windows = render_table(["window", "instances", "not ok"],
                               ((n, c[0], c[1]) for n, c in names.items()),
                               caption="Windows by name", total=len(names))
        return head + table + windows

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
        ``"scores"``, ``"runs"``, ``"llm_calls"`` or ``"tool_calls"``: a column per field
        of the record type, and (but in ``runs``) ``seq``, the record's
        position among its run's records (a window's: its entry's), which puts a run's
        rows of every table back in file order.

        Raises:
            MissingDependencyError: pyarrow is not installed.
            ValueError: unknown ``kind``.
        """
        builders: dict[str, Callable[[Any, Trace], Any]] = {
            "windows": _windows_table,
            "selections": _selections_table,
            "runs": _runs_table,
            "continuations": lambda pa, t: _struct_table(pa, t, Continuation),
            "scores": lambda pa, t: _struct_table(pa, t, Score),
            "llm_calls": lambda pa, t: _struct_table(pa, t, LLMCall),
            "tool_calls": lambda pa, t: _struct_table(pa, t, ToolCall),
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

