"""Question-clustered bootstrap: resample whole clusters (questions) with all their runs.

Every estimate is first averaged within its cluster, clusters then weigh equally ([SSC]
§4: "confidence intervals resample whole questions and keep every associated trajectory
together"). One matrix of resampling counts is drawn per call and shared by every column,
so differences between columns (paired comparisons) are bootstrapped consistently. Draws
come from ``numpy.random.default_rng(seed)``: the same seed gives bit-identical intervals.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning

from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

FloatArray = NDArray[np.float64]


def group_means(values: FloatArray, group: NDArray[np.intp], n_groups: int) -> FloatArray:
    """Column means of ``values`` (shape (n,) or (n, m)) within each group code."""
    v = values if values.ndim == 2 else values[:, None]
    counts = np.bincount(group, minlength=n_groups).astype(np.float64)
    sums = np.zeros((n_groups, v.shape[1]))
    np.add.at(sums, group, v)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = sums / counts[:, None]
    return out if values.ndim == 2 else out[:, 0]


@dataclass(frozen=True)
class BootstrapResult:
    """A statistic, its bootstrap distribution and percentile intervals."""

    estimate: FloatArray  # shape (m,)
    samples: FloatArray  # shape (n_resamples, m)
    n_clusters: int
    seed: int

    @property
    def standard_error(self) -> FloatArray:
        se: FloatArray = self.samples.std(axis=0, ddof=1)
        return se

    def confidence_interval(self, confidence_level: float = 0.95
                            ) -> ConfidenceInterval[FloatArray]:
        """Percentile interval ``(low, high)``, each of shape (m,)."""
        alpha = (1 - check_confidence_level(confidence_level)) / 2
        # NaN resamples drew no cluster a column could use (bootstrap_cluster_means)
        low, high = np.nanquantile(self.samples, [alpha, 1 - alpha], axis=0)
        return ConfidenceInterval(low, high)


def cluster_bootstrap(
    values: ArrayLike,
    clusters: ArrayLike | Sequence[Any],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> BootstrapResult:
    """Bootstrap the equally-weighted mean over clusters of per-run ``values``.

    Args:
        values: shape ``(n_runs,)`` or ``(n_runs, m)`` — one column per statistic; NaN-free.
        clusters: the question (cluster) label of each run.
        n_resamples: bootstrap draws ``B``.
        seed: seeds ``numpy.random.default_rng``; same seed, same samples, bit for bit.

    Returns:
        ``BootstrapResult`` whose ``estimate`` is the mean over clusters of the cluster means.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2) or v.shape[0] == 0:
        raise ValueError(f"`values` must be a non-empty (n,) or (n, m) array; found {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("`values` must be finite; drop or impute NaN runs first")
    _, group = codes(clusters, name="clusters")
    if group.shape[0] != v.shape[0]:
        raise ValueError(f"`clusters` has {group.shape[0]} labels for {v.shape[0]} runs")
    if not isinstance(n_resamples, int | np.integer) or n_resamples < 2:
        raise ValueError(f"`n_resamples` must be an int >= 2; found {n_resamples!r}")
    n_groups = int(group.max()) + 1
    per_cluster = group_means(v if v.ndim == 2 else v[:, None], group, n_groups)
    return bootstrap_cluster_means(per_cluster, n_resamples=int(n_resamples), seed=seed,
                                   squeeze=v.ndim == 1)


def bootstrap_cluster_means(
    per_cluster: FloatArray, *, n_resamples: int, seed: int, squeeze: bool = False
) -> BootstrapResult:
    """Bootstrap the mean over rows of a (G, m) matrix of per-cluster values.

    A NaN marks a cluster that a column cannot use (e.g. a question without both rankings):
    that column averages the clusters it has, in the estimate and in every resample (a
    resample that drew none of them is NaN). The draws are shared by every column.
    """
    G = per_cluster.shape[0]
    rng = np.random.default_rng(seed)
    # One (B, G) matrix of multinomial counts: each row is one resample of G clusters.
    counts = rng.multinomial(G, np.full(G, 1.0 / G), size=n_resamples).astype(np.float64)
    usable = ~np.isnan(per_cluster)
    if usable.all():
        samples = counts @ per_cluster / G
        estimate = per_cluster.mean(axis=0)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            samples = (counts @ np.where(usable, per_cluster, 0.0)) / (counts @ usable)
            estimate = np.where(usable, per_cluster, 0.0).sum(axis=0) / usable.sum(axis=0)
    if squeeze:
        return BootstrapResult(estimate[:1], samples[:, :1], G, seed)
    return BootstrapResult(estimate, samples, G, seed)


# ------------------------------------------------------------------ interval methods

IntervalMethod = Literal["percentile", "basic", "BCa"]
INTERVAL_METHODS: tuple[str, ...] = ("percentile", "basic", "BCa")


def check_method(method: Any) -> IntervalMethod:
    """``method`` if it names an interval (scipy.stats.bootstrap's names), else ValueError."""
    if method not in INTERVAL_METHODS:
        raise ValueError(f"`method` must be one of {', '.join(map(repr, INTERVAL_METHODS))} "
                         f"(scipy.stats.bootstrap's names); found {method!r}")
    out: IntervalMethod = method
    return out


def jackknife_acceleration(jackknife: ArrayLike) -> FloatArray:
    """The BCa acceleration ``â`` from leave-one-cluster-out values (last axis).

    Efron & Tibshirani (1993) eq. 14.15, as scipy.stats.bootstrap computes it:
    ``â = Σ U³ / (6 (Σ U²)^{3/2})`` with ``U_i = (n − 1)(θ̄_(·) − θ̂_(i))``. 0 when every
    leave-one-out value is equal (no skewness to correct).
    """
    jk = np.asarray(jackknife, dtype=np.float64)
    n = jk.shape[-1]
    u = (n - 1) * (jk.mean(axis=-1, keepdims=True) - jk)
    num = (u ** 3).sum(axis=-1) / n ** 3
    den = (u ** 2).sum(axis=-1) / n ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        a: FloatArray = np.where(den > 0, num / (6.0 * den ** 1.5), 0.0)
    return a


def bias_correction(samples: FloatArray, estimate: ArrayLike) -> FloatArray:
    """The BCa bias correction ``ẑ0 = Φ⁻¹(share of resamples below θ̂, ties ½)`` (last axis).

    NaN resamples (none of the usable clusters drawn) are left out. ``±∞`` when every
    resample lies on one side of the estimate.
    """
    from scipy.special import ndtri

    s = np.asarray(samples, dtype=np.float64)
    theta = np.asarray(estimate, dtype=np.float64)[..., None]
    valid = (~np.isnan(s)).sum(axis=-1)
    share = ((s < theta).sum(axis=-1) + (s <= theta).sum(axis=-1)) / (2.0 * valid)
    z0: FloatArray = ndtri(share)
    return z0


def _row_quantiles(samples: FloatArray, q: FloatArray) -> FloatArray:
    """Linear-interpolation quantile ``q[..., j]`` of each row (last axis), NaN left out."""
    s = np.sort(samples, axis=-1)  # NaN sorts last
    valid = (~np.isnan(s)).sum(axis=-1)[..., None].astype(np.float64)
    h = (valid - 1) * q
    lo = np.clip(np.floor(h), 0, None)
    hi = np.minimum(lo + 1, valid - 1)
    frac = h - lo
    bad = ~np.isfinite(h)
    lo_i = np.where(bad, 0, lo).astype(np.intp)
    hi_i = np.where(bad, 0, hi).astype(np.intp)
    a = np.take_along_axis(s, lo_i, axis=-1)
    b = np.take_along_axis(s, hi_i, axis=-1)
    out: FloatArray = np.where(bad, np.nan, a + (b - a) * frac)
    return out


def bootstrap_interval(
    samples: ArrayLike,
    estimate: ArrayLike,
    *,
    confidence_level: float,
    method: IntervalMethod,
    acceleration: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Two-sided interval from bootstrap ``samples`` (resamples on the last axis).

    * ``"percentile"``: the ``(1 ∓ level)/2`` quantiles of the resamples.
    * ``"basic"``: the percentile interval reflected about the estimate,
      ``(2θ̂ − q_hi, 2θ̂ − q_lo)``.
    * ``"BCa"``: bias-corrected and accelerated (Efron & Tibshirani 1993, §14.3): the
      quantiles at ``Φ(ẑ0 + (ẑ0 + z_α)/(1 − â(ẑ0 + z_α)))``, with ``acceleration`` ``â``
      (``jackknife_acceleration`` of the leave-one-cluster-out estimates). NaN where the
      bias correction is infinite (every resample on one side of ``θ̂``).

    Quantiles use linear interpolation (numpy's and scipy's default); NaN resamples are
    left out.
    """
    from scipy.special import ndtr, ndtri

    level = check_confidence_level(confidence_level)
    s = np.asarray(samples, dtype=np.float64)
    theta = np.asarray(estimate, dtype=np.float64)
    tail = (1 - level) / 2
    if method == "BCa":
        if acceleration is None:
            raise ValueError("method='BCa' needs the `acceleration` â (from the "
                             "leave-one-cluster-out estimates, jackknife_acceleration)")
        z0 = bias_correction(s, theta)
        a = np.asarray(acceleration, dtype=np.float64)
        levels = []
        for z in (float(ndtri(tail)), float(ndtri(1 - tail))):
            num = z0 + z
            with np.errstate(invalid="ignore", divide="ignore"):
                levels.append(ndtr(z0 + num / (1 - a * num)))
        q = np.stack(np.broadcast_arrays(*levels), axis=-1)
        out = _row_quantiles(s, q)
        if np.isnan(out).any() and not np.isnan(s).all(axis=-1).any():
            warnings.warn(
                "the BCa interval cannot be computed where every resample lies on one side of "
                "the estimate (infinite bias correction); it is NaN there: use "
                "method='percentile' for such a statistic",
                DegenerateDataWarning, stacklevel=3)
        return out[..., 0], out[..., 1]
    if np.isnan(s).any():
        low, high = np.nanquantile(s, [tail, 1 - tail], axis=-1)
    else:
        low, high = np.quantile(s, [tail, 1 - tail], axis=-1)
    if method == "basic":
        return 2 * theta - high, 2 * theta - low
    return low, high
