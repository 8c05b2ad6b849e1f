"""Audit (a) of the validity card: the scorer probe battery ([DMC] §3.2, §4.4)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._record_f1 import record_f1
from ._validity_cells import (
    CONTRADICTORY,
    CORRECT,
    DEGRADED,
    DUPLICATE_LADEN,
    EMPTY,
    FABRICATED,
    FAIL,
    NOT_PROBED,
    PASS,
    VARIANTS,
    Cell,
    _combine,
    _fmt,
    _table,
)

# --------------------------------------------------------------------- (a) probe battery


@dataclass(frozen=True)
class Submission:
    """A submitted work product: records (mappings with an ``"id"``) and a self-report."""

    records: tuple[Mapping[str, Any], ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def ids(self) -> list[Any]:
        """The record ids, in order, repeats included."""
        return [r.get("id") for r in self.records]


@dataclass(frozen=True)
class ProbeTask:
    """One probe: the correct submission of a task and its ground-truth record ids.

    Attributes:
        name: the task's name.
        correct: the correct submission; its record ids must equal ``truth``.
        truth: the ground-truth record ids.
        count_key: the metadata key that self-reports the row count, if any: the battery
            keeps it consistent in the degraded variants and contradicts it in the
            contradictory-metadata variant.
        contradictory_metadata: an explicit contradictory self-report (overrides the one
            derived from ``count_key``). Without either, that probe is not probed.
    """

    name: str
    correct: Submission
    truth: tuple[Hashable, ...]
    count_key: str | None = None
    contradictory_metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "truth", tuple(self.truth))


Scorer = Callable[[Submission, tuple[Hashable, ...]], float]


def _with_count(task: ProbeTask, records: Sequence[Mapping[str, Any]]) -> Submission:
    meta = dict(task.correct.metadata)
    if task.count_key is not None:
        meta[task.count_key] = len(records)
    return Submission(tuple(records), meta)


def probe_variants(task: ProbeTask) -> dict[str, Submission | None]:
    """The five submissions of the battery for ``task`` (None: cannot be derived)."""
    correct = task.correct.records
    truth = set(task.truth)
    fabricated = []
    for i, rec in enumerate(correct):
        new_id: Any = f"fabricated-{task.name}-{i:06d}"
        while new_id in truth:
            new_id = f"{new_id}-x"
        fabricated.append({**rec, "id": new_id})
    contradictory: Submission | None = None
    if task.contradictory_metadata is not None:
        contradictory = Submission(correct, task.contradictory_metadata)
    elif task.count_key is not None:
        meta = dict(task.correct.metadata)
        meta[task.count_key] = 0 if correct else 1
        contradictory = Submission(correct, meta)
    return {
        CORRECT: task.correct,
        EMPTY: _with_count(task, []),
        FABRICATED: _with_count(task, fabricated),
        DUPLICATE_LADEN: _with_count(task, [*correct, *correct]),
        CONTRADICTORY: contradictory,
    }


@dataclass(frozen=True, eq=False)
class ProbeReport:
    """The scorer's score on every (probe task, variant) and the cells they decide.

    Attributes:
        tasks: probe task names (rows of ``scores``).
        variants: ``VARIANTS`` (columns of ``scores``).
        scores: shape ``(n_tasks, 5)``; NaN where not probed.
        errors: ``(task, variant, message)`` for every probe the scorer could not score.
        cells: one per degraded variant ("separates ...") and the contradictory-metadata
            probe ("ignores contradictory metadata").
        criterion_sensitive: the combined cell of the three degraded variants.
        margin, tolerance: the separation margin and the contradictory-metadata tolerance.
    """

    tasks: tuple[str, ...]
    variants: tuple[str, ...]
    scores: NDArray[np.float64]
    errors: tuple[tuple[str, str, str], ...]
    cells: tuple[Cell, ...]
    criterion_sensitive: Cell
    margin: float
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks),
            "variants": list(self.variants),
            "scores": [[None if math.isnan(v) else float(v) for v in row]
                       for row in self.scores.tolist()],
            "errors": [{"task": t, "variant": v, "message": m} for t, v, m in self.errors],
            "criterion_sensitive": self.criterion_sensitive.to_dict(),
            "cells": [c.to_dict() for c in self.cells],
            "margin": self.margin,
            "tolerance": self.tolerance,
        }

    def to_markdown(self) -> str:
        rows = [[t, *(_fmt(v) for v in row)] for t, row in zip(self.tasks, self.scores.tolist(),
                                                               strict=True)]
        lines = _table(["task", *self.variants], rows)
        lines += [f"- {t} / {v}: {m}" for t, v, m in self.errors]
        return "\n".join(lines)


def _probe_iv(scorer: Any, probes: Any, margin: float, tolerance: float) -> list[ProbeTask]:
    if not callable(scorer):
        raise ValueError(f"`scorer` must be callable as scorer(submission, truth) -> float; "
                         f"found {type(scorer).__name__}")
    if isinstance(probes, ProbeTask):
        probes = [probes]
    if not isinstance(probes, Sequence) or not probes:
        raise ValueError("`probes` must be a non-empty sequence of ProbeTask")
    for i, task in enumerate(probes):
        if not isinstance(task, ProbeTask):
            raise ValueError(f"`probes`[{i}] must be a ProbeTask; found {type(task).__name__}")
        f1 = record_f1(task.correct.records, task.truth)
        if f1.f1 != 1.0:
            raise ValueError(
                f"`probes`[{i}] ({task.name!r}): the correct submission does not match its "
                f"truth (precision {f1.precision:.3f}, recall {f1.recall:.3f}); the battery "
                "degrades a correct submission")
    for name, value in (("margin", margin), ("tolerance", tolerance)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"`{name}` must be a finite number >= 0; found {value!r}")
    return list(probes)


def probe_scorer(
    scorer: Scorer,
    probes: Sequence[ProbeTask] | ProbeTask,
    *,
    margin: float = 0.0,
    tolerance: float = 1e-9,
) -> ProbeReport:
    """Run ``scorer`` on the probe battery and decide criterion sensitivity ([DMC] §4.4).

    Args:
        scorer: ``scorer(submission, truth) -> float``, the user's scorer.
        probes: the probe tasks (correct submission and truth for a few tasks).
        margin: the correct submission must beat each degraded variant by more than this.
        tolerance: the contradictory-metadata probe passes when its score is within this
            of the correct submission's.

    Returns:
        A ``ProbeReport``.
    """
    tasks = _probe_iv(scorer, probes, margin, tolerance)
    scores = np.full((len(tasks), len(VARIANTS)), np.nan)
    errors: list[tuple[str, str, str]] = []
    for i, task in enumerate(tasks):
        for j, (variant, sub) in enumerate(probe_variants(task).items()):
            if sub is None:
                errors.append((task.name, variant, "no self-report to contradict: give the "
                               "task a count_key or contradictory_metadata"))
                continue
            try:
                value = float(scorer(sub, task.truth))
            except Exception as exc:  # an audit records a failing scorer, it does not stop
                errors.append((task.name, variant, f"scorer raised {type(exc).__name__}: "
                               f"{exc}"))
                continue
            if not math.isfinite(value):
                errors.append((task.name, variant, f"scorer returned {value}"))
                continue
            scores[i, j] = value
    correct = scores[:, 0]
    cells = []
    for variant in DEGRADED:
        col = scores[:, VARIANTS.index(variant)]
        probed = ~np.isnan(correct) & ~np.isnan(col)
        separated = probed & (correct > col + margin)
        tied = probed & ~separated
        if tied.any():
            t = int(np.flatnonzero(tied)[0])
            status, detail = FAIL, (
                f"not separated on {int(tied.sum())}/{len(tasks)} task(s), e.g. "
                f"{tasks[t].name!r}: correct {correct[t]:.3f} vs {variant} {col[t]:.3f}")
        elif probed.all():
            status, detail = PASS, (
                f"correct above {variant} on all {len(tasks)} task(s) (mean "
                f"{correct.mean():.3f} vs {col.mean():.3f})")
        else:
            status, detail = NOT_PROBED, (
                f"{int((~probed).sum())}/{len(tasks)} task(s) could not be scored")
        cells.append(Cell(f"scorer: separates {variant}", status, detail))
    combined = _combine([c.status for c in cells])
    rule = ("correct strictly above empty, fabricated and duplicate-laden on every task"
            + (f" by more than {margin}" if margin else ""))
    verdict = {PASS: "criterion-sensitive", FAIL: "not criterion-sensitive",
               NOT_PROBED: "some probes could not be scored"}[combined]
    sensitive = Cell("scorer: criterion-sensitive", combined, f"{verdict}; rule: {rule}")
    col = scores[:, VARIANTS.index(CONTRADICTORY)]
    probed = ~np.isnan(correct) & ~np.isnan(col)
    moved = probed & (np.abs(correct - col) > tolerance)
    if moved.any():
        t = int(np.flatnonzero(moved)[0])
        cells.append(Cell("scorer: ignores contradictory metadata", FAIL,
                          f"the score moves when only the self-report changes: "
                          f"{tasks[t].name!r} correct {correct[t]:.3f} vs contradictory "
                          f"{col[t]:.3f}; the scorer grades the report"))
    elif probed.all():
        cells.append(Cell("scorer: ignores contradictory metadata", PASS,
                          f"same score with a contradictory self-report on all {len(tasks)} "
                          "task(s): the scorer grades the data"))
    else:
        cells.append(Cell("scorer: ignores contradictory metadata", NOT_PROBED,
                          f"{int((~probed).sum())}/{len(tasks)} task(s) could not be probed"))
    return ProbeReport(
        tasks=tuple(t.name for t in tasks), variants=VARIANTS, scores=scores,
        errors=tuple(errors), cells=tuple([sensitive, *cells]), criterion_sensitive=sensitive,
        margin=float(margin), tolerance=float(tolerance),
    )
