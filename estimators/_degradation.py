"""The degradation curve and the reliability gap across difficulty levels ([DMC] §4.4).

The degradation curve holds the statistics of ``summary`` per difficulty level (easiest to
hardest), per group; the reliability gap is "the static mean minus the hardest-level
worst-case".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._cell_bootstrap import _bootstrap_means, _percentile_interval
from ._interval import ConfidenceInterval
from ._labels import codes
from ._reliability import _summary_iv, _tail_statistics, _warn_single_runs
from ._scores import FloatArray, GroupLabels, IntArray, _as_scores, _Cells, _group_codes, _readonly

Baseline = Literal["easiest", "pooled"]


def _level_codes(difficulty: ArrayLike | Sequence[Any], levels: Sequence[Any] | None,
                 n: int) -> tuple[tuple[Any, ...], IntArray]:
    arr = np.asarray(difficulty)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"`difficulty` must hold one level per score ({n} scores); found "
                         f"shape {arr.shape}")
    uniques, inverse = codes(arr, name="difficulty")
    seen = uniques.tolist()
    if levels is None:
        return tuple(seen), inverse
    order = list(levels)
    if not order:
        raise ValueError("`levels` is empty; list the difficulty levels, easiest first")
    if len(set(order)) != len(order):
        raise ValueError(f"`levels` repeats a level: {order!r}")
    unknown = [v for v in seen if v not in order]
    if unknown:
        raise ValueError(f"`difficulty` has level(s) {unknown[:3]!r} that are not in "
                         f"`levels` {order!r}")
    # Number the distinct levels seen by their place in `levels`, then every run by its level.
    _, mapping = codes(seen, name="difficulty", levels=order)
    return tuple(order), mapping[inverse]


def _check_baseline(baseline: str) -> None:
    if baseline not in ("easiest", "pooled"):
        raise ValueError(f"`baseline` must be 'easiest' (mean at the easiest level) or "
                         f"'pooled' (mean over every level); found {baseline!r}")


@dataclass(frozen=True)
class ReliabilityGapResult:
    """The reliability gap: "the static mean minus the hardest-level worst-case" (§4.4).

    Attributes:
        gap: ``static_mean − hardest_worst``.
        static_mean: the mean at the easiest level (``baseline="easiest"``) or over every
            run (``baseline="pooled"``).
        hardest_worst: the minimum score at the hardest level.
        static_level, hardest_level: the levels used (None without ``difficulty``).
    """

    gap: float
    static_mean: float
    hardest_worst: float
    static_level: Any
    hardest_level: Any


def reliability_gap(
    scores: ArrayLike,
    difficulty: ArrayLike | Sequence[Any] | None = None,
    *,
    levels: Sequence[Any] | None = None,
    baseline: Baseline = "easiest",
) -> ReliabilityGapResult:
    """Reliability gap of one system across difficulty levels ([DMC] §4.4).

    Args:
        scores: one score per run.
        difficulty: the difficulty level of each run; ``None`` treats every run as one
            level, so the gap is ``mean − worst`` (GPT-5's 0.930 in §5.1).
        levels: the levels easiest first; default: the sorted distinct ``difficulty``
            values (pass ``levels`` when the labels do not sort by difficulty).
        baseline: ``"easiest"`` (the static mean is the mean at the easiest level) or
            ``"pooled"`` (the mean over every run, what a static leaderboard reports).

    Returns:
        A ``ReliabilityGapResult``. For many groups use ``degradation_curve(...).gap``.
    """
    x = _as_scores("scores", scores)
    _check_baseline(baseline)
    if difficulty is None:
        if levels is not None:
            raise ValueError("`levels` needs `difficulty`, the level of each run")
        return ReliabilityGapResult(gap=float(x.mean() - x.min()), static_mean=float(x.mean()),
                                    hardest_worst=float(x.min()), static_level=None,
                                    hardest_level=None)
    order, code = _level_codes(difficulty, levels, x.shape[0])
    counts = np.bincount(code, minlength=len(order))
    for i in (0, len(order) - 1):
        if counts[i] == 0:
            raise ValueError(f"`levels` lists {order[i]!r} but no run has that `difficulty`")
    easiest = x[code == 0]
    hardest = x[code == len(order) - 1]
    static = float(easiest.mean() if baseline == "easiest" else x.mean())
    return ReliabilityGapResult(gap=static - float(hardest.min()), static_mean=static,
                                hardest_worst=float(hardest.min()), static_level=order[0],
                                hardest_level=order[-1])


@dataclass(frozen=True, eq=False)
class DegradationCurveResult:
    """Reliability statistics per difficulty level (easiest first), per group.

    Arrays have shape ``(n_groups, n_levels)``; without ``groups`` there is one group,
    keyed ``()``.

    Attributes:
        levels: the difficulty levels, easiest first.
        groups: the group keys (as in ``GroupedReliabilityResult``).
        names: the group label column names.
        mean, worst, cvar, reliability: the statistics per (group, level).
        n: runs per (group, level).
        bootstrap_distribution: shape ``(n_groups, n_levels, n_resamples)``.
        baseline: how ``gap`` takes the static mean (``"easiest"`` or ``"pooled"``).
        static_mean: the easiest-level mean, or the pooled mean over levels, per group.
        gap: the reliability gap per group: ``static_mean − worst[:, -1]``.
    """

    levels: tuple[Any, ...]
    groups: tuple[Any, ...]
    names: tuple[str, ...]
    mean: FloatArray
    worst: FloatArray
    cvar: FloatArray
    reliability: FloatArray
    n: NDArray[np.intp]
    alpha: float
    tau: float
    bootstrap_distribution: FloatArray = field(repr=False)
    seed: int
    baseline: str
    static_mean: FloatArray
    gap: FloatArray

    def confidence_interval(
        self, confidence_level: float = 0.95
    ) -> ConfidenceInterval[FloatArray]:
        """Percentile bootstrap intervals of each (group, level) mean."""
        low, high = _percentile_interval(self.bootstrap_distribution, confidence_level)
        return ConfidenceInterval(low, high)

    def _labels(self, key: Any) -> dict[str, Any]:
        labels = key if isinstance(key, tuple) else (key,)
        return dict(zip(self.names, labels, strict=True))

    def table(self, confidence_level: float = 0.95) -> list[dict[str, Any]]:
        """One row per (group, level): labels, level, ``n``, statistics and interval."""
        low, high = self.confidence_interval(confidence_level)
        rows = []
        for g, key in enumerate(self.groups):
            for j, level in enumerate(self.levels):
                row = self._labels(key)
                row.update(level=level, n=int(self.n[g, j]), mean=float(self.mean[g, j]),
                           worst=float(self.worst[g, j]), cvar=float(self.cvar[g, j]),
                           reliability=float(self.reliability[g, j]),
                           ci_low=float(low[g, j]), ci_high=float(high[g, j]))
                rows.append(row)
        return rows

    def gap_table(self) -> list[dict[str, Any]]:
        """One row per group: the static mean, the hardest-level worst case and the gap."""
        rows = []
        for g, key in enumerate(self.groups):
            row = self._labels(key)
            row.update(static_mean=float(self.static_mean[g]),
                       hardest_worst=float(self.worst[g, -1]), gap=float(self.gap[g]))
            rows.append(row)
        return rows


def degradation_curve(
    scores: ArrayLike,
    difficulty: ArrayLike | Sequence[Any],
    *,
    groups: GroupLabels | None = None,
    levels: Sequence[Any] | None = None,
    alpha: float = 0.2,
    tau: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
    baseline: Baseline = "easiest",
) -> DegradationCurveResult:
    """Degradation curve and reliability gap across difficulty levels ([DMC] §4.4).

    Every (group, level) cell gets the statistics of ``summary`` (mean, worst, CVaR@α,
    Reliability@τ, bootstrap CI); the gap per group is the static mean minus the worst case
    at the hardest level.

    Args:
        scores: one score per run.
        difficulty: the difficulty level of each run.
        groups: as in ``summary`` (e.g. ``(model, task)``); ``None`` for one group.
        levels: the levels easiest first; default the sorted distinct ``difficulty``.
        alpha, tau, n_resamples, seed: as in ``summary``.
        baseline: ``"easiest"`` or ``"pooled"``, see ``reliability_gap``.

    Returns:
        A ``DegradationCurveResult``.

    Raises:
        ValueError: a group has no run at some level (every cell of the curve needs runs).
    """
    x, alpha, tau, n_resamples, seed = _summary_iv(scores, alpha, tau, n_resamples, seed)
    _check_baseline(baseline)
    order, lcode = _level_codes(difficulty, levels, x.shape[0])
    if groups is None:
        names: tuple[str, ...] = ()
        keys: tuple[Any, ...] = ((),)
        gcode = np.zeros(x.shape[0], dtype=np.intp)
    else:
        names, keys, gcode = _group_codes(groups, x.shape[0])
    n_levels = len(order)
    cell = gcode * n_levels + lcode
    counts = np.bincount(cell, minlength=len(keys) * n_levels)
    if (counts == 0).any():
        g, j = divmod(int(np.flatnonzero(counts == 0)[0]), n_levels)
        who = "" if groups is None else f"group {keys[g]!r} "
        raise ValueError(f"`difficulty`: {who}has no run at level {order[j]!r}; every level "
                         "of the curve needs runs (drop the level via `levels` or add runs)")
    cells = _Cells.build(x, cell, len(keys) * n_levels)
    _warn_single_runs(cells.counts, None)
    mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
    boot = _bootstrap_means(cells, n_resamples, seed)
    shape = (len(keys), n_levels)
    mean2 = mean.reshape(shape)
    n2 = cells.counts.reshape(shape)
    if baseline == "easiest":
        static = mean2[:, 0].copy()
    else:
        static = (mean2 * n2).sum(axis=1) / n2.sum(axis=1)
    return DegradationCurveResult(
        levels=order, groups=keys, names=names, mean=_readonly(mean2),
        worst=_readonly(worst.reshape(shape)), cvar=_readonly(cvar.reshape(shape)),
        reliability=_readonly(rel.reshape(shape)), n=_readonly(n2.copy()), alpha=alpha,
        tau=tau, bootstrap_distribution=_readonly(boot.reshape(*shape, n_resamples)),
        seed=seed, baseline=baseline, static_mean=_readonly(static),
        gap=_readonly(static - worst.reshape(shape)[:, -1]),
    )
