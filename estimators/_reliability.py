"""Reliability beyond the mean ([DMC] §4.3–4.4).

Each run is one (level, seed) → terminal score. Per group of runs (a model, a model × task
cell, ...) with ascending scores ``x_(1) ≤ … ≤ x_(n)``:

* ``mean``; ``worst = x_(1)`` (the deployment floor over the tested seeds);
* ``cvar``: the lower-tail CVaR@α of Rockafellar and Uryasev ([DMC] §4.4, α = 0.2),

      CVaR_α(X) = max_c { c − E[(c − X)+] / α },

  which on the empirical distribution of n runs is the mean of the worst αn runs, with
  fractional weight on the boundary value: with ``k = ⌊αn⌋``,
  ``CVaR_α = (x_(1) + … + x_(k) + (αn − k)·x_(k+1)) / (αn)``. The maximising ``c`` is the
  lower α-quantile ``x_(⌈αn⌉)``; α = 1 gives the mean and α → 0 the worst case;
* ``reliability``: Reliability@τ, the fraction of runs with score ``≥ τ`` (τ = 0.9);
* a seeded bootstrap interval of the mean (2,000 draws, bit-reproducible): BCa by default,
  percentile ([DMC]'s) or basic by ``method=``; groups smaller than
  ``MIN_RUNS_FOR_COVERAGE`` warn, the size below which the seeded coverage study
  (README, "Interval coverage") found the 95 % interval covering under 92 %.

Across difficulty levels: the degradation curve (the statistics above per level, easiest to
hardest) and the reliability gap, "the static mean minus the hardest-level worst-case".
For paired A/B runs: the within-pair Cliff's δ ``[#(Δ_i > 0) − #(Δ_i < 0)] / n`` with the
sign-flip test it accompanies (§4.4). Also pass^k (τ-bench) and the ground-truth record F1
of §4.3, where duplicates and fabricated rows count in ``|S|`` but not in ``|U|``.

Resampling is vectorised: one draw matrix per group size, shared by every group of that
size and seeded by ``(seed, n)``, so a group's interval depends only on its own scores, its
size and the seed. Adding or removing other groups never changes it.

Example:
    >>> import warnings
    >>> from agentlog.estimators import reliability
    >>> with warnings.catch_warnings():  # 10 runs: the interval may under-cover, it warns
    ...     warnings.simplefilter("ignore")
    ...     r = reliability.summary([0, 0, 1, 0, 0, 0, 0, 1, 1, 1])   # [DMC] §5.1, GPT-4o T3
    >>> r.mean, r.worst, r.cvar, r.reliability
    (0.4, 0.0, 0.0, 0.4)
"""

from __future__ import annotations

import hashlib
import itertools
import math
import warnings
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, NamedTuple, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog._errors import DegenerateDataWarning

from ._bootstrap import IntervalMethod, bootstrap_interval, check_method

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
GroupLabels = ArrayLike | Sequence[Any] | tuple[ArrayLike, ...] | Mapping[str, ArrayLike]
PvalueStatistic = Literal["mean_difference", "delta"]
Baseline = Literal["easiest", "pooled"]

#: Reference sets (sign vectors, label splits) of at most this many members are enumerated;
#: larger ones are sampled. 2**16 sign vectors is n ≤ 16 pairs.
EXACT_LIMIT = 1 << 16
_CHUNK = 1 << 22  # elements per block of a resampling matrix: bounds memory, not results
_T = TypeVar("_T")
#: The interval ``summary`` gives by default (chosen by the coverage study in the README).
DEFAULT_METHOD: IntervalMethod = "BCa"
#: Per method, the smallest group at which the seeded coverage study found the 95 % interval
#: of the mean covering at least 92 % (tests/benchmarks/bench_coverage.py); smaller groups
#: warn.
MIN_RUNS_FOR_COVERAGE: dict[str, int] = {"BCa": 20, "percentile": 20, "basic": 50}


class ConfidenceInterval(NamedTuple, Generic[_T]):
    """``(low, high)`` of a percentile interval (floats, or arrays for grouped results)."""

    low: _T
    high: _T


# ----------------------------------------------------------------------------- validation


