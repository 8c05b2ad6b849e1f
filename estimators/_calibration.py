"""Calibration of the decision rule: the sign-flip null, leave-one-cluster-out ([LBC] F.5)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._board import CalibrationResult, LeaveOneOut, PairDecision
from ._decisions import _Cells
from ._executor import BLOCK_DRAWS, Executor, block_rng, map_blocks
from ._inputs import _Inputs
from ._plan import Plan
from ._radius import (
    MIN_DF,
    _cf_coefficients,
    _cluster_weights,
    _critical,
    _from_sums,
    _radius,
    _t_quantiles,
)
from ._ranks import RankIntervalsResult, rank_intervals

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class _SkewTerms:
    """What ``"cr2-bm-cf"`` adds to a flipped draw: its cells' skewness terms."""

    E3: FloatArray
    E2N: FloatArray
    EN2: FloatArray
    N3: FloatArray
    adjust: FloatArray
    first: float
    second: float


@dataclass(frozen=True)
class _SignFlipNull:
    """The centred per-cluster sums of the decidable cells: all a block of draws reads."""

    seed: int
    n_resamples: int
    n_clusters: int
    n_targets: int
    columns: tuple[NDArray[np.intp], ...]  # per target, its cells (columns of E)
    E: FloatArray
    EN: FloatArray
    A: FloatArray
    C: FloatArray
    n: FloatArray
    factor: FloatArray
    rad: FloatArray
    tq: FloatArray
    skew: _SkewTerms | None


def _null_blocks(null: _SignFlipNull, lo: int, hi: int) -> FloatArray:
    """``max over a target's pairs of |Δ*| / radius`` for draw blocks ``lo`` to ``hi``,
    shape ``(draws, targets)``; block ``j`` draws its signs from ``block_rng(seed, j)``."""
    out = []
    for j in range(lo, hi):
        size = min(BLOCK_DRAWS, null.n_resamples - j * BLOCK_DRAWS)
        rng = block_rng(null.seed, j)
        S = rng.integers(0, 2, size=(size, null.n_clusters)).astype(np.float64) * 2.0 - 1.0
        mean = (S @ null.E.T) / null.n
        mean2 = mean * mean
        ss = np.maximum(null.A - 2.0 * mean * (S @ null.EN.T) + mean2 * null.C, 0.0)
        root = np.sqrt(ss)
        crit = null.tq
        if (k := null.skew) is not None:
            cube = (S @ k.E3.T) - 3.0 * mean * k.E2N + mean2 * (3.0 * (S @ k.EN2.T)
                                                                 - mean * k.N3)
            with np.errstate(invalid="ignore", divide="ignore"):
                skew = np.abs(np.where(ss > 0, cube / (ss * root), 0.0) * k.adjust)
            crit = null.tq + skew * (k.first + skew * k.second)  # _cornish_fisher, inlined
        denom = crit * root * np.sqrt(null.factor) + null.rad
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(denom > 0, np.abs(mean) / denom,
                             np.where(np.abs(mean) > 0, np.inf, 0.0))
        block = np.zeros((size, null.n_targets))
        for t, cols in enumerate(null.columns):
            if len(cols):
                block[:, t] = ratio[:, cols].max(axis=1)
        out.append(block)
    return np.concatenate(out, axis=0) if out else np.zeros((0, null.n_targets))


