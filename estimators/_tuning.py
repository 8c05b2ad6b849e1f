"""Choosing the CESS shrinkage coefficient λ without looking at the evaluation tasks.

Two rules ([SSC] §3.3 and Appendix A.2):

* ``tune_lambda`` — one λ shared by all evaluation tasks, chosen on separate *tuning*
  tasks by a grid search that minimises MAE against their known pool targets θ*. It uses
  the tuning tasks' logged trajectories, predictions and targets; it never sees an
  evaluation task.
* ``taskwise_lambda`` — one λ per trajectory, decided before any document score of that
  task is read: empirical Bayes ``λ = τ² / (τ² + v̂)``. ``τ²`` is the prior variance of the
  gap θ* − m̄ and ``σ²`` the variance of a document's prediction error, both estimated on
  tuning tasks by ``fit_taskwise_prior``; ``v̂ = σ² Σ_t w_t² / K²`` is the variance of the
  correction term implied by the trajectory's logged weights ``w_t = 1/(N p_t s_t)`` — logged
  probabilities only, no outcome of the evaluated task.

Examples:
    >>> from agentlog.estimators import cess
    >>> lam = cess.taskwise_lambda([0.1], [1.0], 10, budget=1, tau2=0.04, sigma2=0.16)
    >>> round(float(lam[0]), 12)
    0.2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._audit import _questions
from ._bootstrap import group_means
from ._cess import Anchor, Order, _as_rounds, _estimate_iv, _forms_iv, estimate

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class TuneResult:
    """The chosen λ, the grid searched and the tuning MAE at each grid point."""

    lam: float
    grid: FloatArray
    mae: FloatArray
    n_tuning_questions: int


def tune_lambda(
    y: ArrayLike, p: ArrayLike, s: ArrayLike, m_chosen: ArrayLike, m_bar: ArrayLike,
    n_pool: ArrayLike, theta_star: ArrayLike, *, budget: int, question: Any = None,
    grid: ArrayLike | None = None, order: Order = "shrink-then-clip",
    anchor: Anchor = "prediction", bounds: tuple[float, float] = (-1.0, 1.0),
    replacement: Any = "with",
) -> TuneResult:
    """Grid-search λ on tuning tasks: minimise MAE (within-question, questions equal).

    Ties go to the smaller λ (more shrinkage). Pass only tuning tasks. ``replacement``
    (``"with"``, ``"without"`` or one per trajectory, as ``cess.estimate`` takes it, e.g.
    ``CessData.replacement``) picks the raw DR form each trajectory is tuned with.
    """
    lam_grid = np.linspace(0.0, 1.0, 101) if grid is None else np.asarray(grid, np.float64)
    if lam_grid.ndim != 1 or lam_grid.size == 0 or not ((lam_grid >= 0) & (lam_grid <= 1)).all():
        raise ValueError("`grid` must be a non-empty 1-D array of λ values in [0, 1]")
    base = estimate(y, p, s, m_chosen, m_bar, n_pool, budget=budget, lam=0.0, order=order,
                    anchor=anchor, bounds=bounds, replacement=replacement)
    n = len(base)
    truth = np.asarray(theta_star, dtype=np.float64)
    truth = np.full(n, float(truth)) if truth.ndim == 0 else truth
    if truth.shape != (n,) or not np.isfinite(truth).all():
        raise ValueError(f"`theta_star` must be finite, one per trajectory ({n}); found "
                         f"shape {truth.shape}")
    low, high = bounds
    anchor_values = base.outcome_regression if anchor == "prediction" else base.opened_mean
    corrected = base.dr_raw if order == "shrink-then-clip" else np.clip(base.dr_raw, low, high)
    # (grid, trajectories) in one pass: no loop over λ or trajectories.
    est = np.clip(anchor_values + lam_grid[:, None] * (corrected - anchor_values), low, high)
    nq, q = _questions(question, n)
    err = group_means(np.abs(est - truth).T, q, nq)  # (questions, grid)
    curve = np.nanmean(err, axis=0)
    best = int(np.nanargmin(curve))
    return TuneResult(float(lam_grid[best]), lam_grid, curve, nq)


def taskwise_lambda(
    p: ArrayLike, s: ArrayLike, n_pool: ArrayLike, *, budget: int, tau2: float, sigma2: float,
    replacement: Any = "with",
) -> FloatArray:
    """Empirical-Bayes λ per trajectory from its logged weights only (no outcomes).

    ``λ = τ² / (τ² + v̂)`` with ``v̂ = σ² Σ_k W_k² / K²`` over the weights the raw DR puts on
    each opened residual: ``W_k = 1/(N p_k s_k)`` with replacement (eq. 6), and without
    replacement (Des Raj's ordered form) ``W_k = 1/(N p_k s_k) + Σ_{k<t≤T} 1/(N s_t)``, a
    residual opened at round k also entering every later round's sum.
    ``replacement`` is as ``cess.estimate`` takes it (e.g. ``CessData.replacement``).
    """
    P = _as_rounds("p", p)
    S = _as_rounds("s", s)
    if not (np.isfinite(tau2) and tau2 >= 0):
        raise ValueError(f"`tau2` must be a finite variance >= 0; found {tau2}")
    if not (np.isfinite(sigma2) and sigma2 >= 0):
        raise ValueError(f"`sigma2` must be a finite variance >= 0; found {sigma2}")
    # Reuse the estimator's checks on p, s and n_pool (y is only a NaN-pattern carrier here).
    carrier = np.where(np.isnan(P), np.nan, 0.0)
    _, P, S, _, _, N, _, observed = _estimate_iv(carrier, P, S, carrier, 0.0, n_pool, budget,
                                                 0.0, "shrink-then-clip", "prediction",
                                                 (-1.0, 1.0))
    w = np.where(observed, 1.0 / (N[:, None] * np.where(observed, P * S, 1.0)), 0.0)
    without = _forms_iv(replacement, P.shape[0])
    if without.any():
        inv_s = np.where(observed, 1.0 / (N[:, None] * np.where(observed, S, 1.0)), 0.0)
        later = np.cumsum(inv_s[:, ::-1], axis=1)[:, ::-1] - inv_s  # Σ over t > k
        w = np.where(without[:, None] & observed, w + later, w)
    v = sigma2 * (w * w).sum(axis=1) / float(budget) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(tau2 + v > 0, tau2 / (tau2 + v), 0.0)
    out: FloatArray = lam
    return out


def fit_taskwise_prior(
    y: ArrayLike, m_chosen: ArrayLike, m_bar: ArrayLike, theta_star: ArrayLike, *,
    question: Any = None,
) -> tuple[float, float]:
    """``(τ², σ²)`` from tuning tasks: mean (θ* − m̄)² over questions, mean squared residual."""
    Y = _as_rounds("y", y)
    M = _as_rounds("m_chosen", m_chosen)
    if M.shape != Y.shape:
        raise ValueError(f"`m_chosen` must have the shape of `y` {Y.shape}; found {M.shape}")
    n = Y.shape[0]
    mb = np.broadcast_to(np.asarray(m_bar, dtype=np.float64), (n,))
    ts = np.broadcast_to(np.asarray(theta_star, dtype=np.float64), (n,))
    if not (np.isfinite(mb).all() and np.isfinite(ts).all()):
        raise ValueError("`m_bar` and `theta_star` must be finite")
    nq, q = _questions(question, n)
    gap = group_means((ts - mb) ** 2, q, nq)
    resid = (Y - M)[~np.isnan(Y)]
    if resid.size < 2:
        raise ValueError("need at least two opened documents on tuning tasks to fit σ²")
    return float(gap.mean()), float(np.mean(resid**2))
