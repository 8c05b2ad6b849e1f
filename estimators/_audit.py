"""Audit metrics for pool estimates: MAE, ranking sensitivity S, direction error, worst case.

Conventions ([SSC] §4 and Appendix F): errors are averaged within each question, then
questions weigh equally. Ranking sensitivity averages the repeated runs of each (question,
configuration, ranking) *before* comparing the two rankings (eq. 16):

    S = (1/Q) Σ_q (1/|C_q|) Σ_{c∈C_q} |θ̄_{q,c,pro} − θ̄_{q,c,anti}|

Direction categories: above ``+0.05`` positive, below ``−0.05`` negative, otherwise neutral;
any different pair of labels is a direction error. Confidence intervals resample whole
questions with all their runs (``_bootstrap``), one shared set of draws for every metric
and method, so paired differences between methods have consistent intervals.

Examples:
    >>> from agentlog.estimators import cess
    >>> cess.mae([0.1, 0.3], [0.0, 0.0], question=["a", "b"])
    0.2
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog.deprecation import warn_renamed

from ._bootstrap import BootstrapResult, bootstrap_cluster_means, group_means
from ._cess import inputs_hash
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

FloatArray = NDArray[np.float64]
METRICS = ("mae", "ranking_sensitivity", "direction_error", "worst_ranking_mae")


def _values(name: str, x: ArrayLike, n: int | None = None) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None] if n is None else np.full(n, float(arr))
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise ValueError(f"`{name}` must have one value per run ({n}); found shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite; found NaN or inf at run "
                         f"{int(np.flatnonzero(~np.isfinite(arr))[0])}")
    return arr


def _questions(question: ArrayLike | Sequence[Any] | None, n: int) -> tuple[int, NDArray[np.intp]]:
    if question is None:
        return n, np.arange(n, dtype=np.intp)
    uniq, code = codes(question, name="question")
    if code.shape[0] != n:
        raise ValueError(f"`question` has {code.shape[0]} labels for {n} runs")
    return len(uniq), code


def direction(x: ArrayLike, *, threshold: float = 0.05) -> NDArray[np.int8]:
    """-1 / 0 / +1: negative, neutral or positive conclusion at ``±threshold``."""
    arr = np.asarray(x, dtype=np.float64)
    return (np.where(arr > threshold, 1, 0) - np.where(arr < -threshold, 1, 0)).astype(np.int8)


def _per_question_mae(e: FloatArray, t: FloatArray, q: NDArray[np.intp], nq: int) -> FloatArray:
    return group_means(np.abs(e - t), q, nq)


def _per_question_direction(e: FloatArray, t: FloatArray, q: NDArray[np.intp], nq: int,
                            threshold: float) -> FloatArray:
    wrong = (direction(e, threshold=threshold) != direction(t, threshold=threshold))
    return group_means(wrong.astype(np.float64), q, nq)


def _cells(e: FloatArray, q: NDArray[np.intp], nq: int, ranking: Any, group: Any,
           ) -> tuple[FloatArray, NDArray[Any]]:
    """Mean estimate per (question, configuration, ranking): shape (Q, C, R), NaN if empty."""
    r_uniq, r = codes(ranking, name="ranking")
    if group is None:
        c, nc = np.zeros(e.shape[0], dtype=np.intp), 1
    else:
        c_uniq, c = codes(group, name="group")
        nc = len(c_uniq)
    nr = len(r_uniq)
    flat = (q * nc + c) * nr + r
    means = group_means(e, flat, nq * nc * nr)
    return means.reshape(nq, nc, nr), r_uniq


def _per_question_sensitivity(e: FloatArray, q: NDArray[np.intp], nq: int, ranking: Any,
                              pro: Any, anti: Any, group: Any) -> FloatArray:
    cells, r_uniq = _cells(e, q, nq, ranking, group)
    names = [str(x) for x in r_uniq]
    for label, which in ((pro, "pro"), (anti, "anti")):
        if str(label) not in names:
            raise ValueError(f"`{which}`={label!r} is not a ranking in the data; found {names}")
    diff = np.abs(cells[:, :, names.index(str(pro))] - cells[:, :, names.index(str(anti))])
    with warnings.catch_warnings():  # "mean of empty slice": the question lacks a pair
        warnings.simplefilter("ignore", RuntimeWarning)
        per_q: FloatArray = np.nanmean(diff, axis=1)
    return per_q


def _per_question_worst(e: FloatArray, t: FloatArray, q: NDArray[np.intp], nq: int,
                        ranking: Any) -> FloatArray:
    cells, _ = _cells(np.abs(e - t), q, nq, ranking, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        worst: FloatArray = np.nanmax(cells[:, 0, :], axis=1)
    return worst


def mae(estimates: ArrayLike, truth: ArrayLike, *, question: Any = None) -> float:
    """Mean absolute error, averaged within each question, questions weighted equally."""
    e = _values("estimates", estimates)
    t = _values("truth", truth, e.shape[0])
    nq, q = _questions(question, e.shape[0])
    return float(_per_question_mae(e, t, q, nq).mean())


def direction_error(estimates: ArrayLike, truth: ArrayLike, *, question: Any = None,
                    threshold: float = 0.05) -> float:
    """Share of runs whose direction category (±threshold) differs from the target's."""
    e = _values("estimates", estimates)
    t = _values("truth", truth, e.shape[0])
    nq, q = _questions(question, e.shape[0])
    return float(_per_question_direction(e, t, q, nq, threshold).mean())


