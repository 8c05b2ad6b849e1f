"""The sampling radius of eq. 4: cluster-robust paired statistics ([LBC] §6.1).

Two variances of the paired mean ``Δ̂ = Σ d_i / N`` over ``G`` task clusters, from the
per-cluster residual sums ``E_g = Σ_{i∈g} (d_i − Δ̂)`` and sizes ``n_g`` (``p_g = n_g/N``):

* ``"cr2-bm"`` (the default): the bias-reduced CR2 variance with Bell–McCaffrey degrees of
  freedom (Imbens and Kolesár 2016). For an intercept-only regression ``H_gg = J/N``, so
  ``(I − H_gg)^{−1/2}`` scales the cluster's sum by ``1/sqrt(1 − p_g)`` and
  ``se² = Σ_g E_g² / (1 − p_g) / N²``. Its degrees of freedom are
  ``(Σλ)² / Σλ²`` over the eigenvalues of the ``G × G`` matrix
  ``M = D (diag(n) − n nᵀ/N) D`` with ``D = diag(1/sqrt(1 − p_g))`` (the homoskedastic
  working model); since ``tr M = N`` and ``‖M‖²_F`` has a closed form,
  ``df = 1 / (Σ p_g² + (Σ a_g)² − Σ a_g²)`` with ``a_g = p_g² / (1 − p_g)``. Balanced
  clusters give ``df = G − 1`` and the same radius as CR1; when one cluster holds most
  tasks, ``df`` falls towards 1 and the radius widens, as it must.
* ``"cr1"``: ``se² = G/(G−1) · Σ_g E_g² / N²`` with ``t(G−1)`` ([LBC] eq. 4, §6.1, as
  published; statsmodels' ``cov_cluster`` with ``use_correction``). It under-covers when
  cluster sizes differ: one cluster's squared sum then dominates the variance, which has
  about one degree of freedom, not ``G − 1``.

Either way ``q = t_{1−δ′/(2m)}(df) · se``, Bonferroni over the ``m`` pairs of the family.
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

__all__ = [
    "SamplingRadius",
    "sampling_radius",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]
Sampling = Literal["cr2-bm", "cr1"]

SAMPLING_METHODS: tuple[str, ...] = ("cr2-bm", "cr1")
#: Below this many effective degrees of freedom one cluster dominates the variance: the
#: radius is then so wide (t quantiles explode as df → 1) that the pair is sampling-limited.
MIN_DF = 3.0
#: A standard error at most this fraction of the largest |score| (of |d_i| when only the
#: differences are known) is zero up to rounding: far above float rounding (~1e-16), far
#: below any measured spread.
_ZERO_SE = 1e-10


@dataclass(frozen=True)
class SamplingRadius:
    """Cluster-robust paired statistics, one row per pair ([LBC] §6.1, eq. 4).

    Attributes:
        estimate: ``Δ̂``, the mean paired difference over the row's tasks.
        standard_error: the cluster-robust standard error of ``Δ̂`` (``method``).
        q: the two-sided half-width ``t_{1−δ′/(2m)}(df) · se``; NaN when ``G < 2``, and
            ``inf`` for a zero-variance row (see ``degenerate``).
        n_tasks: tasks per row.
        n_clusters: clusters ``G`` per row.
        delta_prime: ``δ′``; family_size: ``m`` (Bonferroni).
        df: the degrees of freedom of the t quantile per row: Bell–McCaffrey's effective
            degrees of freedom for ``"cr2-bm"``, ``G − 1`` for ``"cr1"``.
        method: ``"cr2-bm"`` or ``"cr1"``.
        degenerate: rows whose standard error is zero up to rounding (at most ``1e-10``
            times the largest ``|d_i|``; every cluster's mean difference equal): no spread
            between clusters measures the sampling error, so the rule never certifies them
            (``q = inf``) and a ``DegenerateDataWarning`` says so.
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


@dataclass(frozen=True)
class _Moments:
    """Per row: n, mean, se, G, df; and per (row, cluster) sums for resampling."""

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
    return _Moments(n, mean, se, g, df, sums, counts, weights, degenerate, scale)


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


def _onehot(codes: IntArray, n_groups: int) -> FloatArray:
    out = np.zeros((codes.shape[0], n_groups))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def _codes(labels: Sequence[Any], name: str, n: int | None = None) -> tuple[list[str], IntArray]:
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
    uniq = sorted(set(keys))
    pos = {k: j for j, k in enumerate(uniq)}
    return uniq, np.array([pos[k] for k in keys], dtype=np.intp)


def _sampling_radius_iv(differences: ArrayLike, mask: ArrayLike | None, delta_prime: float,
                        family_size: int, sampling: str) -> tuple[FloatArray, BoolArray]:
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
    return d2, msk


def sampling_radius(
    differences: ArrayLike,
    clusters: Sequence[Any] | ArrayLike,
    *,
    mask: ArrayLike | None = None,
    delta_prime: float = 0.05,
    family_size: int = 1,
    sampling: Sampling = "cr2-bm",
) -> SamplingRadius:
    """Cluster-robust paired statistics and the Bonferroni t radius of eq. 4.

    The default ``"cr2-bm"`` (bias-reduced CR2 variance, Bell–McCaffrey degrees of freedom)
    keeps the family-wise false-certification rate at most ``δ′`` with unequal cluster
    sizes; ``"cr1"`` (``t(G−1)``) is [LBC] eq. 4 as published (§6.1) and under-covers when
    one cluster is much larger than the others (see the README's certification section).

    Args:
        differences: paired differences, shape ``(n_tasks,)`` or ``(n_pairs, n_tasks)``.
        clusters: the cluster label of each task (length ``n_tasks``).
        mask: which tasks each row uses (boolean, the shape of ``differences``; default:
            all). Masked-out entries may hold NaN; used ones must be finite.
        delta_prime: family-wise ``δ′`` in (0, 1).
        family_size: ``m``, the number of pairs Bonferroni divides ``δ′`` by.
        sampling: ``"cr2-bm"`` or ``"cr1"``.

    Returns:
        ``SamplingRadius`` with one entry per row. A row in one cluster has NaN ``q``; a
        row with zero variance has ``q = inf`` (with a ``DegenerateDataWarning``).

    Example:
        >>> from agentlog.estimators import certify
        >>> r = certify.sampling_radius([0.1, 0.3, 0.2, 0.4, 0.0, 0.2], [0, 0, 1, 1, 2, 2])
        >>> round(float(r.q[0]), 4), round(float(r.df[0]), 9), r.method
        (0.2484, 2.0, 'cr2-bm')
    """
    d2, msk = _sampling_radius_iv(differences, mask, delta_prime, family_size, sampling)
    uniq, codes = _codes(clusters, "clusters", d2.shape[1])  # type: ignore[arg-type]
    mo = _moments(d2, msk, _onehot(codes, len(uniq)), sampling)
    q = _radius(mo, _t_quantiles(1.0 - delta_prime / (2.0 * family_size), mo.df))
    _warn_degenerate([f"row {int(k)}" for k in np.flatnonzero(mo.degenerate)],
                     "certify.sampling_radius")
    return SamplingRadius(
        estimate=mo.mean, standard_error=mo.se, q=q,
        n_tasks=mo.n.astype(np.int64), n_clusters=mo.g.astype(np.int64),
        delta_prime=float(delta_prime), family_size=int(family_size),
        df=mo.df, method=sampling, degenerate=mo.degenerate,
    )
