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

Units finished close together are written as one batch (their runs open at once, so
the file is opened once per batch); a batch is written at most every 20 ms or every 256
units, and at the end. A process killed before a batch is written loses those units'
work, never the file: the re-run does them again.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.records import EXIT_FAILED, RunView, Score, WindowExit, iter_runs

from ._units import ScoreTuple, UnitScore, score_of

__all__ = ["UnitOutput", "read_units", "sealed_units"]

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

    The last run of a batch stays open until the next batch has opened its first run (or
    ``close``): the core then keeps the file open for the whole replay instead of opening
    and closing it per batch. That one unit is sealed a batch later; a crash before it
    loses only that unit, which the re-run does again. Every batch is flushed to the OS.
    """

    def __init__(self, out: Path, *, system: str, meta: Mapping[str, Any] | None,
                 job_id: str | None) -> None:
        self.out = out
        self.system = system
        self.meta = dict(meta or {})
        self.job_id = job_id
        self.written = 0
        self._held: tuple[contextvars.Context, al.record] | None = None

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Append one run per outcome; all but the last are closed (sealed) on return."""
        if not outcomes:
            return
        opened: list[tuple[contextvars.Context, al.record]] = []
        try:
            for o in outcomes:
                unit_meta = {"unit": o.key, "status": "ok" if o.ok else "failed",
                             "attempts": o.attempts, "job": self.job_id, **o.provenance}
                rec = al.record(self.out, mode="a", system=self.system,
                                meta={**self.meta, META_KEY: unit_meta})
                # Each run in its own context: the runs of a batch are open at once (the
                # file is opened once per batch) and none becomes another's parent.
                ctx = contextvars.copy_context()
                ctx.run(rec.__enter__)
                opened.append((ctx, rec))
                if o.ok:
                    for s in o.scores:
                        u = score_of(s)
                        ctx.run(al.score, u.name, u.value, channel=u.channel, layout=u.layout,
                                wave=u.wave, state_hash=u.state_hash, transition=u.transition)
                else:
                    ctx.run(_write_failure, o)
        except BaseException:
            self._close(opened)
            raise
        self.close()
        self._held = held = opened.pop()
        self._close(opened)
        # Hand the sealed runs to the OS now (bounded wait), not at the next frame cut: a
        # unit reported done is on disk even if the process is killed a moment later.
        held[0].run(al.flush)
        self.written += len(outcomes)

    def close(self) -> None:
        """Seal the run held open, if any; its end is on disk when this returns."""
        held, self._held = self._held, None
        if held is not None:
            self._close([held])
            # Leaving a run only enqueues its end: write it now (bounded), as write() does.
            al.settle(self.out)

    @staticmethod
    def _close(runs: Sequence[tuple[contextvars.Context, al.record]]) -> None:
        for ctx, rec in runs:
            ctx.run(rec.__exit__, None, None, None)