def ranking_sensitivity(estimates: ArrayLike, *, question: Any, ranking: Any, pro: Any,
                        anti: Any, group: Any = None) -> float:
    """Ranking sensitivity S of [SSC] eq. 16 (runs averaged before rankings compared).

    Args:
        estimates: one estimate per run.
        question: question label per run.
        ranking: ranking label per run; ``pro`` and ``anti`` name the two compared.
        group: configuration label per run (model × controller × stopping); default one.
    """
    e = _values("estimates", estimates)
    nq, q = _questions(question, e.shape[0])
    per_q = _per_question_sensitivity(e, q, nq, ranking, pro, anti, group)
    if np.isnan(per_q).all():
        raise ValueError("no question has runs under both rankings")
    return float(np.nanmean(per_q))


def worst_ranking_mae(estimates: ArrayLike, truth: ArrayLike, *, question: Any,
                      ranking: Any) -> float:
    """Per question the larger error of its rankings (runs averaged), averaged over questions."""
    e = _values("estimates", estimates)
    t = _values("truth", truth, e.shape[0])
    nq, q = _questions(question, e.shape[0])
    return float(_per_question_worst(e, t, q, nq, ranking).mean())


@dataclass(frozen=True)
class AuditResult:
    """Metrics per method with question-clustered bootstrap intervals (shared draws).

    Each metric uses every question it can: ranking sensitivity only the questions with
    runs under both rankings, MAE and direction error every question. ``n_questions`` is the
    number of questions; ``questions_used[metric]`` how many entered that metric.
    """

    methods: tuple[str, ...]
    metrics: tuple[str, ...]
    values: dict[str, dict[str, float]]
    bootstrap: BootstrapResult
    n_questions: int
    confidence_level: float
    inputs_hash: str = ""  # SHA-256 of the per-question metric matrix and the settings
    questions_used: dict[str, int] = field(default_factory=dict)

    def confidence_interval(self, method: str, metric: str, *,
                            confidence_level: float | None = None) -> ConfidenceInterval[float]:
        """The question-clustered percentile interval of ``metric`` for ``method``, at the
        audit's ``confidence_level`` unless another is given."""
        j = self._column(method, metric)
        low, high = self.bootstrap.confidence_interval(
            self.confidence_level if confidence_level is None else confidence_level)
        return ConfidenceInterval(float(low[j]), float(high[j]))

    def interval(self, method: str, metric: str) -> ConfidenceInterval[float]:
        """Deprecated: ``confidence_interval`` (same arguments)."""
        warn_renamed("AuditResult.interval", "AuditResult.confidence_interval")
        return self.confidence_interval(method, metric)

    def difference(self, a: str, b: str, metric: str) -> tuple[float, float, float]:
        """``metric(a) − metric(b)`` with its paired percentile interval (same resamples)."""
        ja, jb = self._column(a, metric), self._column(b, metric)
        d = self.bootstrap.samples[:, ja] - self.bootstrap.samples[:, jb]
        alpha = (1 - self.confidence_level) / 2
        low, high = np.nanquantile(d, [alpha, 1 - alpha])
        return self.values[a][metric] - self.values[b][metric], float(low), float(high)

    def _column(self, method: str, metric: str) -> int:
        if method not in self.methods or metric not in self.metrics:
            raise KeyError(f"unknown method/metric {method!r}/{metric!r}; methods "
                           f"{list(self.methods)}, metrics {list(self.metrics)}")
        return self.methods.index(method) * len(self.metrics) + self.metrics.index(metric)


