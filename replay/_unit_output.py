"""The output trace of a replay: one sealed run per unit, appended; and reading it back.

Layout (what ``read_units`` reads and what an estimator joins on):

* every finished unit is **one run** of the output trace, appended with
  ``al.record(out, mode="a")``: ``system`` is the replay's ``output_system``,
  ``RunStart.meta`` is the replay's ``output_meta`` plus
  ``{"agentlog.replay": {"unit": key, "status": "ok" | "failed", "attempts": n,
  "job": "module:qualname", **provenance}}``;
* an ``ok`` unit's run holds its ``UnitScore``\\ s as run-level ``Score`` records (window
  -1), each with its ``channel``, ``layout``, ``wave``, ``transition`` and
  ``state_hash``;
* a ``failed`` unit's run holds one window ``agentlog.replay.unit`` (entry
  ``{"unit": key}``) whose failure exit carries the error's type and its message,
  scrubbed of credentials by the recording core as any window failure is;
* a unit is **sealed** when its run has its ``RunEnd``. A re-run skips every key sealed
  ``ok``; a unit sealed only as ``failed``, or whose run was cut by a crash (no
  ``RunEnd``), runs again and appends a new run. ``read_units`` gives, per key, the
  first sealed ``ok`` run, else the last sealed failure.

Units finished close together are written as one batch, a batch at most every 20 ms or
every 256 units, and at the end; the batch's runs are written one after another (the
file's writer stays open between them), so each run's records fill frames of their own.
A process killed (SIGKILL, or SIGTERM, which writes what was queued and ends the
process) loses the units not yet written, and may leave the file ending in a run cut
short and a torn frame. Before it appends, a re-run sets those aside
(``set_aside_cut_runs``): the file is rewritten, next to itself and then renamed over
it, with every frame of the complete runs byte for byte and without the frames of the
runs that have no ``RunEnd``; those units run again. The output then passes
``agentlog verify`` as an uninterrupted replay's does.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.records import (
    EXIT_FAILED,
    Blob,
    RunEnd,
    RunStart,
    RunView,
    Score,
    WindowExit,
    iter_runs,
)

from ._units import LEGACY_JOBS, ScoreTuple, UnitScore, score_of

try:  # pragma: no cover - always there on POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["UnitOutput", "read_units", "sealed_units", "set_aside_cut_runs"]

META_KEY = "agentlog.replay"
UNIT_WINDOW = "agentlog.replay.unit"


@dataclass(frozen=True)
class Outcome:
    """A finished unit, as plain data (what a worker returns and the driver writes)."""

    key: str
    provenance: Mapping[str, Any]
    attempts: int
    scores: list[ScoreTuple] = field(default_factory=list)
    error_type: str | None = None
    message: str | None = None
    transient: bool = False
    live_calls: int = 0

    @property
    def ok(self) -> bool:
        return self.error_type is None


@dataclass(frozen=True)
class UnitOutput:
    """A unit as its output trace holds it.

    Attributes:
        key: the unit's key.
        status: ``"ok"`` or ``"failed"``.
        attempts: attempts the run that wrote it made.
        scores: its scores (empty when failed).
        provenance: the unit's provenance, as given.
        job: the job's ``"module:qualname"`` (None for a job without one).
        error_type: the failure's exception type (None when ok).
        error_message: the failure's message, scrubbed (None when ok).
        run_id: the output run that holds it.
    """

    key: str
    status: str
    attempts: int
    scores: tuple[UnitScore, ...]
    provenance: dict[str, Any]
    job: str | None
    error_type: str | None
    error_message: str | None
    run_id: str


def _unit_of(run: RunView) -> UnitOutput | None:
    start = run.start
    if start is None or run.end is None:
        return None  # cut by a crash: not sealed
    meta = start.meta.get(META_KEY)
    if not isinstance(meta, dict) or not isinstance(meta.get("unit"), str):
        return None  # a run that is not a replay unit
    provenance = {k: v for k, v in meta.items() if k not in ("unit", "status", "attempts",
                                                              "job")}
    scores: list[UnitScore] = []
    error_type = error_message = None
    for rec in run.records:
        if isinstance(rec, Score) and rec.window == -1:
            scores.append(UnitScore(rec.name, rec.value, rec.channel, rec.layout, rec.wave,
                                    rec.transition, rec.state_hash))
        elif isinstance(rec, WindowExit) and rec.name == UNIT_WINDOW and (
                rec.status == EXIT_FAILED):
            error_type, error_message = rec.error_type, rec.error_message
    status = "failed" if meta.get("status") == "failed" else "ok"
    attempts = meta.get("attempts")
    job = meta.get("job")
    job = LEGACY_JOBS.get(job, job) if isinstance(job, str) else job
    return UnitOutput(
        key=meta["unit"], status=status, attempts=attempts if isinstance(attempts, int) else 0,
        scores=tuple(scores) if status == "ok" else (), provenance=provenance,
        job=job if isinstance(job, str) else None, error_type=error_type,
        error_message=error_message, run_id=start.run_id)


def _iter_units(path: Path, job: str | None = None, *, check: bool = False
                ) -> Iterator[UnitOutput]:
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return
    for item in iter_runs(path, name="out"):
        unit = _unit_of(item.run)
        if check:
            _check_output_run(path, item.run, unit, job)
        if unit is not None:
            yield unit


def _check_output_run(path: Path, run: RunView, unit: UnitOutput | None,
                      job: str | None) -> None:
    """Refuse an output that holds what a replay did not write: appending units to an
    agent's own trace would mix them with its runs (``certify`` then finds runs with no
    task, and the agent's runs would be read as failed units)."""
    start = run.start
    meta = None if start is None else start.meta.get(META_KEY)
    if unit is None and not (isinstance(meta, dict) and isinstance(meta.get("unit"), str)):
        what = "a run with no start" if start is None else (
            f"run {start.run_id} of system {start.system!r}"
            + ("" if start.task is None else f", task {start.task!r}"))
        raise ValueError(
            f"{path}: the output already holds {what}, which is not a replay unit (a "
            "recorded trace?); a replay appends its units to its output, so it never "
            "writes into a trace it did not write. Pass another output path (e.g. "
            f"{path.with_name(path.stem + '.replay.zst')}), or a folder for intervene")
    if unit is not None and job is not None and unit.job is not None and unit.job != job:
        raise ValueError(
            f"{path}: the output holds units of another kind of replay ({unit.job}), and "
            f"this one runs {job}; units of different replays in one file would be read "
            "as one study. Pass another output path")


