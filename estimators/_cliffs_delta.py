"""Cliff's δ with a bootstrap CI and a randomisation p-value ([DMC] §4.4).

For paired A/B runs: the within-pair Cliff's δ ``[#(Δ_i > 0) − #(Δ_i < 0)] / n`` with the
sign-flip test it accompanies (§4.4); for independent samples ``P(a > b) − P(a < b)`` with a
permutation test.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from agentlog import DegenerateDataWarning

from ._cell_bootstrap import _CHUNK, _percentile_interval
from ._interval import ConfidenceInterval
from ._scores import FloatArray, IntArray, _as_scores, _check_count, _check_seed, _readonly

PvalueStatistic = Literal["mean_difference", "delta"]

#: Reference sets (sign vectors, label splits) of at most this many members are enumerated;
#: larger ones are sampled. 2**16 sign vectors is n ≤ 16 pairs.
EXACT_LIMIT = 1 << 16


@dataclass(frozen=True, eq=False)
class CliffsDeltaResult:
    """Cliff's δ of ``a`` over ``b`` with a bootstrap CI and a randomisation p-value.

    Attributes:
        delta: paired: ``[#(a_i > b_i) − #(a_i < b_i)] / n`` ([DMC] §4.4); unpaired:
            ``P(a > b) − P(a < b)`` over all ``m·n`` pairs (``= 2U/(mn) − 1``).
        pvalue: two-sided p-value of ``pvalue_statistic`` under the null of exchangeable
            labels: sign flips of the paired differences, or permutations of the pooled
            unpaired samples. ``min(1, 2·min(P(T ≤ t), P(T ≥ t)))``, as
            ``scipy.stats.permutation_test`` computes it.
        pvalue_statistic: ``"mean_difference"`` (paired: ``mean(a − b)``; unpaired:
            ``mean(a) − mean(b)``) or ``"delta"`` (δ itself: the sign test, or a
            permutation Mann–Whitney test).
        pvalue_method: ``"exact"`` (every sign vector or split enumerated) or
            ``"monte carlo"`` (``n_permutations`` seeded draws, ``p = (1 + #)/(1 + R)``).
        n_permutations: the size of the reference set used for the p-value.
        mean_difference: the observed mean difference.
        paired: whether the pairs were matched.
        n_a, n_b: sample sizes (equal when paired).
        bootstrap_distribution: the ``n_resamples`` bootstrap values of δ (pairs resampled
            together when paired; ``a`` and ``b`` resampled independently otherwise).
        seed: the seed of every draw.
    """

    delta: float
    pvalue: float
    pvalue_statistic: str
    pvalue_method: str
    n_permutations: int
    mean_difference: float
    paired: bool
    n_a: int
    n_b: int
    bootstrap_distribution: FloatArray = field(repr=False)
    seed: int

    @property
    def statistic(self) -> float:
        """δ (scipy's name for a result's point value)."""
        return self.delta

    @property
    def n_resamples(self) -> int:
        return int(self.bootstrap_distribution.shape[0])

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval[float]:
        """Seeded percentile bootstrap interval for δ."""
        low, high = _percentile_interval(self.bootstrap_distribution, confidence_level)
        return ConfidenceInterval(float(low), float(high))


def _row_blocks(n_rows: int, width: int) -> Iterator[tuple[int, int]]:
    step = max(1, _CHUNK // max(1, width))
    for lo in range(0, n_rows, step):
        yield lo, min(n_rows, lo + step)


def _delta_from_codes(ca: IntArray, cb: IntArray, k: int) -> FloatArray:
    """Unpaired δ per row of integer-coded samples ``ca`` (R, m) and ``cb`` (R, n).

    With per-row histograms over the ``k`` distinct values, ``δ = Σ_v h_a(v)·(#b < v −
    #b > v) / (mn)``: exact integer counts, no per-row sort.
    """
    rows, m = ca.shape
    n = cb.shape[1]
    offsets = (np.arange(rows, dtype=np.intp) * k)[:, None]
    ha = np.bincount((ca + offsets).ravel(), minlength=rows * k).reshape(rows, k)
    hb = np.bincount((cb + offsets).ravel(), minlength=rows * k).reshape(rows, k)
    at_or_below = np.cumsum(hb, axis=1)
    net = (at_or_below - hb) - (n - at_or_below)
    return np.asarray((ha * net).sum(axis=1) / (m * n), dtype=np.float64)


def _two_sided(null: FloatArray, observed: float, *, exact: bool) -> float:
    gamma = abs(observed) * np.finfo(np.float64).eps * 100  # float ties, as scipy does
    adjust = 0 if exact else 1
    less = (np.count_nonzero(null <= observed + gamma) + adjust) / (null.shape[0] + adjust)
    greater = (np.count_nonzero(null >= observed - gamma) + adjust) / (null.shape[0] + adjust)
    return float(min(1.0, 2 * min(less, greater)))


def _cliffs_delta_iv(a: ArrayLike, b: ArrayLike, paired: bool, n_resamples: int,
                     n_permutations: int, seed: int, pvalue_statistic: str
                     ) -> tuple[FloatArray, FloatArray, int, int, int]:
    xa = _as_scores("a", a)
    xb = _as_scores("b", b)
    if paired and xa.shape != xb.shape:
        raise ValueError(f"`b` must pair with `a` (paired=True): found {xb.shape[0]} values "
                         f"for {xa.shape[0]}; pass paired=False for independent samples")
    if pvalue_statistic not in ("mean_difference", "delta"):
        raise ValueError("`pvalue_statistic` must be 'mean_difference' or 'delta'; found "
                         f"{pvalue_statistic!r}")
    return (xa, xb, _check_count("n_resamples", n_resamples, 2),
            _check_count("n_permutations", n_permutations, 1), _check_seed(seed))


def cliffs_delta(
    a: ArrayLike,
    b: ArrayLike,
    *,
    paired: bool = True,
    n_resamples: int = 2000,
    n_permutations: int = 9999,
    seed: int = 0,
    pvalue_statistic: PvalueStatistic = "mean_difference",
) -> CliffsDeltaResult:
    """Cliff's δ of ``a`` over ``b``, bootstrap CI and randomisation p-value ([DMC] §4.4).

    Paired (``paired=True``, the paper's A/B design, runs matched by seed): with
    ``Δ_i = a_i − b_i``, ``δ = [#(Δ_i > 0) − #(Δ_i < 0)] / n = mean(sign Δ)``, "the
    effect-size companion of the sign-flip test". The p-value flips the signs of the
    differences: all ``2^n`` sign vectors when ``2^n ≤ 65,536`` (n ≤ 16), else
    ``n_permutations`` seeded draws. Unpaired: ``δ = P(a > b) − P(a < b)`` over all pairs
    (Cliff 1993), ``= 2U/(mn) − 1`` with U the Mann–Whitney statistic of ``a``, ties
    included; the p-value permutes the pooled sample (every split when ``C(m+n, m) ≤
    65,536`` and ``C(m+n, m)·(m+n) ≤ 2^26``, else seeded draws).

    Args:
        a, b: scores, finite; of equal length when paired.
        paired: match ``a[i]`` with ``b[i]``.
        n_resamples: bootstrap draws for the interval of δ.
        n_permutations: Monte Carlo draws of the p-value's reference set when it is too
            large to enumerate.
        seed: seeds every draw (bootstrap ``default_rng((seed, 0))``, reference set
            ``default_rng((seed, 1))``); same inputs and seed, bit-identical results.
        pvalue_statistic: ``"mean_difference"`` (default; the paper's sign-flip test of the
            mean difference Δ) or ``"delta"`` (test δ itself: the exact sign test when
            paired, a permutation Mann–Whitney test when not).

    Returns:
        A ``CliffsDeltaResult``.

    Warns:
        DegenerateDataWarning: every paired difference is zero (δ = 0, p = 1, the
            interval is a point).
    """
    xa, xb, n_resamples, n_permutations, seed = _cliffs_delta_iv(
        a, b, paired, n_resamples, n_permutations, seed, pvalue_statistic)
    boot_rng = np.random.default_rng([seed, 0])
    perm_rng = np.random.default_rng([seed, 1])
    if paired:
        return _paired_delta(xa, xb, n_resamples, n_permutations, seed, pvalue_statistic,
                             boot_rng, perm_rng)
    return _unpaired_delta(xa, xb, n_resamples, n_permutations, seed, pvalue_statistic,
                           boot_rng, perm_rng)


def _paired_delta(xa: FloatArray, xb: FloatArray, n_resamples: int, n_permutations: int,
                  seed: int, pvalue_statistic: str, boot_rng: np.random.Generator,
                  perm_rng: np.random.Generator) -> CliffsDeltaResult:
    d = xa - xb
    n = d.shape[0]
    s = np.sign(d)
    if not s.any():
        warnings.warn(f"every one of the {n} paired differences is zero: δ = 0, p = 1 and "
                      "the interval is a point", DegenerateDataWarning, stacklevel=3)
    boot = np.empty(n_resamples)
    for lo, hi in _row_blocks(n_resamples, n):
        boot[lo:hi] = s[boot_rng.integers(0, n, size=(hi - lo, n))].mean(axis=1)
    v = d if pvalue_statistic == "mean_difference" else s
    observed = float(v.mean())
    exact = n < 63 and (1 << n) <= EXACT_LIMIT
    total = 1 << n if exact else n_permutations
    null = np.empty(total)
    for lo, hi in _row_blocks(total, n):
        if exact:
            bits = (np.arange(lo, hi)[:, None] >> np.arange(n)) & 1
        else:
            bits = perm_rng.integers(0, 2, size=(hi - lo, n))
        null[lo:hi] = ((1 - 2 * bits) * v).mean(axis=1)
    return CliffsDeltaResult(
        delta=float(s.mean()), pvalue=_two_sided(null, observed, exact=exact),
        pvalue_statistic=pvalue_statistic, pvalue_method="exact" if exact else "monte carlo",
        n_permutations=total, mean_difference=float(d.mean()), paired=True, n_a=n, n_b=n,
        bootstrap_distribution=_readonly(boot), seed=seed,
    )


def _unpaired_delta(xa: FloatArray, xb: FloatArray, n_resamples: int, n_permutations: int,
                    seed: int, pvalue_statistic: str, boot_rng: np.random.Generator,
                    perm_rng: np.random.Generator) -> CliffsDeltaResult:
    m, n = xa.shape[0], xb.shape[0]
    pooled = np.concatenate([xa, xb])
    uniques, inverse = np.unique(pooled, return_inverse=True)
    codes = inverse.reshape(-1).astype(np.intp)
    k = uniques.shape[0]
    ca, cb = codes[:m], codes[m:]
    delta = float(_delta_from_codes(ca[None, :], cb[None, :], k)[0])
    boot = np.empty(n_resamples)
    for lo, hi in _row_blocks(n_resamples, m + n + k):
        rows = hi - lo
        boot[lo:hi] = _delta_from_codes(ca[boot_rng.integers(0, m, size=(rows, m))],
                                        cb[boot_rng.integers(0, n, size=(rows, n))], k)
    mean_difference = float(xa.mean() - xb.mean())
    observed = mean_difference if pvalue_statistic == "mean_difference" else delta
    n_splits = math.comb(m + n, m)
    # A lopsided split (m = 1, n = 60,000) has few splits but each is long: cap the work too.
    exact = n_splits <= EXACT_LIMIT and n_splits * (m + n) <= 1 << 26
    total = n_splits if exact else n_permutations
    null = np.empty(total)
    splits: Iterator[tuple[int, ...]] | None = (
        itertools.combinations(range(m + n), m) if exact else None)
    for lo, hi in _row_blocks(total, m + n + k):
        rows = hi - lo
        if splits is not None:
            take = np.fromiter(itertools.chain.from_iterable(itertools.islice(splits, rows)),
                               dtype=np.intp, count=rows * m).reshape(rows, m)
            in_a = np.zeros((rows, m + n), dtype=bool)
            np.put_along_axis(in_a, take, True, axis=1)
            order = np.argsort(~in_a, axis=1, kind="stable")  # a's positions first
        else:
            order = perm_rng.permuted(np.broadcast_to(np.arange(m + n), (rows, m + n)),
                                      axis=1)
        if pvalue_statistic == "mean_difference":
            pv = pooled[order]
            null[lo:hi] = pv[:, :m].mean(axis=1) - pv[:, m:].mean(axis=1)
        else:
            pc = codes[order]
            null[lo:hi] = _delta_from_codes(pc[:, :m], pc[:, m:], k)
    return CliffsDeltaResult(
        delta=delta, pvalue=_two_sided(null, observed, exact=exact),
        pvalue_statistic=pvalue_statistic, pvalue_method="exact" if exact else "monte carlo",
        n_permutations=total, mean_difference=mean_difference, paired=False, n_a=m, n_b=n,
        bootstrap_distribution=_readonly(boot), seed=seed,
    )

