"""A vectorised simulator of adaptive evidence search with known design probabilities.

Pools of ``n_pool`` documents with an attribute ``a`` correlated with the evidence score
``Y``; a search that opens up to ``budget`` documents, choosing by a softmax of
``strength · a`` mixed with a uniform exploration floor (``strength`` 0 is unbiased
selection), an opened document keeping a ``revisit`` share of its weight (positive, so
every candidate has positive probability at every round: [SSC] Assumption 1);
informative stopping before rounds t ≥ 2 that depends on the opened
evidence ([SSC] Appendix A.3 and A.4). Every probability the estimator needs is the
one the simulated controller used, so Theorem 1's conditions hold by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]


@dataclass(frozen=True)
class Logged:
    y: F  # (n, K) evidence of the opened document per round, NaN after stopping
    p: F  # (n, K) logged selection probability of the opened document
    s: F  # (n, K) survival probability of reaching the round
    m: F  # (n, K) prediction of the opened document
    m_bar: F  # (n,)
    n_pool: int
    theta_star: F  # (n,) the pool target of each trajectory's pool
    pool: NDArray[np.intp]  # (n,) pool index of each trajectory
    reachable_mean: F  # (n,) mean Y over documents with positive probability (θ+)
    rho: F  # (n,) inaccessible mass


def make_pools(n_pools: int, n_pool: int, rng: np.random.Generator) -> tuple[F, F, F]:
    """Attribute ``a``, evidence ``Y ∈ [-1, 1]`` correlated with ``a``, a rough prediction ``m``."""
    a = rng.normal(size=(n_pools, n_pool))
    y = np.tanh(0.9 * a + 0.5 * rng.normal(size=(n_pools, n_pool)) + rng.normal(
        scale=0.4, size=(n_pools, 1)))
    m = 0.3 * np.tanh(a) - 0.25  # a deliberately misspecified model, biased low
    return a, y, m


def simulate(
    *,
    n_pools: int,
    runs_per_pool: int,
    n_pool: int = 30,
    budget: int = 4,
    strength: float = 2.0,
    floor: float = 0.1,
    stop_low: float = 0.05,
    stop_high: float = 0.6,
    deterministic: bool = False,
    revisit: float = 0.3,
    seed: int = 0,
) -> Logged:
    rng = np.random.default_rng(seed)
    a, Y, M = make_pools(n_pools, n_pool, rng)
    pool = np.repeat(np.arange(n_pools), runs_per_pool)
    n = pool.shape[0]
    A, YY, MM = a[pool], Y[pool], M[pool]
    opened = np.zeros((n, n_pool), dtype=bool)
    alive = np.ones(n, dtype=bool)
    s = np.ones(n)
    out = {k: np.full((n, budget), np.nan) for k in ("y", "p", "s", "m")}
    reached = np.zeros((n, n_pool), dtype=bool)  # positive probability in some logged vector
    rows = np.arange(n)
    for t in range(budget):
        if t > 0:
            seen_mean = np.nanmean(out["y"][:, :t], axis=1)
            c = np.where(seen_mean > 0, stop_high, stop_low)  # informative stopping
            stop = rng.random(n) < c
            s = s * (1 - c)
            alive &= ~stop
        if deterministic:  # the top unopened document: most of the pool is never reachable
            score = np.where(opened, -np.inf, A)
            probs = (score == score.max(axis=1, keepdims=True)).astype(np.float64)
        else:
            z = np.exp(strength * (A - A.max(axis=1, keepdims=True)))
            soft = z / z.sum(axis=1, keepdims=True)
            probs = ((1 - floor) * soft + floor / n_pool) * np.where(opened, revisit, 1.0)
        probs /= probs.sum(axis=1, keepdims=True)
        reached |= (probs > 0) & alive[:, None]
        u = rng.random(n)[:, None]
        choice = np.minimum((np.cumsum(probs, axis=1) < u).sum(axis=1), n_pool - 1)
        choice = np.where(probs[rows, choice] > 0, choice, np.argmax(probs, axis=1))
        idx = alive
        out["y"][idx, t] = YY[idx, choice[idx]]
        out["p"][idx, t] = probs[idx, choice[idx]]
        out["s"][idx, t] = s[idx]
        out["m"][idx, t] = MM[idx, choice[idx]]
        opened[rows[idx], choice[idx]] = True
    with np.errstate(invalid="ignore"):
        reach_mean = np.where(reached, YY, 0).sum(axis=1) / reached.sum(axis=1)
    return Logged(
        y=out["y"], p=out["p"], s=out["s"], m=out["m"], m_bar=MM.mean(axis=1), n_pool=n_pool,
        theta_star=YY.mean(axis=1), pool=pool, reachable_mean=reach_mean,
        rho=1 - reached.sum(axis=1) / n_pool,
    )


def clustered_mean_se(values: F, clusters: NDArray[np.intp]) -> tuple[float, float]:
    """Mean over clusters of cluster means, and its standard error across clusters."""
    k = int(clusters.max()) + 1
    means = np.bincount(clusters, weights=values, minlength=k) / np.bincount(clusters,
                                                                               minlength=k)
    return float(means.mean()), float(means.std(ddof=1) / np.sqrt(k))
