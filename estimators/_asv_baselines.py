"""Baselines beside the ASV face: the same-channel retry disagreement ([ASV] §5.1, B.1)
and the paired AUC difference of post-step margins (§5.3), each with trajectory-block
bootstrap intervals that share the face summary's draws and jackknife."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog.deprecation import warn_renamed
from agentlog.display import html_repr

from ._asv import (
    DEFAULT_METHOD,
    FloatArray,
    _batch_rows,
    _block_count_rows,
    _check_resamples,
    _corner,
    _estimates,
    _jackknife_rows,
)
from ._bootstrap import (
    IntervalMethod,
    bootstrap_interval,
    check_method,
    jackknife_acceleration,
)
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

# ---------------------------------------------------------------------- retry baseline


@dataclass(frozen=True)
class RetryDisagreementResult:
    """Cross-channel vs same-channel retry sign disagreement ([ASV] §5.1, B.1)."""

    cross_channel: float
    same_channel: float
    excess: float
    samples: FloatArray  # (n_resamples, 3): cross, same, excess
    confidence_level: float
    method: IntervalMethod = DEFAULT_METHOD
    accelerations: FloatArray = field(default_factory=lambda: np.zeros(3))

    def confidence_interval(self, name: str, *, confidence_level: float | None = None,
                            method: IntervalMethod | None = None) -> ConfidenceInterval[float]:
        """The interval of ``name`` (``"cross_channel"``, ``"same_channel"`` or
        ``"excess"``) by ``method`` (default: the result's), at the result's
        ``confidence_level`` unless another is given."""
        names = ("cross_channel", "same_channel", "excess")
        return _interval_of(self.samples, names, name, getattr(self, name),
                            self.confidence_level if confidence_level is None
                            else confidence_level, method or self.method, self.accelerations)

    def interval(self, name: str, *, method: IntervalMethod | None = None
                 ) -> ConfidenceInterval[float]:
        """Deprecated: ``confidence_interval`` (same arguments)."""
        warn_renamed("RetryDisagreementResult.interval",
                     "RetryDisagreementResult.confidence_interval")
        return self.confidence_interval(name, method=method)

    @html_repr
    def _repr_html_(self) -> str:
        return _estimates(self, {"cross_channel": self.cross_channel,
                                 "same_channel": self.same_channel, "excess": self.excess})


def retry_disagreement(
    waves_a: ArrayLike,
    waves_b: ArrayLike,
    *,
    trajectory: ArrayLike | Sequence[Any],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    method: IntervalMethod = DEFAULT_METHOD,
) -> RetryDisagreementResult:
    """Per transition: the cross-channel rate averages every (wave of a, wave of b) pairing
    of gain signs; the retry baseline averages the same-channel wave pairs (a/a and b/b).
    Their difference is the excess; trajectory-block bootstrap with shared draws.

    Args:
        waves_a, waves_b: gains of each transition under channel a and b, shape
            (n_transitions, n_waves) with at least two waves each.
        method: the interval, ``"BCa"`` (default), ``"percentile"`` or ``"basic"``.
    """
    _check_resamples(n_resamples)
    confidence_level = check_confidence_level(confidence_level)
    method = check_method(method)
    A = np.asarray(waves_a, dtype=np.float64)
    B = np.asarray(waves_b, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
        raise ValueError(f"`waves_a` and `waves_b` must be (n_transitions, n_waves) with the "
                         f"same n; found {A.shape} and {B.shape}")
    if A.shape[1] < 2 or B.shape[1] < 2:
        raise ValueError("each channel needs at least two waves for a retry baseline")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("`waves_a` and `waves_b` must be finite (use the joint-complete cohort)")
    sa, sb = np.sign(A), np.sign(B)
    cross = (sa[:, :, None] * sb[:, None, :] < 0).mean(axis=(1, 2))
    ia = np.triu_indices(A.shape[1], 1)
    ib = np.triu_indices(B.shape[1], 1)
    same_a = (sa[:, ia[0]] * sa[:, ia[1]] < 0).mean(axis=1)
    same_b = (sb[:, ib[0]] * sb[:, ib[1]] < 0).mean(axis=1)
    same = 0.5 * (same_a + same_b)
    t_uniq, traj = codes(trajectory, name="trajectory")
    if traj.shape[0] != A.shape[0]:
        raise ValueError(f"`trajectory` has {traj.shape[0]} labels for {A.shape[0]} transitions")
    stats = np.column_stack([cross, same, cross - same])
    batches = []
    for counts in _block_count_rows(len(t_uniq), int(n_resamples), seed,
                                    _batch_rows(len(traj), 1_000)):
        w = counts[:, traj]  # a batch of resamples' transition weights
        batches.append((w @ stats) / w.sum(axis=1)[:, None])
    samples = np.concatenate(batches)
    point = stats.mean(axis=0)
    accel = np.zeros(3)
    if len(t_uniq) >= 2:
        jk = np.concatenate([(c[:, traj] @ stats) / c[:, traj].sum(axis=1)[:, None]
                             for c in _jackknife_rows(len(t_uniq), len(traj))])
        accel = jackknife_acceleration(jk.T)
    return RetryDisagreementResult(float(point[0]), float(point[1]), float(point[2]), samples,
                                   confidence_level, method, accel)


# --------------------------------------------------------------------------- AUC


def _weighted_auc(x: tuple[NDArray[np.intp], int], y: NDArray[np.bool_], w: FloatArray
                  ) -> FloatArray:
    """AUC of a score for label ``y`` under each row of weights (ties count ½). ``x``: each
    transition's rank among the distinct scores, and their number (``np.unique``'s
    inverse). A row's positive and negative weight at each distinct score, by bincount (a
    one-hot matrix of transitions × distinct scores would be 80 GB at 10⁵ transitions)."""
    inv, distinct = x
    auc: FloatArray = np.empty(w.shape[0])
    for i, row in enumerate(w):
        pos = np.bincount(inv, weights=row * y, minlength=distinct)
        neg = np.bincount(inv, weights=row * ~y, minlength=distinct)
        below = np.cumsum(neg) - neg  # negative weight strictly below each score
        with np.errstate(invalid="ignore", divide="ignore"):
            auc[i] = (pos * (below + 0.5 * neg)).sum() / (pos.sum() * neg.sum())
    return auc


def _ranks(x: FloatArray) -> tuple[NDArray[np.intp], int]:
    """What ``_weighted_auc`` takes of a score: found once, used by every resample."""
    uniq, inv = np.unique(x, return_inverse=True)
    return inv.ravel().astype(np.intp), int(uniq.shape[0])


@dataclass(frozen=True)
class AucDifferenceResult:
    """AUC of post-step margins under each channel for a success indicator, and AUC1 − AUC0."""

    auc0: float
    auc1: float
    difference: float
    samples: FloatArray  # (n_resamples, 3)
    confidence_level: float
    method: IntervalMethod = DEFAULT_METHOD
    accelerations: FloatArray = field(default_factory=lambda: np.zeros(3))

    def confidence_interval(self, name: str, *, confidence_level: float | None = None,
                            method: IntervalMethod | None = None) -> ConfidenceInterval[float]:
        """The interval of ``name`` (``"auc0"``, ``"auc1"`` or ``"difference"``) by
        ``method`` (default: the result's), at the result's ``confidence_level`` unless
        another is given; resamples whose trajectories hold only successes or only failures
        (NaN AUC) are left out."""
        names = ("auc0", "auc1", "difference")
        return _interval_of(self.samples, names, name, getattr(self, name),
                            self.confidence_level if confidence_level is None
                            else confidence_level, method or self.method, self.accelerations)

    def interval(self, name: str, *, method: IntervalMethod | None = None
                 ) -> ConfidenceInterval[float]:
        """Deprecated: ``confidence_interval`` (same arguments)."""
        warn_renamed("AucDifferenceResult.interval", "AucDifferenceResult.confidence_interval")
        return self.confidence_interval(name, method=method)

    @html_repr
    def _repr_html_(self) -> str:
        return _estimates(self, {"auc0": self.auc0, "auc1": self.auc1,
                                 "difference": self.difference})


def _interval_of(samples: FloatArray, names: tuple[str, ...], name: str, value: float,
                 confidence_level: float, method: IntervalMethod, accelerations: FloatArray
                 ) -> ConfidenceInterval[float]:
    if name not in names:
        raise KeyError(f"unknown statistic {name!r}; one of {list(names)}")
    j = names.index(name)
    low, high = bootstrap_interval(samples[:, j], value, confidence_level=confidence_level,
                                   method=check_method(method),
                                   acceleration=accelerations[j])
    return ConfidenceInterval(float(low), float(high))


def auc_difference(
    post0: ArrayLike,
    post1: ArrayLike,
    success: ArrayLike,
    *,
    trajectory: ArrayLike | Sequence[Any],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    method: IntervalMethod = DEFAULT_METHOD,
) -> AucDifferenceResult:
    """Paired AUC difference of post-step margins against a stored success indicator.

    ``AUC_ρ`` is the probability that a successful trajectory's margin exceeds an
    unsuccessful one's (ties ½) under channel ρ; the difference ``AUC1 − AUC0`` is paired
    (same transitions) and bootstrapped over trajectories ([ASV] §5.3); ``method`` picks
    the interval (``"BCa"`` default, ``"percentile"``, ``"basic"``).
    """
    _check_resamples(n_resamples)
    confidence_level = check_confidence_level(confidence_level)
    method = check_method(method)
    x0 = _corner("post0", post0, None)
    n = x0.shape[0]
    x1 = _corner("post1", post1, n)
    if np.isnan(x0).any() or np.isnan(x1).any():
        raise ValueError("`post0`/`post1` must be complete (no NaN)")
    s = np.asarray(success)
    if s.shape != (n,) or not np.isin(s, (0, 1, True, False)).all():
        raise ValueError(f"`success` must be 0/1 per transition ({n}); found shape {s.shape}")
    yb = s.astype(bool)
    if yb.all() or not yb.any():
        raise ValueError("`success` needs both successes and failures for an AUC")
    t_uniq, traj = codes(trajectory, name="trajectory")
    if traj.shape[0] != n:
        raise ValueError(f"`trajectory` has {traj.shape[0]} labels for {n} transitions")
    r0, r1 = _ranks(x0), _ranks(x1)
    ones = np.ones((1, n))
    a0, a1 = float(_weighted_auc(r0, yb, ones)[0]), float(_weighted_auc(r1, yb, ones)[0])
    batches = []
    for counts in _block_count_rows(len(t_uniq), int(n_resamples), seed,
                                    _batch_rows(n, 1_000)):
        w = counts[:, traj]
        batches.append((_weighted_auc(r0, yb, w), _weighted_auc(r1, yb, w)))
    b0, b1 = (np.concatenate([b[k] for b in batches]) for k in (0, 1))
    accel = np.zeros(3)
    if len(t_uniq) >= 2:
        parts = []
        for c in _jackknife_rows(len(t_uniq), n):
            j0, j1 = _weighted_auc(r0, yb, c[:, traj]), _weighted_auc(r1, yb, c[:, traj])
            parts.append(np.column_stack([j0, j1, j1 - j0]))
        jk = np.concatenate(parts)
        # a leave-one-out sample without successes or failures has no AUC: leave it out
        keep = np.isfinite(jk).all(axis=1)
        accel = jackknife_acceleration(jk[keep].T) if keep.sum() >= 2 else accel
    return AucDifferenceResult(a0, a1, a1 - a0, np.column_stack([b0, b1, b1 - b0]),
                               confidence_level, method, accel)