def _as_scores(name: str, x: ArrayLike) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be numbers; {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, one score per run; found shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` is empty; pass at least one run")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"`{name}` must be finite; found {arr[i]} at run {i} "
                         "(drop failed runs or score them, e.g. as 0, before summarising)")
    return arr


def _check_alpha(alpha: float) -> float:
    if not isinstance(alpha, int | float | np.floating) or isinstance(alpha, bool) \
            or not 0 < alpha <= 1:
        raise ValueError(f"`alpha` must be in (0, 1] (the tail fraction of CVaR@α); "
                         f"found {alpha!r}")
    return float(alpha)


def _check_tau(tau: float) -> float:
    if not isinstance(tau, int | float | np.floating) or isinstance(tau, bool) \
            or not math.isfinite(tau):
        raise ValueError(f"`tau` must be a finite number (the Reliability@τ threshold); "
                         f"found {tau!r}")
    return float(tau)


def _check_count(name: str, value: int, minimum: int) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}; found {value!r}")
    return int(value)


def _check_seed(seed: int) -> int:
    return _check_count("seed", seed, 0)


def _check_confidence_level(confidence_level: float) -> float:
    if not isinstance(confidence_level, int | float | np.floating) \
            or not 0 < confidence_level < 1:
        raise ValueError(f"`confidence_level` must be in (0, 1); found {confidence_level!r}")
    return float(confidence_level)


def _hash_sorted(values: FloatArray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


def _percentile_interval(samples: FloatArray, confidence_level: float) -> tuple[Any, Any]:
    tail = (1 - _check_confidence_level(confidence_level)) / 2
    low, high = np.quantile(samples, [tail, 1 - tail], axis=-1)
    return low, high


def _interval(samples: FloatArray, estimate: ArrayLike, confidence_level: float,
              method: IntervalMethod, acceleration: ArrayLike) -> tuple[Any, Any]:
    if method == "percentile":  # the historical path, bit for bit
        return _percentile_interval(samples, confidence_level)
    return bootstrap_interval(samples, estimate, method=method,
                              confidence_level=_check_confidence_level(confidence_level),
                              acceleration=acceleration)


def _mean_acceleration(c: _Cells) -> FloatArray:
    """BCa acceleration of each cell's mean, in closed form.

    The jackknife means are ``θ̂_(i) = x̄ − (x_i − x̄)/(n − 1)``, so ``U_i = x_i − x̄`` and
    ``â = Σ d³ / (6 (Σ d²)^{3/2})`` with ``d = x − x̄`` (0 for a constant cell).
    """
    counts = c.counts.astype(np.float64)
    cell_of = np.repeat(np.arange(c.counts.shape[0]), c.counts)
    mean = np.add.reduceat(c.values, c.starts) / counts
    d = c.values - mean[cell_of]
    m2 = np.add.reduceat(d * d, c.starts)
    m3 = np.add.reduceat(d * d * d, c.starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        a: FloatArray = np.where(m2 > 0, m3 / (6.0 * m2 ** 1.5), 0.0)
    return a


def _label_column(name: str, col: Any, n: int) -> tuple[list[Any], IntArray]:
    arr = np.asarray(col)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"`groups` must hold one label per score ({n} scores); "
                         f"{name} has shape {arr.shape}")
    if arr.dtype == object:
        arr = arr.astype(str)
    uniques, inverse = np.unique(arr, return_inverse=True)
    return uniques.tolist(), inverse.reshape(-1).astype(np.intp)


def _group_codes(groups: GroupLabels, n: int) -> tuple[tuple[str, ...], tuple[Any, ...],
                                                        IntArray]:
    """``(column names, group keys in sorted order, group code of each run)``."""
    if isinstance(groups, Mapping):
        names = tuple(str(k) for k in groups)
        columns: list[Any] = [groups[k] for k in groups]
    elif isinstance(groups, tuple) and groups and all(np.ndim(c) == 1 for c in groups):
        columns = list(groups)
        names = tuple(f"group_{i}" for i in range(len(columns)))
    else:
        columns, names = [groups], ("group",)
    if not columns:
        raise ValueError("`groups` holds no label columns; pass labels or leave it None")
    labelled = [_label_column(name, col, n) for name, col in zip(names, columns, strict=True)]
    if len(labelled) == 1:  # one column: keys are its labels, not 1-tuples
        uniques, code = labelled[0]
        return names, tuple(uniques), code
    stacked = np.stack([c for _, c in labelled], axis=1)
    rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys = tuple(tuple(labelled[j][0][r] for j, r in enumerate(row)) for row in rows.tolist())
    return names, keys, inverse.reshape(-1).astype(np.intp)


# ----------------------------------------------------------------------- vectorised core


@dataclass(frozen=True)
class _Cells:
    """Scores sorted by (cell, score): each cell's runs are contiguous and ascending."""

    values: FloatArray
    starts: IntArray
    counts: IntArray

    @classmethod
    def build(cls, scores: FloatArray, code: IntArray, n_cells: int) -> _Cells:
        order = np.lexsort((scores, code))
        counts = np.bincount(code, minlength=n_cells).astype(np.intp)
        starts = np.zeros(n_cells, dtype=np.intp)
        np.cumsum(counts[:-1], out=starts[1:])
        return cls(scores[order], starts, counts)

    def block(self, cell: int) -> FloatArray:
        s = int(self.starts[cell])
        return self.values[s:s + int(self.counts[cell])]


def _tail_statistics(c: _Cells, alpha: float, tau: float) -> tuple[FloatArray, FloatArray,
                                                                    FloatArray, FloatArray]:
    """``(mean, worst, cvar, reliability)`` of every cell, without a loop over cells."""
    counts = c.counts.astype(np.float64)
    cell_of = np.repeat(np.arange(c.counts.shape[0]), c.counts)
    rank = np.arange(c.values.shape[0]) - c.starts[cell_of]
    an = alpha * counts
    k = np.floor(an)
    # Weight 1 on the ⌊αn⌋ smallest runs and αn − ⌊αn⌋ on the next one (the boundary value).
    weight = np.where(rank < k[cell_of], 1.0,
                      np.where(rank == k[cell_of], (an - k)[cell_of], 0.0))
    mean = np.add.reduceat(c.values, c.starts) / counts
    cvar = np.add.reduceat(c.values * weight, c.starts) / an
    worst = c.values[c.starts]
    reliability = np.add.reduceat((c.values >= tau).astype(np.float64), c.starts) / counts
    return mean, worst, cvar, reliability


def _bootstrap_means(c: _Cells, n_resamples: int, seed: int) -> FloatArray:
    """Bootstrap means, shape ``(n_cells, n_resamples)``: one index matrix per cell size.

    The ``(n_resamples, n)`` matrix of draws comes from ``default_rng((seed, n))`` (in row
    blocks whose height depends only on ``n``) and is applied to every cell of size ``n``,
    so a cell's distribution does not depend on which other cells are present.
    """
    out = np.empty((c.counts.shape[0], n_resamples))
    for size in np.unique(c.counts).tolist():
        cells = np.flatnonzero(c.counts == size)
        rng = np.random.default_rng([seed, size])
        block = c.values[c.starts[cells][:, None] + np.arange(size)]
        rows = max(1, _CHUNK // size)
        for lo in range(0, n_resamples, rows):
            hi = min(n_resamples, lo + rows)
            idx = rng.integers(0, size, size=(hi - lo, size))
            # Every sum adds its draws left to right, whatever the array's shape (numpy's
            # sum picks an order by shape): a cell's means are bit-identical with or
            # without other cells beside it. Small cells add one draw column at a time
            # across all cells; large ones take a cumulative sum (the same additions).
            if size <= 128:
                acc = np.zeros((cells.shape[0], hi - lo))
                for j in range(size):
                    acc += block[:, idx[:, j]]
                out[cells, lo:hi] = acc / size
                continue
            step = max(1, _CHUNK // ((hi - lo) * size))
            for g in range(0, cells.shape[0], step):
                sums = np.cumsum(block[g:g + step][:, idx], axis=-1)[..., -1]
                out[cells[g:g + step], lo:hi] = sums / size
    return out


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a.setflags(write=False)
    return a


# ------------------------------------------------------------------------------- summary


@dataclass(frozen=True, eq=False)
class ReliabilitySummary:
    """Reliability of one group of runs ([DMC] §4.4).

    Attributes:
        mean: the mean score.
        worst: the minimum score.
        cvar: lower-tail CVaR@α (Rockafellar–Uryasev; fractional weight on the boundary).
        reliability: Reliability@τ, the fraction of runs scoring ``≥ tau``.
        n: the number of runs.
        alpha, tau: the CVaR tail fraction and the reliability threshold.
        bootstrap_distribution: the ``n_resamples`` bootstrap means.
        seed: the seed of the bootstrap draws.
        inputs_hash: SHA-256 of the sorted scores (the result depends only on the multiset).
        method: the interval ``confidence_interval`` gives: ``"BCa"``, ``"percentile"`` or
            ``"basic"`` (scipy.stats.bootstrap's names).
        acceleration: the BCa acceleration ``â`` of the mean, from its jackknife.
    """

    mean: float
    worst: float
    cvar: float
    reliability: float
    n: int
    alpha: float
    tau: float
    bootstrap_distribution: FloatArray = field(repr=False)
    seed: int
    inputs_hash: str = field(repr=False)
    method: IntervalMethod = DEFAULT_METHOD
    acceleration: float = 0.0

    @property
    def n_resamples(self) -> int:
        return int(self.bootstrap_distribution.shape[0])

    @property
    def standard_error(self) -> float:
        """Bootstrap standard error of the mean."""
        return float(self.bootstrap_distribution.std(ddof=1))

    def confidence_interval(self, confidence_level: float = 0.95, *,
                            method: IntervalMethod | None = None) -> ConfidenceInterval[float]:
        """Seeded bootstrap interval for the mean, by ``method`` (default: the summary's).

        ``"percentile"``: the ``(1 − confidence_level)/2`` and ``(1 + confidence_level)/2``
        quantiles of the bootstrap means (numpy's default linear interpolation); ``"basic"``
        reflects them about the mean; ``"BCa"`` moves the two quantile levels by the bias
        correction and the acceleration. Bit-reproducible: the same scores and seed give the
        same interval.
        """
        how = self.method if method is None else check_method(method)
        low, high = _interval(self.bootstrap_distribution, self.mean, confidence_level, how,
                              self.acceleration)
        return ConfidenceInterval(float(low), float(high))

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        """JSON-able statistics, interval included."""
        low, high = self.confidence_interval(confidence_level)
        return {"n": self.n, "mean": self.mean, "worst": self.worst, "cvar": self.cvar,
                "reliability": self.reliability, "alpha": self.alpha, "tau": self.tau,
                "confidence_level": confidence_level, "ci_low": low, "ci_high": high,
                "ci_method": self.method, "n_resamples": self.n_resamples, "seed": self.seed}


@dataclass(frozen=True, eq=False)
class GroupedReliability(Mapping[Any, ReliabilitySummary]):
    """Reliability per group of a long table; a read-only mapping ``key → ReliabilitySummary``.

    Keys are labels when one label column is given (``groups=labels``) and tuples of labels
    otherwise (``groups=(model, task)`` or ``groups={"model": ..., "task": ...}``), in
    sorted order. The array attributes are aligned with ``groups``.

    Attributes:
        groups: the group keys, in sorted order.
        names: the label column names (``("group",)``, ``("group_0", "group_1")`` or the
            mapping's keys).
        mean, worst, cvar, reliability: shape ``(n_groups,)``.
        n: runs per group.
        bootstrap_distribution: shape ``(n_groups, n_resamples)``.
    """

    groups: tuple[Any, ...]
    names: tuple[str, ...]
    mean: FloatArray
    worst: FloatArray
    cvar: FloatArray
    reliability: FloatArray
    n: NDArray[np.intp]
    alpha: float
    tau: float
    bootstrap_distribution: FloatArray = field(repr=False)
    seed: int
    _cells: _Cells = field(repr=False)
    _index: dict[Any, int] = field(repr=False)
    method: IntervalMethod = DEFAULT_METHOD
    acceleration: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)

    def __getitem__(self, key: Any) -> ReliabilitySummary:
        try:
            i = self._index[key]
        except (KeyError, TypeError):
            example = self.groups[0]
            raise KeyError(f"no group {key!r}; keys look like {example!r}") from None
        return ReliabilitySummary(
            mean=float(self.mean[i]), worst=float(self.worst[i]), cvar=float(self.cvar[i]),
            reliability=float(self.reliability[i]), n=int(self.n[i]), alpha=self.alpha,
            tau=self.tau, bootstrap_distribution=self.bootstrap_distribution[i],
            seed=self.seed, inputs_hash=_hash_sorted(self._cells.block(i)),
            method=self.method, acceleration=float(self.acceleration[i]),
        )

    def __iter__(self) -> Iterator[Any]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def confidence_interval(
        self, confidence_level: float = 0.95, *, method: IntervalMethod | None = None
    ) -> ConfidenceInterval[FloatArray]:
        """Bootstrap intervals of every group's mean, arrays of shape (n_groups,), by
        ``method`` (default: the summary's)."""
        how = self.method if method is None else check_method(method)
        low, high = _interval(self.bootstrap_distribution, self.mean, confidence_level, how,
                              self.acceleration)
        return ConfidenceInterval(low, high)

    def table(self, confidence_level: float = 0.95) -> list[dict[str, Any]]:
        """One row per group: its labels, ``n``, the statistics and the interval."""
        low, high = self.confidence_interval(confidence_level)
        rows = []
        for i, key in enumerate(self.groups):
            labels = key if isinstance(key, tuple) else (key,)
            row: dict[str, Any] = dict(zip(self.names, labels, strict=True))
            row.update(n=int(self.n[i]), mean=float(self.mean[i]),
                       worst=float(self.worst[i]), cvar=float(self.cvar[i]),
                       reliability=float(self.reliability[i]), ci_low=float(low[i]),
                       ci_high=float(high[i]))
            rows.append(row)
        return rows


def _summary_iv(scores: ArrayLike, alpha: float, tau: float, n_resamples: int,
                seed: int) -> tuple[FloatArray, float, float, int, int]:
    return (_as_scores("scores", scores), _check_alpha(alpha), _check_tau(tau),
            _check_count("n_resamples", n_resamples, 2), _check_seed(seed))


def _warn_small_groups(counts: IntArray, keys: Sequence[Any] | None, method: str) -> None:
    """Warn below the group size where the coverage study found under-coverage."""
    limit = MIN_RUNS_FOR_COVERAGE[method]
    small = np.flatnonzero((counts > 1) & (counts < limit))
    if small.size:
        where = "" if keys is None else (
            f" in {small.size} group(s), e.g. {keys[int(small[0])]!r} with "
            f"{int(counts[small[0]])} runs")
        warnings.warn(
            f"fewer than {limit} runs{where}: the 95% {method} bootstrap interval of the mean "
            f"covered less than 92% below {limit} runs in the seeded coverage study (README, "
            "'Interval coverage'); read it as optimistic, or run more seeds",
            DegenerateDataWarning, stacklevel=3,
        )


def _warn_single_runs(counts: IntArray, keys: Sequence[Any] | None) -> None:
    single = np.flatnonzero(counts == 1)
    if single.size:
        where = "" if keys is None else (
            f" in {single.size} group(s), e.g. {keys[int(single[0])]!r}")
        warnings.warn(
            f"a single run{where}: worst, CVaR and mean coincide and the bootstrap interval "
            "is a point; run more seeds to measure reliability",
            DegenerateDataWarning, stacklevel=3,
        )


@overload
def summary(scores: ArrayLike, *, groups: None = None, alpha: float = 0.2, tau: float = 0.9,
            n_resamples: int = 2000, seed: int = 0,
            method: IntervalMethod = DEFAULT_METHOD) -> ReliabilitySummary: ...


@overload
def summary(scores: ArrayLike, *, groups: GroupLabels, alpha: float = 0.2, tau: float = 0.9,
            n_resamples: int = 2000, seed: int = 0,
            method: IntervalMethod = DEFAULT_METHOD) -> GroupedReliability: ...


def summary(
    scores: ArrayLike,
    *,
    groups: GroupLabels | None = None,
    alpha: float = 0.2,
    tau: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_METHOD,
) -> ReliabilitySummary | GroupedReliability:
    """Mean, worst case, CVaR@α, Reliability@τ and a bootstrap CI ([DMC] §4.4).

    Args:
        scores: one terminal score per run, finite.
        groups: ``None`` for one group; else one label per run, a tuple of label arrays
            (e.g. ``(model, task)`` columns of a long table) or a mapping ``name → labels``.
        alpha: CVaR tail fraction in ``(0, 1]``; ``CVaR_α = max_c {c − E[(c − X)+]/α}``, the
            mean of the worst ``αn`` runs with fractional weight on the boundary value.
        tau: Reliability@τ threshold; a run counts when its score is ``≥ tau``.
        n_resamples: bootstrap draws of the mean ([DMC] uses 2,000).
        seed: seeds the draws, ``numpy.random.default_rng((seed, n))`` per group size ``n``;
            the same scores and seed give bit-identical intervals.
        method: the interval of the mean, scipy.stats.bootstrap's names: ``"BCa"`` (the
            default: it covers best in the seeded coverage study of the README), or
            ``"percentile"`` ([DMC]'s) or ``"basic"``.

    Returns:
        A ``ReliabilitySummary``, or with ``groups`` a ``GroupedReliability`` mapping each
        group key to its ``ReliabilitySummary`` (``r["gpt-4o", "T3"]``, ``r.table()``).

    Warns:
        DegenerateDataWarning: a group has a single run, or fewer runs than
            ``MIN_RUNS_FOR_COVERAGE`` (where the coverage study found the 95 % interval
            covering less than 92 %).
    """
    x, alpha, tau, n_resamples, seed = _summary_iv(scores, alpha, tau, n_resamples, seed)
    method = check_method(method)
    if groups is None:
        cells = _Cells.build(x, np.zeros(x.shape[0], dtype=np.intp), 1)
        _warn_single_runs(cells.counts, None)
        _warn_small_groups(cells.counts, None, method)
        mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
        boot = _readonly(_bootstrap_means(cells, n_resamples, seed)[0])
        return ReliabilitySummary(
            mean=float(mean[0]), worst=float(worst[0]), cvar=float(cvar[0]),
            reliability=float(rel[0]), n=int(x.shape[0]), alpha=alpha, tau=tau,
            bootstrap_distribution=boot, seed=seed, inputs_hash=_hash_sorted(cells.values),
            method=method, acceleration=float(_mean_acceleration(cells)[0]),
        )
    names, keys, code = _group_codes(groups, x.shape[0])
    cells = _Cells.build(x, code, len(keys))
    _warn_single_runs(cells.counts, keys)
    _warn_small_groups(cells.counts, keys, method)
    mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
    boot = _bootstrap_means(cells, n_resamples, seed)
    return GroupedReliability(
        groups=keys, names=names, mean=_readonly(mean), worst=_readonly(worst),
        cvar=_readonly(cvar), reliability=_readonly(rel), n=_readonly(cells.counts.copy()),
        alpha=alpha, tau=tau, bootstrap_distribution=_readonly(boot), seed=seed,
        _cells=cells, _index={k: i for i, k in enumerate(keys)}, method=method,
        acceleration=_readonly(_mean_acceleration(cells)),
    )


# --------------------------------------------------------------------------- Cliff's delta


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


# ----------------------------------------------------------------------------------- pass^k


@dataclass(frozen=True, eq=False)
class PassHatK:
    """The unbiased pass^k of τ-bench: ``mean_t C(c_t, k) / C(n_t, k)``.

    ``C(c, k)/C(n, k)`` is the probability that ``k`` of task t's ``n_t`` recorded trials,
    drawn without replacement, all succeed: the unbiased estimate of "k i.i.d. trials all
    succeed" from ``c_t`` successes.

    Attributes:
        estimate: the mean over tasks.
        per_task: ``C(c_t, k)/C(n_t, k)`` per task.
        k: the number of trials that must all succeed.
    """

    estimate: float
    per_task: FloatArray = field(repr=False)
    k: int

    @property
    def n_tasks(self) -> int:
        return int(self.per_task.shape[0])

    @property
    def standard_error(self) -> float:
        """Standard error over tasks (``std(ddof=1)/√T``; NaN with one task)."""
        if self.n_tasks < 2:
            return math.nan
        return float(self.per_task.std(ddof=1) / math.sqrt(self.n_tasks))


def _as_counts(name: str, x: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"`{name}` must be integer counts; found dtype {arr.dtype}")
    f = arr.astype(np.float64)
    if not np.isfinite(f).all() or (f != np.round(f)).any() or (f < 0).any():
        raise ValueError(f"`{name}` must be non-negative integer counts; found "
                         f"{f[~(np.isfinite(f) & (f == np.round(f)) & (f >= 0))][0]}")
    return f.astype(np.int64)


def _pass_hat_k_iv(successes: ArrayLike, trials: ArrayLike, k: int
                   ) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    c = _as_counts("successes", successes)
    if c.ndim != 1 or c.shape[0] == 0:
        raise ValueError(f"`successes` must be a non-empty 1-D array, one count per task; "
                         f"found shape {c.shape}")
    n = _as_counts("trials", trials)
    if n.ndim == 0:
        n = np.full(c.shape, int(n))
    if n.shape != c.shape:
        raise ValueError(f"`trials` must be a scalar or one count per task ({c.shape[0]}); "
                         f"found shape {n.shape}")
    if (c > n).any():
        t = int(np.flatnonzero(c > n)[0])
        raise ValueError(f"`successes` exceeds `trials` at task {t}: {c[t]} > {n[t]}")
    k = _check_count("k", k, 1)
    if (n < k).any():
        t = int(np.flatnonzero(n < k)[0])
        raise ValueError(f"`k` = {k} exceeds the {n[t]} trials of task {t}; pass^k needs at "
                         "least k trials per task")
    return c, n, k


def pass_hat_k(successes: ArrayLike, trials: ArrayLike, k: int) -> PassHatK:
    """pass^k (τ-bench, Yao et al. 2025): the chance that ``k`` trials of a task all succeed.

    Args:
        successes: successful trials per task ``c_t``.
        trials: trials per task ``n_t`` (scalar or per task), each ``≥ k``.
        k: the number of trials that must all succeed.

    Returns:
        A ``PassHatK`` whose ``estimate`` is ``mean_t C(c_t, k) / C(n_t, k)``.
    """
    c, n, k = _pass_hat_k_iv(successes, trials, k)
    j = np.arange(k)
    # C(c, k)/C(n, k) = Π_{j<k} (c − j)/(n − j); a factor is 0 once j reaches c.
    per_task = np.prod(np.maximum(c[:, None] - j, 0) / (n[:, None] - j), axis=1)
    return PassHatK(estimate=float(per_task.mean()), per_task=_readonly(per_task), k=k)


# ---------------------------------------------------------------------------- record F1


@dataclass(frozen=True)
class RecordF1:
    """Ground-truth F1 of a submitted record set ([DMC] §4.3).

    With S the submitted rows, G the true record set and U the distinct true records in S:
    ``recall = |U|/|G|``, ``precision = |U|/|S|``, ``f1 = 2PR/(P + R)`` (0 when P + R = 0;
    precision is 0 for an empty submission). ``|S| = |U| + n_duplicates + n_fabricated``.

    Attributes:
        n_submitted: ``|S|``, every submitted row.
        n_truth: ``|G|``.
        n_correct: ``|U|``.
        n_duplicates: rows repeating a true record already submitted.
        n_fabricated: rows whose id is not in the truth (invented, totals or summary rows),
            repeats included.
    """

    precision: float
    recall: float
    f1: float
    n_submitted: int
    n_truth: int
    n_correct: int
    n_duplicates: int
    n_fabricated: int


def _record_ids(name: str, records: Iterable[Any]) -> list[Hashable]:
    if isinstance(records, str | bytes | Mapping):
        raise ValueError(f"`{name}` must be a sequence of record ids or of records with an "
                         f"'id'; found a {type(records).__name__}")
    ids: list[Hashable] = []
    for i, rec in enumerate(records):
        if isinstance(rec, Mapping):
            if "id" not in rec:
                raise ValueError(f"`{name}` record {i} has no 'id' field; found keys "
                                 f"{sorted(map(str, rec))[:5]}")
            rec = rec["id"]
        try:
            hash(rec)
        except TypeError:
            raise ValueError(f"`{name}` record {i}: the id must be hashable; found "
                             f"{type(rec).__name__}") from None
        ids.append(rec)
    return ids


def _record_f1_iv(submitted: Iterable[Any], truth: Iterable[Any]
                  ) -> tuple[list[Hashable], set[Hashable]]:
    sub = _record_ids("submitted", submitted)
    true_ids = _record_ids("truth", truth)
    if not true_ids:
        raise ValueError("`truth` is empty: recall is undefined without a ground-truth record")
    truth_set = set(true_ids)
    if len(truth_set) != len(true_ids):
        raise ValueError(f"`truth` repeats {len(true_ids) - len(truth_set)} id(s); the ground "
                         "truth is a set of distinct records")
    return sub, truth_set


def record_f1(submitted: Iterable[Any], truth: Iterable[Any]) -> RecordF1:
    """Precision, recall and F1 of submitted records against the ground truth ([DMC] §4.3).

    Args:
        submitted: the submitted rows, as ids or records with an ``"id"`` field, in order
            and with repeats.
        truth: the ground-truth record ids (or records), distinct.

    Returns:
        A ``RecordF1``. Omitted true rows cut recall; duplicates, totals rows and
        fabricated rows inflate ``|S|`` but not ``|U|``, cutting precision only.
    """
    sub, truth_set = _record_f1_iv(submitted, truth)
    seen: set[Hashable] = set()
    n_dup = n_fab = 0
    for rid in sub:
        if rid not in truth_set:
            n_fab += 1
        elif rid in seen:
            n_dup += 1
        else:
            seen.add(rid)
    u = len(seen)
    precision = u / len(sub) if sub else 0.0
    recall = u / len(truth_set)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return RecordF1(precision=precision, recall=recall, f1=f1, n_submitted=len(sub),
                    n_truth=len(truth_set), n_correct=u, n_duplicates=n_dup,
                    n_fabricated=n_fab)


# ------------------------------------------------------ degradation curve and reliability gap


def _level_codes(difficulty: ArrayLike | Sequence[Any], levels: Sequence[Any] | None,
                 n: int) -> tuple[tuple[Any, ...], IntArray]:
    arr = np.asarray(difficulty)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"`difficulty` must hold one level per score ({n} scores); found "
                         f"shape {arr.shape}")
    if arr.dtype == object:
        arr = arr.astype(str)
    uniques, inverse = np.unique(arr, return_inverse=True)
    seen = uniques.tolist()
    if levels is None:
        return tuple(seen), inverse.reshape(-1).astype(np.intp)
    order = list(levels)
    if not order:
        raise ValueError("`levels` is empty; list the difficulty levels, easiest first")
    if len(set(order)) != len(order):
        raise ValueError(f"`levels` repeats a level: {order!r}")
    position = {lvl: i for i, lvl in enumerate(order)}
    unknown = [v for v in seen if v not in position]
    if unknown:
        raise ValueError(f"`difficulty` has level(s) {unknown[:3]!r} that are not in "
                         f"`levels` {order!r}")
    mapping = np.array([position[v] for v in seen], dtype=np.intp)
    return tuple(order), mapping[inverse.reshape(-1)]


def _check_baseline(baseline: str) -> None:
    if baseline not in ("easiest", "pooled"):
        raise ValueError(f"`baseline` must be 'easiest' (mean at the easiest level) or "
                         f"'pooled' (mean over every level); found {baseline!r}")


@dataclass(frozen=True)
class ReliabilityGap:
    """The reliability gap: "the static mean minus the hardest-level worst-case" (§4.4).

    Attributes:
        gap: ``static_mean − hardest_worst``.
        static_mean: the mean at the easiest level (``baseline="easiest"``) or over every
            run (``baseline="pooled"``).
        hardest_worst: the minimum score at the hardest level.
        static_level, hardest_level: the levels used (None without ``difficulty``).
    """

    gap: float
    static_mean: float
    hardest_worst: float
    static_level: Any
    hardest_level: Any


def reliability_gap(
    scores: ArrayLike,
    difficulty: ArrayLike | Sequence[Any] | None = None,
    *,
    levels: Sequence[Any] | None = None,
    baseline: Baseline = "easiest",
) -> ReliabilityGap:
    """Reliability gap of one system across difficulty levels ([DMC] §4.4).

    Args:
        scores: one score per run.
        difficulty: the difficulty level of each run; ``None`` treats every run as one
            level, so the gap is ``mean − worst`` (GPT-5's 0.930 in §5.1).
        levels: the levels easiest first; default: the sorted distinct ``difficulty``
            values (pass ``levels`` when the labels do not sort by difficulty).
        baseline: ``"easiest"`` (the static mean is the mean at the easiest level) or
            ``"pooled"`` (the mean over every run, what a static leaderboard reports).

    Returns:
        A ``ReliabilityGap``. For many groups use ``degradation_curve(...).gap``.
    """
    x = _as_scores("scores", scores)
    _check_baseline(baseline)
    if difficulty is None:
        if levels is not None:
            raise ValueError("`levels` needs `difficulty`, the level of each run")
        return ReliabilityGap(gap=float(x.mean() - x.min()), static_mean=float(x.mean()),
                              hardest_worst=float(x.min()), static_level=None,
                              hardest_level=None)
    order, code = _level_codes(difficulty, levels, x.shape[0])
    counts = np.bincount(code, minlength=len(order))
    for i in (0, len(order) - 1):
        if counts[i] == 0:
            raise ValueError(f"`levels` lists {order[i]!r} but no run has that `difficulty`")
    easiest = x[code == 0]
    hardest = x[code == len(order) - 1]
    static = float(easiest.mean() if baseline == "easiest" else x.mean())
    return ReliabilityGap(gap=static - float(hardest.min()), static_mean=static,
                          hardest_worst=float(hardest.min()), static_level=order[0],
                          hardest_level=order[-1])


@dataclass(frozen=True, eq=False)
class DegradationCurve:
    """Reliability statistics per difficulty level (easiest first), per group.

    Arrays have shape ``(n_groups, n_levels)``; without ``groups`` there is one group,
    keyed ``()``.

    Attributes:
        levels: the difficulty levels, easiest first.
        groups: the group keys (as in ``GroupedReliability``).
        names: the group label column names.
        mean, worst, cvar, reliability: the statistics per (group, level).
        n: runs per (group, level).
        bootstrap_distribution: shape ``(n_groups, n_levels, n_resamples)``.
        baseline: how ``gap`` takes the static mean (``"easiest"`` or ``"pooled"``).
        static_mean: the easiest-level mean, or the pooled mean over levels, per group.
        gap: the reliability gap per group: ``static_mean − worst[:, -1]``.
    """

    levels: tuple[Any, ...]
    groups: tuple[Any, ...]
    names: tuple[str, ...]
    mean: FloatArray
    worst: FloatArray
    cvar: FloatArray
    reliability: FloatArray
    n: NDArray[np.intp]
    alpha: float
    tau: float
    bootstrap_distribution: FloatArray = field(repr=False)
    seed: int
    baseline: str
    static_mean: FloatArray
    gap: FloatArray

    def confidence_interval(
        self, confidence_level: float = 0.95
    ) -> ConfidenceInterval[FloatArray]:
        """Percentile bootstrap intervals of each (group, level) mean."""
        low, high = _percentile_interval(self.bootstrap_distribution, confidence_level)
        return ConfidenceInterval(low, high)

    def _labels(self, key: Any) -> dict[str, Any]:
        labels = key if isinstance(key, tuple) else (key,)
        return dict(zip(self.names, labels, strict=True))

    def table(self, confidence_level: float = 0.95) -> list[dict[str, Any]]:
        """One row per (group, level): labels, level, ``n``, statistics and interval."""
        low, high = self.confidence_interval(confidence_level)
        rows = []
        for g, key in enumerate(self.groups):
            for j, level in enumerate(self.levels):
                row = self._labels(key)
                row.update(level=level, n=int(self.n[g, j]), mean=float(self.mean[g, j]),
                           worst=float(self.worst[g, j]), cvar=float(self.cvar[g, j]),
                           reliability=float(self.reliability[g, j]),
                           ci_low=float(low[g, j]), ci_high=float(high[g, j]))
                rows.append(row)
        return rows

    def gap_table(self) -> list[dict[str, Any]]:
        """One row per group: the static mean, the hardest-level worst case and the gap."""
        rows = []
        for g, key in enumerate(self.groups):
            row = self._labels(key)
            row.update(static_mean=float(self.static_mean[g]),
                       hardest_worst=float(self.worst[g, -1]), gap=float(self.gap[g]))
            rows.append(row)
        return rows


def degradation_curve(
    scores: ArrayLike,
    difficulty: ArrayLike | Sequence[Any],
    *,
    groups: GroupLabels | None = None,
    levels: Sequence[Any] | None = None,
    alpha: float = 0.2,
    tau: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
    baseline: Baseline = "easiest",
) -> DegradationCurve:
    """Degradation curve and reliability gap across difficulty levels ([DMC] §4.4).

    Every (group, level) cell gets the statistics of ``summary`` (mean, worst, CVaR@α,
    Reliability@τ, bootstrap CI); the gap per group is the static mean minus the worst case
    at the hardest level.

    Args:
        scores: one score per run.
        difficulty: the difficulty level of each run.
        groups: as in ``summary`` (e.g. ``(model, task)``); ``None`` for one group.
        levels: the levels easiest first; default the sorted distinct ``difficulty``.
        alpha, tau, n_resamples, seed: as in ``summary``.
        baseline: ``"easiest"`` or ``"pooled"``, see ``reliability_gap``.

    Returns:
        A ``DegradationCurve``.

    Raises:
        ValueError: a group has no run at some level (every cell of the curve needs runs).
    """
    x, alpha, tau, n_resamples, seed = _summary_iv(scores, alpha, tau, n_resamples, seed)
    _check_baseline(baseline)
    order, lcode = _level_codes(difficulty, levels, x.shape[0])
    if groups is None:
        names: tuple[str, ...] = ()
        keys: tuple[Any, ...] = ((),)
        gcode = np.zeros(x.shape[0], dtype=np.intp)
    else:
        names, keys, gcode = _group_codes(groups, x.shape[0])
    n_levels = len(order)
    cell = gcode * n_levels + lcode
    counts = np.bincount(cell, minlength=len(keys) * n_levels)
    if (counts == 0).any():
        g, j = divmod(int(np.flatnonzero(counts == 0)[0]), n_levels)
        who = "" if groups is None else f"group {keys[g]!r} "
        raise ValueError(f"`difficulty`: {who}has no run at level {order[j]!r}; every level "
                         "of the curve needs runs (drop the level via `levels` or add runs)")
    cells = _Cells.build(x, cell, len(keys) * n_levels)
    _warn_single_runs(cells.counts, None)
    mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
    boot = _bootstrap_means(cells, n_resamples, seed)
    shape = (len(keys), n_levels)
    mean2 = mean.reshape(shape)
    n2 = cells.counts.reshape(shape)
    if baseline == "easiest":
        static = mean2[:, 0].copy()
    else:
        static = (mean2 * n2).sum(axis=1) / n2.sum(axis=1)
    return DegradationCurve(
        levels=order, groups=keys, names=names, mean=_readonly(mean2),
        worst=_readonly(worst.reshape(shape)), cvar=_readonly(cvar.reshape(shape)),
        reliability=_readonly(rel.reshape(shape)), n=_readonly(n2.copy()), alpha=alpha,
        tau=tau, bootstrap_distribution=_readonly(boot.reshape(*shape, n_resamples)),
        seed=seed, baseline=baseline, static_mean=_readonly(static),
        gap=_readonly(static - worst.reshape(shape)[:, -1]),
    )