def _calibrate(plan: Plan, inp: _Inputs, c: _Cells,
               decisions: dict[str, tuple[PairDecision, ...]], ranks: RankIntervalsResult,
               executor: Executor = "local") -> CalibrationResult:
    """Appendix F.5: the sign-flip null, ``c*`` and leave-one-cluster-out stability.

    Every decidable cell's differences are centred (the null: no system differs) and their
    signs flipped per cluster, with one ±1 vector per draw shared by every pair and target.
    The flipped statistics use the board's own rule (the plan's ``sampling``: its per-cluster
    weights ``w_g`` and its degrees of freedom, which depend on the cluster sizes only, so
    they do not change under a flip) and come from per-cluster sums, so a draw costs two
    matrix products: with ``E_g = Σ_{i∈g}(d_i − Δ̂)`` and ``n_g`` tasks in cluster ``g``,
    ``Δ* = Σ_g s_g E_g / N`` and ``Σ_g w_g (s_g E_g − n_g Δ*)² = Σ w E² −
    2Δ* Σ s_g w_g E_g n_g + Δ*² Σ w_g n_g²``. Under ``"cr2-bm-cf"`` the skewness of every
    flipped cell is recomputed the same way (``s_g² = 1``, ``s_g³ = s_g``):
    ``Σ_g w_g^{3/2} (s_g E_g − n_g Δ*)³ = Σ s_g w^{3/2} E³ − 3Δ* Σ w^{3/2} E² n +
    3Δ*² Σ s_g w^{3/2} E n² − Δ*³ Σ w^{3/2} n³``, so the flipped radius is the rule's own. A
    zero-variance cell is never certified by the rule, so it is left out of the null as
    well. What the null can and cannot detect is written in ``CalibrationResult``'s
    docstring: it cannot see skew, since a sign flip makes any null symmetric.

    The draws come in blocks of ``BLOCK_DRAWS``, block ``j`` from the ``j``-th child of
    ``SeedSequence(plan.calibration.seed)`` (``_null_blocks``): ``executor="ray"`` computes
    ranges of blocks as Ray tasks, with the same result.
    """
    B = plan.calibration.n_resamples
    G = len(inp.clusters)
    T = len(c.targets)
    keep = np.flatnonzero(c.ok & ~c.mo.degenerate)
    counts, w = c.mo.counts[keep], c.mo.weights[keep]
    E = c.mo.sums[keep] - counts * c.mo.mean[keep, None]
    n = c.mo.n[keep]
    A = (w * E**2).sum(axis=1)
    C = (w * counts**2).sum(axis=1)
    EN = w * E * counts
    factor = 1.0 / n**2
    rad = c.rad[keep]
    level = 1.0 - plan.delta_prime / (2.0 * len(c.pairs))
    skewed = plan.sampling == "cr2-bm-cf"
    # The t part of the rule's multiplier; its skewness terms change with every draw.
    tq = _t_quantiles(level, c.mo.df[keep]) if skewed else c.tq[keep]
    skew: _SkewTerms | None = None
    if skewed:
        w3 = w**1.5
        g = c.mo.g[keep]
        with np.errstate(invalid="ignore", divide="ignore"):
            adjust = np.where(g >= 3, np.sqrt(g * (g - 1.0)) / (g - 2.0), 0.0)
        first, second = _cf_coefficients(level)
        skew = _SkewTerms(E3=w3 * E**3, E2N=(w3 * E**2 * counts).sum(axis=1),
                          EN2=w3 * E * counts**2, N3=(w3 * counts**3).sum(axis=1),
                          adjust=adjust, first=first, second=second)
    target_of = keep % T
    null = _SignFlipNull(
        seed=plan.calibration.seed, n_resamples=B, n_clusters=G, n_targets=T,
        columns=tuple(np.flatnonzero(target_of == t) for t in range(T)), E=E, EN=EN, A=A,
        C=C, n=n, factor=factor, rad=rad, tq=tq, skew=skew)
    n_blocks = -(-B // BLOCK_DRAWS) if len(keep) else 0
    (parts,) = map_blocks(_null_blocks, [(null, n_blocks)], executor)
    ratio_max = np.concatenate(parts, axis=0) if parts else np.zeros((B, T))
    columns = null.columns
    allowed = math.floor(plan.delta_prime * B)
    rates: dict[str, float] = {}
    stars: dict[str, float] = {}
    for t, name in enumerate(c.targets):
        rates[name] = float((ratio_max[:, t] > 1.0).mean()) if B else math.nan
        # c*: the smallest scale with P(max_pairs |Δ*| / radius > c*) ≤ δ′ over the draws.
        stars[name] = (float(np.sort(ratio_max[:, t])[B - allowed - 1])
                       if len(columns[t]) and allowed < B else math.nan)
    main = decisions[plan.target]
    cs = stars[plan.target]
    drops = tuple(sorted((p.better, p.worse) for p in main
                         if p.better is not None and p.worse is not None
                         and math.isfinite(cs) and p.margin <= cs))
    rate = rates[plan.target]
    loo = (_leave_one_out(plan, inp, c, main, ranks)
           if plan.calibration.leave_one_cluster_out else [])
    jac = [x.jaccard for x in loo]
    min_df, dominated = _dominated(plan, inp, c)
    return CalibrationResult(
        n_resamples=B, seed=plan.calibration.seed, nominal=plan.delta_prime,
        family_rate=rate, mc_se=math.sqrt(rate * (1 - rate) / B) if B else math.nan,
        rates=rates, c_star=cs, c_star_by_target=stars, drops=drops,
        jaccard_mean=float(np.mean(jac)) if jac else math.nan,
        jaccard_min=float(np.min(jac)) if jac else math.nan,
        flips=sum(x.flips for x in loo),
        winner_flips=sum(1 for x in loo if x.winner_flip),
        leave_one_out=tuple(loo), sampling=plan.sampling, min_df=min_df,
        dominated=dominated,
    )


def _dominated(plan: Plan, inp: _Inputs, c: _Cells) -> tuple[float, tuple[tuple[str, str], ...]]:
    """The smallest Bell–McCaffrey df over the target's decided cells, and the pairs below
    ``MIN_DF``: a property of the cluster sizes, computed whatever the plan's ``sampling``."""
    T = len(c.targets)
    rows = np.arange(len(c.pairs)) * T + c.targets.index(plan.target)
    rows = rows[c.ok[rows]]
    if not len(rows):
        return math.nan, ()
    counts = c.mo.counts[rows]
    _, df = _cluster_weights(counts, c.mo.n[rows], c.mo.g[rows], "cr2-bm")
    low = [(inp.systems[c.pairs[k // T][0]], inp.systems[c.pairs[k // T][1]])
           for k, v in zip(rows, df, strict=True) if v < MIN_DF]
    return float(np.nanmin(df)), tuple(low)


def _winners(ranks: RankIntervalsResult) -> set[str]:
    return {s for s, (lo, _) in ranks.intervals.items() if lo == 1}


def _leave_one_out(plan: Plan, inp: _Inputs, c: _Cells, main: tuple[PairDecision, ...],
                   ranks: RankIntervalsResult) -> list[LeaveOneOut]:
    """Certify the board's target again with each cluster left out.

    Admissibility and the nuisance radii are held fixed (they were decided before any score
    and do not depend on which tasks are scored); ``Δ̂``, the plan's cluster-robust error,
    its degrees of freedom and the t quantile are recomputed from the per-cluster sums.
    """
    T = len(c.targets)
    m = len(c.pairs)
    rows = np.arange(m) * T + c.targets.index(plan.target)
    sums, counts, scale = c.mo.sums[rows], c.mo.counts[rows], c.mo.scale[rows]  # (P, G)
    admissible, rad = c.admissible[rows], c.rad[rows]
    level = 1.0 - plan.delta_prime / (2.0 * m)
    full = {(p.better, p.worse) for p in main if p.better is not None and p.worse is not None}
    names = inp.systems
    winners = _winners(ranks)
    out: list[LeaveOneOut] = []
    for h, label in enumerate(inp.clusters):
        sums2, counts2 = sums.copy(), counts.copy()
        sums2[:, h] = counts2[:, h] = 0.0
        mo = _from_sums(sums2, counts2, scale, plan.sampling)
        q2 = _radius(mo, _critical(level, mo.df, mo.skew, plan.sampling))
        mean2 = mo.mean
        with np.errstate(invalid="ignore"):
            cert = (admissible & (mo.n >= plan.min_common_tasks) & (mo.g >= 2)
                    & (np.abs(mean2) > q2 + rad))
        rel: set[tuple[str, str]] = set()
        for i in np.flatnonzero(cert):
            a, b = names[c.pairs[i][0]], names[c.pairs[i][1]]
            rel.add((a, b) if mean2[i] > 0 else (b, a))
        union = full | rel
        jaccard = len(full & rel) / len(union) if union else 1.0
        flips = sum(1 for a, b in full if (b, a) in rel)
        first = _winners(rank_intervals(names, rel))
        out.append(LeaveOneOut(label, len(rel), jaccard, flips, tuple(sorted(first)),
                               winner_flip=not first & winners))
    return out

