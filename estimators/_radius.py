"""The sampling radius of eq. 4: cluster-robust paired statistics ([LBC] §6.1).

Two variances of the paired mean ``Δ̂ = Σ d_i / N`` over ``G`` task clusters, from the
per-cluster residual sums ``E_g = Σ_{i∈g} (d_i − Δ̂)`` and sizes ``n_g`` (``p_g = n_g/N``):

* CR2 (``"cr2-bm-cf"``, the default, and ``"cr2-bm"``): the bias-reduced CR2 variance with
  Bell–McCaffrey degrees of freedom (Imbens and Kolesár 2016, "Robust Standard Errors in
  Small Samples: Some Practical Advice"). For an intercept-only regression
  ``H_gg = J/N``, so ``(I − H_gg)^{−1/2}`` scales the cluster's sum by ``1/sqrt(1 − p_g)``
  and ``se² = Σ_g E_g² / (1 − p_g) / N²``. Its degrees of freedom are ``(Σλ)² / Σλ²`` over
  the eigenvalues of the ``G × G`` matrix ``M = D (diag(n) − n nᵀ/N) D`` with
  ``D = diag(1/sqrt(1 − p_g))`` (the homoskedastic working model); since ``tr M = N`` and
  ``‖M‖²_F`` has a closed form, ``df = 1 / (Σ p_g² + (Σ a_g)² − Σ a_g²)`` with
  ``a_g = p_g² / (1 − p_g)``. Balanced clusters give ``df = G − 1`` and the same variance
  as CR1; when one cluster holds most tasks, ``df`` falls towards 1 and the radius widens.
* CR1 (``"cr1"``): ``se² = G/(G−1) · Σ_g E_g² / N²`` with ``t(G−1)`` ([LBC] eq. 4, §6.1,
  as published; statsmodels' ``cov_cluster`` with ``use_correction``). It under-covers
  when cluster sizes differ: one cluster's squared sum then dominates the variance, which
  has about one degree of freedom, not ``G − 1``.

``"cr1"`` and ``"cr2-bm"`` take ``q = t_{1−α}(df) · se`` with ``α = δ′/(2m)``, Bonferroni
over the ``m`` pairs of the family. A t reference assumes the studentized mean is symmetric.
It is not when the paired differences are skewed (a rare 0/1 success against a continuous
scorer, a long-tailed score): the studentized mean then has one heavy tail, and CR2 + BM
falsely certified up to 0.106 of null two-system boards against ``δ′ = 0.05`` (docs/explanation/
certificates.md). ``"cr2-bm-cf"`` widens the quantile by the Cornish–Fisher
expansion of the studentized mean to second order in the skewness (Hall 1992, "The
Bootstrap and Edgeworth Expansion", §2.6; the first-order term is Johnson 1978, "Modified
t Tests and Confidence Intervals for Asymmetrical Populations"):

    q = (t_{1−α}(df) + |ŝ| (2z² + 1)/6 + ŝ² z (4z² − 3)/24) · se,   z = Φ⁻¹(1 − α),

with ``ŝ = G₁/√G`` the skewness of ``Δ̂``'s sampling distribution and ``G₁`` the adjusted
Fisher–Pearson sample skewness ``sqrt(G(G−1))/(G−2) · g₁`` of the CR2-scaled cluster totals
``E_g/sqrt(1 − p_g)`` (0 for ``G < 3``). The skewness is taken in absolute value on both
sides because its sign is not reliable: a rare success that did not happen leaves a sample
skewed the other way. The kurtosis term is left out: for ``z > √3`` (``α < 0.042``) it only
narrows the quantile of heavy-tailed data, and its sample estimate is unstable. Symmetric
data give ``ŝ ≈ 0`` and the CR2 + BM radius back; the widening costs power at few clusters
(measured in the table of docs/explanation/certificates.md).

``"betting"`` (``sampling_radius`` only, with a declared ``score_range``) needs no
approximation: a confidence bound by betting (Waudby-Smith and Ramdas 2023, "Estimating
Means of Bounded Random Variables by Betting") holds for independent clusters of any shape,
also where every radius computed from the sample fails (a rare success that did not happen
on any of a board's tasks), but its radius shrinks like the score range times
``log(2m/δ′)/G``, not like ``se``: with 8–40 clusters it certifies almost nothing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning

from ._labels import codes

__all__ = [
    "SamplingRadiusResult",
    "sampling_radius",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]
Sampling = Literal["cr2-bm-cf", "cr2-bm", "cr1", "betting"]

SAMPLING_METHODS: tuple[str, ...] = ("cr2-bm-cf", "cr2-bm", "cr1", "betting")
#: Below this many effective degrees of freedom one cluster dominates the variance: the
#: radius is then so wide (t quantiles explode as df → 1) that the pair is sampling-limited.
MIN_DF = 3.0
#: A standard error at most this fraction of the largest |score| (of |d_i| when only the
#: differences are known) is zero up to rounding: far above float rounding (~1e-16), far
#: below any measured spread.
_ZERO_SE = 1e-10
#: The bets of ``"betting"``: a fraction ``c`` of the largest bet that keeps every factor
#: positive, on a halving grid from 0.95 down to 0.95/2¹¹ (small effects over many clusters
#: want small bets); the e-value is their average, so no bet is chosen from the data.
_BETS = 0.95 * 0.5 ** np.arange(12.0)
_BISECTIONS = 60  # halvings of the search interval: far below any score's resolution


@dataclass(frozen=True)
class SamplingRadiusResult:
    """Cluster-robust paired statistics, one row per pair ([LBC] §6.1, eq. 4).

    Attributes:
        estimate: ``Δ̂``, the mean paired difference over the row's tasks.
        standard_error: the cluster-robust standard error of ``Δ̂`` (CR1 for ``"cr1"``,
            CR2 otherwise).
        q: the half-width on the side of zero that eq. 4 compares ``|Δ̂|`` with: ``crit ·
            se`` for the t-based methods (``crit`` = ``t_{1−δ′/(2m)}(df)``, plus the
            Cornish–Fisher skewness terms for ``"cr2-bm-cf"``); ``Δ̂`` minus the lower
            (plus the upper, when ``Δ̂ < 0``) confidence bound for ``"betting"``. NaN when
            ``G < 2``, and ``inf`` for a zero-variance row under a t-based method (see
            ``degenerate``).
        n_tasks: tasks per row.
        n_clusters: clusters ``G`` per row.
        delta_prime: ``δ′``; family_size: ``m`` (Bonferroni).
        df: the degrees of freedom of the t quantile per row: Bell–McCaffrey's effective
            degrees of freedom for the CR2 methods (reported, not used, under
            ``"betting"``), ``G − 1`` for ``"cr1"``.
        skewness: ``G₁``, the adjusted sample skewness of the row's (CR2-scaled) cluster
            residual totals, 0 with fewer than 3 clusters: the shape the t reference
            ignores (``ŝ = G₁/√G`` is the skewness of ``Δ̂`` that ``"cr2-bm-cf"`` corrects).
        method: the ``sampling`` used.
        degenerate: rows whose standard error is zero up to rounding (at most ``1e-10``
            times the largest ``|d_i|``; every cluster's mean difference equal): no spread
            between clusters measures the sampling error, so a t-based rule never certifies
            them (``q = inf``) and a ``DegenerateDataWarning`` says so. ``"betting"`` needs
            no spread and keeps its finite radius.
    """

    estimate: FloatArray
    standard_error: FloatArray
    q: FloatArray
    n_tasks: NDArray[np.int64]
    n_clusters: NDArray[np.int64]
    delta_prime: float
    family_size: int
    df: FloatArray
    method: str
    degenerate: BoolArray
    skewness: FloatArray


@dataclass(frozen=True)
class _Moments:
    """Per row: n, mean, se, G, df, skewness; per (row, cluster) sums for resampling."""

    n: FloatArray
    mean: FloatArray
    se: FloatArray
    g: FloatArray
    df: FloatArray
    sums: FloatArray  # (K, G) Σ_{i∈g} d_i
    counts: FloatArray  # (K, G) tasks of row k in cluster g
    weights: FloatArray  # (K, G) se² = Σ_g weights · E_g² / n²
    degenerate: BoolArray  # (K,) se = 0 up to rounding, with G ≥ 2
    scale: FloatArray  # (K,) largest magnitude the row's d_i come from: se's rounding scale
    skew: FloatArray  # (K,) ŝ = G₁/√G, the skewness of Δ̂'s sampling distribution


def _cluster_weights(counts: FloatArray, n: FloatArray, g: FloatArray, method: str
                     ) -> tuple[FloatArray, FloatArray]:
    """``(weights (K, G), df (K,))`` of a cluster design; NaN df where ``G < 2``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if method == "cr1":
            weights = np.broadcast_to((g / (g - 1.0))[:, None], counts.shape).copy()
            df = g - 1.0
        else:
            p = counts / n[:, None]
            weights = 1.0 / (1.0 - p)  # (I − H_gg)^{−1/2} on the cluster's sum, squared
            a = p**2 * weights
            df = 1.0 / ((p**2).sum(axis=1) + a.sum(axis=1) ** 2 - (a**2).sum(axis=1))
    weights = np.where(counts > 0, weights, 0.0)
    return weights, np.where(g >= 2, df, np.nan)


def _skewness(weights: FloatArray, resid: FloatArray, g: FloatArray) -> FloatArray:
    """``ŝ = G₁/√G`` per row: the adjusted Fisher–Pearson skewness of the scaled totals
    ``sqrt(w_g) E_g`` over ``√G``; 0 where ``G < 3`` or the totals are all zero."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        u = np.sqrt(weights) * resid  # a one-cluster row has w = inf: NaN, dropped below
        s2 = (u**2).sum(axis=1)
        s3 = (u**3).sum(axis=1)
        # Σu³/(Σu²)^{3/2} = g₁/√G; sqrt(G(G−1))/(G−2) turns g₁ into G₁.
        out = s3 / s2**1.5 * np.sqrt(g * (g - 1.0)) / (g - 2.0)
    return np.where((g >= 3) & (s2 > 0) & np.isfinite(out), out, 0.0)


def _from_sums(sums: FloatArray, counts: FloatArray, scale: FloatArray, method: str
               ) -> _Moments:
    """The statistics of every row from its per-cluster sums and counts."""
    n = counts.sum(axis=1)
    g = (counts > 0).sum(axis=1).astype(np.float64)
    weights, df = _cluster_weights(counts, n, g, method)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=1) / n
        resid = sums - counts * mean[:, None]  # E_g = Σ_{i∈g} (d_i − Δ̂): the cluster score
        var = (weights * resid**2).sum(axis=1) / n**2
    var = np.where(g >= 2, var, np.nan)
    se = np.sqrt(var)
    degenerate = (g >= 2) & (se <= _ZERO_SE * scale)
    skew = np.where(degenerate, 0.0, _skewness(weights, resid, g))
    return _Moments(n, mean, se, g, df, sums, counts, weights, degenerate, scale, skew)


def _moments(d: FloatArray, mask: BoolArray, onehot: FloatArray, method: str,
             magnitude: FloatArray | None = None) -> _Moments:
    """Per-row statistics; ``magnitude`` (``(K, N)``, default ``|d|``) is the size of the
    numbers each difference was computed from, which sets its rounding error."""
    dm = np.where(mask, d, 0.0)
    mag = np.abs(dm) if magnitude is None else np.where(mask, magnitude, 0.0)
    scale = mag.max(axis=1, initial=0.0)
    return _from_sums(dm @ onehot, mask.astype(np.float64) @ onehot, scale, method)


def _t_quantiles(level: float, df: FloatArray) -> FloatArray:
    """``t_level(df)`` per row, NaN where ``df`` is not positive; one ppf per distinct df."""
    from scipy import stats  # lazy: `import agentlog` stays light

    out = np.full(df.shape, np.nan)
    ok = np.isfinite(df) & (df > 0)
    if ok.any():
        values, inverse = np.unique(df[ok], return_inverse=True)
        out[ok] = np.asarray(stats.t.ppf(level, values), dtype=np.float64)[inverse]
    return out


def _cornish_fisher(level: float, skew: FloatArray) -> FloatArray:
    """How far ``"cr2-bm-cf"`` moves the ``level`` quantile out for a skewness ``ŝ`` of ``Δ̂``.

    The Cornish–Fisher expansion of the studentized mean (Hall 1992, "The Bootstrap and
    Edgeworth Expansion", §2.6) puts its upper ``level`` quantile at ``z − ŝ(2z²+1)/6 +
    ŝ² z(4z²−3)/24 − k̂ z(z²−3)/12 + z(z²+3)/(4n) + …``; the last term is what the t
    reference already adds, the kurtosis term ``k̂`` is dropped (it only narrows heavy
    tails beyond ``z = √3``), and ``|ŝ|`` guards both tails. Never negative.
    """
    first, second = _cf_coefficients(level)
    s = np.abs(skew)
    out: FloatArray = s * first + s * s * second
    return out


def _cf_coefficients(level: float) -> tuple[float, float]:
    """``((2z²+1)/6, max(z(4z²−3)/24, 0))`` at ``z = Φ⁻¹(level)``: the widening per unit of
    ``|ŝ|`` and of ``ŝ²`` (the second is negative only for ``level < 0.81``; dropped)."""
    from scipy import stats  # lazy: `import agentlog` stays light

    z = float(stats.norm.ppf(level))
    return (2.0 * z * z + 1.0) / 6.0, max(z * (4.0 * z * z - 3.0) / 24.0, 0.0)


def _critical(level: float, df: FloatArray, skew: FloatArray, method: str) -> FloatArray:
    """The multiplier of ``se`` per row: ``t_level(df)``, widened by the skewness ``ŝ`` for
    ``"cr2-bm-cf"``."""
    tq = _t_quantiles(level, df)
    return tq + _cornish_fisher(level, skew) if method == "cr2-bm-cf" else tq


def _log_wealth(x: FloatArray, live: BoolArray, m0: FloatArray, floor: FloatArray
                ) -> FloatArray:
    """``log`` of the average over ``_BETS`` of ``Π_g (1 + c (x_g − m0)/(m0 − floor))``."""
    step = (x - m0[:, None]) / (m0 - floor)[:, None]  # (K, G), ≥ −1
    with np.errstate(divide="ignore"):
        logs = np.where(live[:, :, None], np.log1p(_BETS * step[:, :, None]), 0.0).sum(axis=1)
    top = logs.max(axis=1)
    out: FloatArray = top + np.log(np.exp(logs - top[:, None]).mean(axis=1))
    return out


def _lower_bound(x: FloatArray, live: BoolArray, floor: FloatArray, level: float
                 ) -> FloatArray:
    """The smallest mean ``m0`` that the betting e-value does not reject at ``1 − level``."""
    target = -math.log(1.0 - level)
    g = live.sum(axis=1)
    lo = floor.copy()
    hi = np.where(live, x, 0.0).sum(axis=1) / g  # the mean: never rejected (AM–GM)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            reject = _log_wealth(x, live, mid, floor) >= target
        lo, hi = np.where(reject, mid, lo), np.where(reject, hi, mid)
    bound: FloatArray = hi
    return bound


def _betting_radius(sums: FloatArray, counts: FloatArray, score_range: tuple[float, float],
                    level: float) -> FloatArray:
    """``q`` of ``"betting"``: a confidence interval for the task-weighted mean difference
    by betting (Waudby-Smith and Ramdas 2023, "Estimating Means of Bounded Random Variables
    by Betting"), valid for independent clusters whatever the shape of the scores.

    With scores in ``[lo, hi]``, each difference lies in ``[−w, w]`` (``w = hi − lo``).
    Cluster ``g`` contributes ``x_g = G S_g / N`` (so ``mean_g x_g = Δ̂``), which lies above
    ``floor = −w G max_g n_g / N``. For a candidate mean ``m0`` and a bet ``c ∈ (0, 1)``,
    ``Π_g (1 + c (x_g − m0)/(m0 − floor))`` has expectation ``Π_g (1 + c(μ_g − m0)/(m0 −
    floor)) ≤ (1 + c(Δ − m0)/(m0 − floor))^G ≤ 1`` whenever the task-weighted mean ``Δ ≤
    m0`` (AM–GM over independent clusters, whatever their own means), and so does the
    average over the fixed grid ``_BETS``. By Markov's inequality, rejecting ``Δ ≤ m0`` when
    that average reaches ``1/α`` errs with probability at most ``α = 1 − level``. The
    lower bound is the smallest ``m0`` not rejected (the wealth falls as ``m0`` grows;
    bisection), the upper bound the same on ``−x``, and ``q`` the distance from ``Δ̂`` to
    the bound on the side of zero, so that eq. 4's ``|Δ̂| > q + ε̂_out + r`` means the bound
    clears the nuisance radius. The bets are fixed in advance, never fitted to the data:
    with ``G`` clusters the wealth grows at most by ``(1 + c · range/(m0 − floor))`` per
    cluster, so few clusters certify only gaps that are large against the score range.
    """
    lo, hi = score_range
    live = counts > 0
    n = counts.sum(axis=1)
    g = live.sum(axis=1).astype(np.float64)
    width = hi - lo
    x = sums * (g / n)[:, None]
    reach = width * g * counts.max(axis=1) / n  # |x_g| ≤ reach
    mean = np.where(live, x, 0.0).sum(axis=1) / g
    lower = _lower_bound(x, live, -reach, level)
    upper = -_lower_bound(-x, live, -reach, level)
    q = np.where(mean >= 0.0, mean - lower, upper - mean)
    return np.where(g >= 2, q, np.nan)


def _radius(mo: _Moments, tq: FloatArray) -> FloatArray:
    """``q = t · se``, and ``inf`` on a zero-variance row (never certified by any gap)."""
    with np.errstate(invalid="ignore"):
        q = tq * mo.se
    return np.where(mo.degenerate, np.inf, q)


def _warn_degenerate(rows: Sequence[str], where: str) -> None:
    if not rows:
        return
    shown = ", ".join(rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
    warnings.warn(
        f"{where}: {len(rows)} row(s) have zero cluster-robust variance ({shown}): every "
        "cluster's mean difference is the same, so nothing measures the sampling error. "
        "Rule: such a pair is never certified (q = inf, undecided-sampling) whatever its "
        "gap; check that the scores are not constant or duplicated across systems",
        DegenerateDataWarning, stacklevel=3)


def _onehot(code: IntArray, n_groups: int) -> FloatArray:
    out = np.zeros((code.shape[0], n_groups))
    out[np.arange(code.shape[0]), code] = 1.0
    return out


def _cluster_codes(labels: Sequence[Any], name: str, n: int | None = None
                   ) -> tuple[list[str], IntArray]:
    """Cluster labels as strings, sorted, and the code of each task; a missing label raises."""
    arr = list(labels) if not isinstance(labels, np.ndarray) else labels.tolist()
    if n is not None and len(arr) != n:
        raise ValueError(f"`{name}` has {len(arr)} labels for {n} tasks; give one cluster "
                         "label per task (the clusters must cover every task)")
    keys: list[str] = []
    for i, v in enumerate(arr):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"`{name}` has no label for task {i} (found {v!r}); every task "
                             "needs a cluster (use the task itself when it is its own cluster)")
        keys.append(str(v))
    uniq, code = codes(keys, name=name)
    return uniq.tolist(), code


def _sampling_radius_iv(differences: ArrayLike, mask: ArrayLike | None, delta_prime: float,
                        family_size: int, sampling: str,
                        score_range: tuple[float, float] | None
                        ) -> tuple[FloatArray, BoolArray]:
    d = np.asarray(differences, dtype=np.float64)
    d2 = d[None, :] if d.ndim == 1 else d
    if d2.ndim != 2:
        raise ValueError(f"`differences` must be (n_tasks,) or (n_pairs, n_tasks); found "
                         f"shape {d.shape}")
    if d2.size == 0:
        raise ValueError(f"`differences` is empty (shape {d.shape}); pass at least two "
                         "tasks' paired differences in at least two clusters")
    if mask is None:
        msk = np.ones(d2.shape, dtype=bool)
    else:
        m = np.asarray(mask)
        if m.dtype != np.bool_:
            raise ValueError(f"`mask` must be boolean (True = the row uses the task); found "
                             f"dtype {m.dtype}")
        if m.shape not in (d.shape, d2.shape):
            raise ValueError(f"`mask` must have the shape of `differences` {d.shape}; found "
                             f"{m.shape}")
        msk = m.reshape(d2.shape)
    empty = np.flatnonzero(~msk.any(axis=1))
    if len(empty):
        raise ValueError(f"`mask` drops every task of row {int(empty[0])}"
                         + (f" (and {len(empty) - 1} more rows)" if len(empty) > 1 else "")
                         + "; each row needs tasks in at least two clusters")
    if not np.isfinite(d2[msk]).all():
        raise ValueError("`differences` must be finite on the tasks `mask` keeps")
    if not 0.0 < delta_prime < 1.0:
        raise ValueError(f"`delta_prime` must be in (0, 1); found {delta_prime}")
    if not isinstance(family_size, int | np.integer) or family_size < 1:
        raise ValueError(f"`family_size` must be a positive int; found {family_size!r}")
    if sampling not in SAMPLING_METHODS:
        raise ValueError(f"`sampling` must be one of {', '.join(map(repr, SAMPLING_METHODS))};"
                         f" found {sampling!r}")
    if (score_range is not None) != (sampling == "betting"):
        raise ValueError("`score_range` (the declared (low, high) of every score) is needed "
                         "by sampling='betting' and used by no other sampling; found "
                         f"score_range={score_range!r} with sampling={sampling!r}")
    if score_range is not None:
        lo, hi = (float(v) for v in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"`score_range` must be two finite numbers low < high; found "
                             f"{score_range!r}")
        worst = float(np.abs(d2[msk]).max())
        if worst > hi - lo:
            raise ValueError(f"`score_range` {score_range!r} allows differences up to "
                             f"{hi - lo:g} in size; found {worst:g}: a score lies outside the "
                             "declared range, and the betting radius would not hold")
    return d2, msk


def sampling_radius(
    differences: ArrayLike,
    clusters: Sequence[Any] | ArrayLike,
    *,
    mask: ArrayLike | None = None,
    delta_prime: float = 0.05,
    family_size: int = 1,
    sampling: Sampling = "cr2-bm-cf",
    score_range: tuple[float, float] | None = None,
) -> SamplingRadiusResult:
    """Cluster-robust paired statistics and the Bonferroni radius of eq. 4.

    The default ``"cr2-bm-cf"`` (CR2 variance, Bell–McCaffrey degrees of freedom, the t
    quantile widened by the Cornish–Fisher skewness terms) keeps the family-wise
    false-certification rate at most ``δ′`` with unequal cluster sizes and with skewed
    differences (rare 0/1 successes against a continuous scorer); ``"cr2-bm"`` is the same
    without the skewness terms (it under-covers skewed differences); ``"cr1"`` (``t(G−1)``)
    is [LBC] eq. 4 as published (§6.1) and under-covers when one cluster is much larger than
    the others. ``"betting"`` holds whatever the shape, given the scores' declared range,
    but needs many clusters. The designs each was measured on, with its power, are in the
    docs/explanation/certificates.md.

    Args:
        differences: paired differences, shape ``(n_tasks,)`` or ``(n_pairs, n_tasks)``.
        clusters: the cluster label of each task (length ``n_tasks``).
        mask: which tasks each row uses (boolean, the shape of ``differences``; default:
            all). Masked-out entries may hold NaN; used ones must be finite.
        delta_prime: family-wise ``δ′`` in (0, 1).
        family_size: ``m``, the number of pairs Bonferroni divides ``δ′`` by.
        sampling: ``"cr2-bm-cf"``, ``"cr2-bm"``, ``"cr1"`` or ``"betting"``.
        score_range: ``(low, high)``, the range every score lies in (required by, and only
            by, ``"betting"``); each difference must lie within ``±(high − low)``.

    Returns:
        ``SamplingRadiusResult`` with one entry per row. A row in one cluster has NaN ``q``; a
        row with zero variance has ``q = inf`` under a t-based method (with a
        ``DegenerateDataWarning``).

    Examples:
        >>> from agentlog.estimators import certify
        >>> d, g = [0.1, 0.3, 0.2, 0.4, 0.0, 0.2, 0.3, 0.5], [0, 0, 1, 1, 2, 2, 3, 3]
        >>> r = certify.sampling_radius(d, g, sampling="cr2-bm")
        >>> round(float(r.q[0]), 4), round(float(r.df[0]), 9), round(float(r.skewness[0]), 4)
        (0.2054, 3.0, 0.0)
        >>> round(float(certify.sampling_radius(d, g).q[0]), 4)  # no skew: the same radius
        0.2054
        >>> skewed = d[:6] + [0.2, 1.4]  # one cluster far out: the t reference is doubtful
        >>> cf, t = (certify.sampling_radius(skewed, g, sampling=s) for s in ("cr2-bm-cf",
        ...                                                                   "cr2-bm"))
        >>> round(float(cf.skewness[0]), 2), round(float(t.q[0]), 3), round(float(cf.q[0]), 3)
        (1.6, 0.495, 0.774)
    """
    d2, msk = _sampling_radius_iv(differences, mask, delta_prime, family_size, sampling,
                                  score_range)
    uniq, cluster_of = _cluster_codes(clusters, "clusters", d2.shape[1])  # type: ignore[arg-type]
    mo = _moments(d2, msk, _onehot(cluster_of, len(uniq)), sampling)
    level = 1.0 - delta_prime / (2.0 * family_size)
    if score_range is not None:
        q = _betting_radius(mo.sums, mo.counts, score_range, level)
    else:
        q = _radius(mo, _critical(level, mo.df, mo.skew, sampling))
        _warn_degenerate([f"row {int(k)}" for k in np.flatnonzero(mo.degenerate)],
                         "certify.sampling_radius")
    return SamplingRadiusResult(
        estimate=mo.mean, standard_error=mo.se, q=q,
        n_tasks=mo.n.astype(np.int64), n_clusters=mo.g.astype(np.int64),
        delta_prime=float(delta_prime), family_size=int(family_size),
        df=mo.df, method=sampling, degenerate=mo.degenerate,
        skewness=mo.skew * np.sqrt(mo.g),
    )
