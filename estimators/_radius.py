"""The sampling radius of eq. 4: cluster-robust paired statistics ([LBC] §6.1)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "SamplingRadius",
    "sampling_radius",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class SamplingRadius:
    """Cluster-robust paired statistics, one row per pair ([LBC] §6.1, eq. 4).

    Attributes:
        estimate: ``Δ̂``, the mean paired difference over the row's tasks.
        standard_error: the CR1 standard error of ``Δ̂`` over task clusters.
        q: the two-sided half-width ``t_{1−δ′/(2m)}(G−1) · se`` (NaN when ``G < 2``).
        n_tasks: tasks per row.
        n_clusters: clusters ``G`` per row.
        delta_prime: ``δ′``; family_size: ``m`` (Bonferroni).
    """

    estimate: FloatArray
    standard_error: FloatArray
    q: FloatArray
    n_tasks: NDArray[np.int64]
    n_clusters: NDArray[np.int64]
    delta_prime: float
    family_size: int


@dataclass(frozen=True)
class _Moments:
    """Per row: n, mean, CR1 se, G; and per (row, cluster) sums for resampling."""

    n: FloatArray
    mean: FloatArray
    se: FloatArray
    g: FloatArray
    sums: FloatArray  # (K, G) Σ_{i∈g} d_i
    counts: FloatArray  # (K, G) tasks of row k in cluster g


def _moments(d: FloatArray, mask: BoolArray, onehot: FloatArray) -> _Moments:
    m = mask.astype(np.float64)
    dm = np.where(mask, d, 0.0)
    n = m.sum(axis=1)
    counts = m @ onehot
    sums = dm @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=1) / n
        resid = sums - counts * mean[:, None]  # Σ_{i∈g} (d_i − Δ̂): the CR1 score per cluster
        g = (counts > 0).sum(axis=1).astype(np.float64)
        var = g / (g - 1.0) * (resid**2).sum(axis=1) / n**2
    var = np.where(g >= 2, var, np.nan)
    return _Moments(n, mean, np.sqrt(var), g, sums, counts)


def _t_quantiles(level: float, g: FloatArray) -> FloatArray:
    """``t_level(G − 1)`` per row, NaN where ``G < 2``; one ppf call per distinct G."""
    from scipy import stats  # lazy: `import agentlog` stays light

    out = np.full(g.shape, np.nan)
    for value in np.unique(g[np.isfinite(g) & (g >= 2)]):
        out[g == value] = float(stats.t.ppf(level, value - 1.0))
    return out


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


def sampling_radius(
    differences: ArrayLike,
    clusters: Sequence[Any] | ArrayLike,
    *,
    mask: ArrayLike | None = None,
    delta_prime: float = 0.05,
    family_size: int = 1,
) -> SamplingRadius:
    """Cluster-robust (CR1) paired statistics and the Bonferroni t(G−1) radius.

    Args:
        differences: paired differences, shape ``(n_tasks,)`` or ``(n_pairs, n_tasks)``.
        clusters: the cluster label of each task (length ``n_tasks``).
        mask: which tasks each row uses (same shape as ``differences``; default: all).
            Masked-out entries may hold NaN; used ones must be finite.
        delta_prime: family-wise ``δ′`` in (0, 1).
        family_size: ``m``, the number of pairs Bonferroni divides ``δ′`` by.

    Returns:
        ``SamplingRadius`` with one entry per row.
    """
    d = np.asarray(differences, dtype=np.float64)
    squeeze = d.ndim == 1
    d2 = d[None, :] if squeeze else d
    if d2.ndim != 2:
        raise ValueError(f"`differences` must be (n_tasks,) or (n_pairs, n_tasks); found "
                         f"shape {d.shape}")
    msk = (np.ones(d2.shape, dtype=bool) if mask is None
           else np.broadcast_to(np.asarray(mask, dtype=bool), d2.shape))
    if not np.isfinite(d2[msk]).all():
        raise ValueError("`differences` must be finite on the tasks `mask` keeps")
    if not 0.0 < delta_prime < 1.0:
        raise ValueError(f"`delta_prime` must be in (0, 1); found {delta_prime}")
    if not isinstance(family_size, int | np.integer) or family_size < 1:
        raise ValueError(f"`family_size` must be a positive int; found {family_size!r}")
    uniq, codes = _codes(clusters, "clusters", d2.shape[1])  # type: ignore[arg-type]
    mo = _moments(d2, msk, _onehot(codes, len(uniq)))
    q = _t_quantiles(1.0 - delta_prime / (2.0 * family_size), mo.g) * mo.se
    return SamplingRadius(
        estimate=mo.mean[0:1] if squeeze else mo.mean,
        standard_error=mo.se[0:1] if squeeze else mo.se,
        q=q[0:1] if squeeze else q,
        n_tasks=mo.n.astype(np.int64), n_clusters=mo.g.astype(np.int64),
        delta_prime=float(delta_prime), family_size=int(family_size),
    )