def read_units(out: str | os.PathLike[str]) -> dict[str, UnitOutput]:
    """Every unit sealed in a replay's output trace, by key (see the layout above).

    Per key: the first sealed ``ok`` run, else the last sealed failure. Runs cut by a
    crash (no ``RunEnd``) and runs that are not replay units are ignored. A missing or
    empty file holds no units.

    Raises:
        TraceFormatError, OSError: as ``agentlog.read``.
    """
    units: dict[str, UnitOutput] = {}
    for unit in _iter_units(Path(out)):
        held = units.get(unit.key)
        if held is None or held.status != "ok":
            units[unit.key] = unit
    return units


def sealed_units(out: str | os.PathLike[str], *, job: str | None = None) -> set[str]:
    """The keys a re-run into ``out`` skips: units sealed ``ok`` (streamed, memory bounded).

    Args:
        out: the output trace.
        job: the replay's job (``"module:qualname"``); when given, units of another job
            are refused.

    Raises:
        ValueError: ``out`` holds a run that is not a replay unit (a recorded trace given
            as the output), or units of another job. The message names the run and says
            what to pass instead.
        TraceFormatError, OSError: as ``agentlog.read``.
    """
    return {u.key for u in _iter_units(Path(out), job, check=True) if u.status == "ok"}


# ---------------------------------------------------------------------------- writing


class _CarriedError(Exception):
    """Re-raises a unit's failure inside its window, so the core records and scrubs it."""


_carriers: dict[str, type[_CarriedError]] = {}
_pending_error: ContextVar[_CarriedError | None] = ContextVar("agentlog_replay_failure",
                                                              default=None)


def _carrier(error_type: str, message: str) -> _CarriedError:
    cls = _carriers.get(error_type)
    if cls is None:
        # A class that only carries the recorded type's name: the failure exit then names
        # the job's exception type, whichever process raised it. Nothing is imported.
        cls = type("CarriedError", (_CarriedError,), {"__qualname__": error_type,
                                                      "__module__": __name__})
        if len(_carriers) < 1024:  # bounded: the names come from the user's exceptions
            _carriers[error_type] = cls
    return cls(message)


@al.window(UNIT_WINDOW)
def _failed_unit(unit: str) -> None:
    exc = _pending_error.get()
    assert exc is not None
    raise exc


def _write_failure(outcome: Outcome) -> None:
    _pending_error.set(_carrier(outcome.error_type or "Exception", outcome.message or ""))
    with contextlib.suppress(_CarriedError):  # recorded as the window's failure exit
        _failed_unit(outcome.key)