def audit(
    estimates: Mapping[str, ArrayLike],
    truth: ArrayLike,
    *,
    question: Any,
    ranking: Any = None,
    pro: Any = None,
    anti: Any = None,
    group: Any = None,
    threshold: float = 0.05,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> AuditResult:
    """MAE, ranking sensitivity, direction error and worst-ranking MAE for several methods.

    Without ``ranking`` only MAE and direction error are computed. Intervals resample whole
    questions (all their runs) ``n_resamples`` times with ``default_rng(seed)``. Each metric
    uses every question it can: questions without both rankings do not enter S (nor its
    interval) but do enter MAE, direction error and worst-ranking MAE
    (``AuditResult.questions_used``).
    """
    if not estimates:
        raise ValueError("`estimates` is empty; pass {'method': per-run estimates, ...}")
    confidence_level = check_confidence_level(confidence_level)
    names = tuple(estimates)
    first = _values(f"estimates[{names[0]!r}]", estimates[names[0]])
    n = first.shape[0]
    t = _values("truth", truth, n)
    nq, q = _questions(question, n)
    with_ranking = ranking is not None
    if with_ranking and (pro is None or anti is None):
        raise ValueError("`pro` and `anti` name the two rankings to compare; both are needed")
    metrics = METRICS if with_ranking else ("mae", "direction_error")
    columns: list[FloatArray] = []
    for name in names:
        e = _values(f"estimates[{name!r}]", estimates[name], n)
        cols = {"mae": _per_question_mae(e, t, q, nq),
                "direction_error": _per_question_direction(e, t, q, nq, threshold)}
        if with_ranking:
            cols["ranking_sensitivity"] = _per_question_sensitivity(e, q, nq, ranking, pro,
                                                                    anti, group)
            cols["worst_ranking_mae"] = _per_question_worst(e, t, q, nq, ranking)
        columns.extend(cols[m] for m in metrics)
    per_question = np.column_stack(columns)
    # A question without a pro/anti pair has NaN sensitivity: it leaves S (and its interval)
    # but still counts in MAE, direction error and worst-ranking MAE.
    usable = ~np.isnan(per_question)
    if not usable.any(axis=0).all():
        raise ValueError("no question has runs under both rankings")
    boot = bootstrap_cluster_means(per_question, n_resamples=n_resamples, seed=seed)
    values = {
        name: {m: float(boot.estimate[i * len(metrics) + j]) for j, m in enumerate(metrics)}
        for i, name in enumerate(names)
    }
    # the NaN pattern comes from the labels alone, so every method uses the same questions
    used = {m: int(usable[:, j].sum()) for j, m in enumerate(metrics)}
    return AuditResult(names, metrics, values, boot, nq, confidence_level,
                       inputs_hash(per_question, config=f"{names}|{n_resamples}|{seed}|"
                                   f"{threshold}"), used)