class OutputWriter:
    """Writes finished units into the output trace, a batch of runs at a time.

    The runs of a batch are written one after another, each closed before the next opens
    (the core keeps the file's writer open from one to the next), so a crash can cut at
    most the run being written, at the end of the file, in frames of its own
    (``set_aside_cut_runs``). Every batch is handed to the OS before ``write`` returns.
    """

    def __init__(self, out: Path, *, system: str, meta: Mapping[str, Any] | None,
                 job_id: str | None) -> None:
        self.out = out
        self.system = system
        self.meta = dict(meta or {})
        self.job_id = job_id
        self.written = 0

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Append one sealed run per outcome, in order; on disk when this returns."""
        if not outcomes:
            return
        try:
            for o in outcomes:
                self._write_one(o)
        finally:
            # Hand the sealed runs to the OS now (bounded wait), not at the next frame cut:
            # a unit reported done is on disk even if the process is killed a moment later.
            al.settle(self.out)
        self.written += len(outcomes)

    def _write_one(self, o: Outcome) -> None:
        unit_meta = {"unit": o.key, "status": "ok" if o.ok else "failed",
                     "attempts": o.attempts, "job": self.job_id, **o.provenance}
        rec = al.record(self.out, mode="a", system=self.system,
                        meta={**self.meta, META_KEY: unit_meta})
        # In a context of its own: the replay's caller may be inside a run, which must
        # neither become the unit's parent nor see the unit as its current run.
        ctx = contextvars.copy_context()
        ctx.run(rec.__enter__)
        try:
            if o.ok:
                for s in o.scores:
                    u = score_of(s)
                    ctx.run(al.score, u.name, u.value, channel=u.channel, layout=u.layout,
                            wave=u.wave, state_hash=u.state_hash, transition=u.transition)
            else:
                ctx.run(_write_failure, o)
        finally:
            ctx.run(rec.__exit__, None, None, None)

    def close(self) -> None:
        """Wait (bounded) until every unit written is handed to the OS."""
        al.settle(self.out)


# ------------------------------------------------------------------ after a crash


def set_aside_cut_runs(out: str | os.PathLike[str]) -> int:
    """Rewrite ``out`` without the runs a crash cut short; the number of runs set aside.

    A replay killed while it wrote (SIGKILL, SIGTERM, a power cut) can leave its output
    ending in a run without ``RunEnd`` and a torn frame, which ``agentlog verify`` reports
    for good, whatever a resume appends after them. This writes the file again next to
    itself (``.<name>.<pid>.resume``), synced, and renames it over ``out``: the file
    header and every frame that holds no record of a cut run, byte for byte (so every
    complete run keeps its digest and receipts), and nothing after the last complete
    frame. The cut units are not sealed, so the resume runs them again.

    Nothing is changed when there is nothing to set aside, when another writer holds the
    file, or when a cut run shares a frame with another run or a Blob (a file written by
    an earlier agentlog, whose batches interleaved their runs): setting it aside would
    change bytes a complete run's digest covers, so the file is left as it is, with an
    ``InstrumentationWarning``.

    Raises:
        TraceFormatError, OSError: the file cannot be read (as ``agentlog.iter_frames``).
    """
    path = Path(out)
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    started: set[int] = set()
    ended: set[int] = set()
    with al.iter_frames(path) as frames:
        for frame in frames:
            for r in frame.records:
                kind = type(r)
                if kind is RunStart:
                    started.add(r.run)
                elif kind is RunEnd:
                    ended.add(r.run)
    cut = started - ended
    if not cut and not frames.truncated:
        return 0
    if frames.format_version is None:
        return 0  # not even a whole file header: appending writes a new one
    keep = _frames_to_keep(path, cut)
    if keep is None:
        warnings.warn(
            f"{path}: {len(cut)} run(s) cut short by a crash share frames with other runs, "
            "so they cannot be set aside without changing what the complete runs' digests "
            "cover (the file was written by an older agentlog); the resume appends after "
            "them, and `agentlog verify` keeps reporting them", al.InstrumentationWarning,
            stacklevel=2)
        return 0
    return len(cut) if _rewrite(path, keep) else 0


def _frames_to_keep(path: Path, cut: set[int]) -> list[tuple[int, int]] | None:
    """Byte ranges of ``path`` to keep (header and whole frames), None if a frame mixes a
    cut run's records with anything else."""
    keep: list[tuple[int, int]] = []
    start: int | None = None  # the frame being looked at: kept when the next one starts
    kept = True
    with al.iter_frames(path) as frames:
        for frame in frames:
            if start is None:
                keep.append((0, frame.offset))  # the file header
            elif kept:
                keep.append((start, frame.offset))
            runs = {getattr(r, "run", None) for r in frame.records}
            ours = runs & cut
            if ours and (runs - cut or any(type(r) is Blob for r in frame.records)):
                return None
            start, kept = frame.offset, not ours
    end = frames.end_offset
    if start is None:
        keep.append((0, end))
    elif kept:
        keep.append((start, end))
    return keep


def _rewrite(path: Path, keep: list[tuple[int, int]]) -> bool:
    """Write the byte ranges ``keep`` of ``path`` to a sibling, synced, and rename it over
    ``path``; False (nothing changed) when a writer holds the file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.resume")
    src = os.open(path, os.O_RDONLY)
    try:
        try:  # a writer (another replay, or this process's own) holds it: leave it be
            if fcntl is not None:
                fcntl.flock(src, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(dst, os.fstat(src).st_mode & 0o7777)
            for lo, hi in keep:
                while lo < hi:
                    chunk = os.pread(src, min(hi - lo, 1 << 20), lo)
                    if not chunk:
                        raise OSError(f"{path} shrank while it was rewritten")
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(dst, view):]
                    lo += len(chunk)
            os.fsync(dst)
        finally:
            os.close(dst)
        os.replace(tmp, path)  # under the old file's lock: no writer appends meanwhile
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        os.close(src)
    with contextlib.suppress(OSError):  # the rename itself on disk
        dirfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    return True
