"""Reliability beyond the mean: the summary of each group of runs ([DMC] §4.4).

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
  percentile ([DMC]'s) or basic by ``method=``.

When the interval is doubtful, a ``DegenerateDataWarning`` says why, from the data: a group
whose runs all scored the same (the interval is a point, e.g. 20 runs of a task that
never succeeds); a group smaller than ``MIN_RUNS_FOR_COVERAGE`` (where even normal scores
covered under 0.92); and a group whose scores are so skewed that its size is below
``RUNS_SKEWNESS_RULE · g₁²`` (Cochran's rule for the normal approximation of a mean, g₁
the sample skewness). Mass at a bound of a bounded score (rare successes, a ceiling of
F1 = 1) shows as skewness. What was measured (tests/benchmarks/bench_coverage.py, 600
seeded trials per cell, BCa): at n = 20 Bernoulli(0.1) covered 0.880 and the rule flagged
99 % of its samples; Pareto(3) covered 0.855 to 0.918 up to n = 100 with 88–92 % of the
samples flagged; lognormal(0, 1) 0.890–0.903 up to n = 50 with 88–91 % flagged; the
exponential 0.91 at n = 20–30 with 70 % flagged; normal, uniform and Bernoulli(0.3)
samples of n ≥ 20, which covered 0.93–0.98, were flagged in at most 4 %, 1 % and 42 %
(Bernoulli(0.3) at n = 20, covering 0.978: a conservative alarm). A tail the sample did
not reach cannot be seen: heavy-tailed samples that were not flagged covered less than
those that were.

Resampling is vectorised: one draw matrix per group size, shared by every group of that
size and seeded by ``(seed, n)`` (block by block, so that Ray tasks can draw the blocks),
so a group's interval depends only on its own scores, its size and the seed. Adding or
removing other groups never changes it.

The other statistics of [DMC] sit beside this module, one concern each: the degradation
curve and reliability gap (``_degradation``), Cliff's δ (``_cliffs_delta``), pass^k
(``_pass_hat_k``) and the record F1 (``_record_f1``); ``reliability`` re-exports them.

Examples:
    >>> import warnings
    >>> from agentlog.estimators import reliability
    >>> with warnings.catch_warnings():  # 10 runs: the interval may under-cover, it warns
    ...     warnings.simplefilter("ignore")
    ...     r = reliability.summary([0, 0, 1, 0, 0, 0, 0, 1, 1, 1])   # [DMC] §5.1, GPT-4o T3
    >>> r.mean, r.worst, r.cvar, r.reliability
    (0.4, 0.0, 0.0, 0.4)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning
from agentlog.display import (
    format_interval,
    format_number,
    html_repr,
    render_fields,
    render_table,
)

from ._bootstrap import IntervalMethod, check_method
from ._cell_bootstrap import _bootstrap_means, _interval, _mean_acceleration
from ._executor import Executor, check_executor, executing
from ._interval import ConfidenceInterval
from ._scores import (
    FloatArray,
    GroupLabels,
    IntArray,
    _as_scores,
    _Cells,
    _check_alpha,
    _check_count,
    _check_seed,
    _check_tau,
    _group_codes,
    _hash_sorted,
    _readonly,
)

#: The interval ``summary`` gives by default (chosen by the coverage study of
#: docs/how-to/estimators.md).
DEFAULT_METHOD: IntervalMethod = "BCa"
#: Per method, the smallest group at which the seeded coverage study found the 95 % interval
#: of the mean of normal (and other symmetric, bounded) scores covering at least 92 %
#: (tests/benchmarks/bench_coverage.py); smaller groups warn, whatever their shape.
MIN_RUNS_FOR_COVERAGE: dict[str, int] = {"BCa": 20, "percentile": 20, "basic": 50}
#: Cochran's rule: a group of n runs whose scores have sample skewness g₁ warns while
#: ``n < RUNS_SKEWNESS_RULE · g₁²`` (see the module docs for what it flagged).
RUNS_SKEWNESS_RULE = 25.0


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


# ------------------------------------------------------------------------------- summary


@dataclass(frozen=True, eq=False)
class ReliabilitySummaryResult:
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

    @html_repr
    def _repr_html_(self) -> str:
        low, high = self.confidence_interval()
        return render_fields([
            ("runs", self.n), ("mean", self.mean), ("standard error", self.standard_error),
            (f"95% CI ({self.method})", format_interval(low, high)), ("worst", self.worst),
            (f"CVaR@{self.alpha:g}", self.cvar),
            (f"Reliability@{self.tau:g}", format_number(self.reliability, ".1%")),
            ("bootstrap", f"{self.n_resamples:,} draws, seed {self.seed}"),
        ], caption="Reliability summary ([DMC] §4.4)")


@dataclass(frozen=True, eq=False)
class GroupedReliabilityResult(Mapping[Any, ReliabilitySummaryResult]):
    """Reliability per group of a long table; a read-only mapping
    ``key → ReliabilitySummaryResult``.

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

    def __getitem__(self, key: Any) -> ReliabilitySummaryResult:
        try:
            i = self._index[key]
        except (KeyError, TypeError):
            example = self.groups[0]
            raise KeyError(f"no group {key!r}; keys look like {example!r}") from None
        return ReliabilitySummaryResult(
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

    @html_repr
    def _repr_html_(self) -> str:
        rows = self.table()
        return render_table(
            [*self.names, "runs", "mean", f"95% CI ({self.method})", "worst",
             f"CVaR@{self.alpha:g}", f"Reliability@{self.tau:g}"],
            ([*(r[k] for k in self.names), r["n"], r["mean"],
              format_interval(r["ci_low"], r["ci_high"]), r["worst"], r["cvar"],
              format_number(r["reliability"], ".1%")] for r in rows),
            caption=f"Reliability by {', '.join(self.names)} ([DMC] §4.4; bootstrap seed "
                    f"{self.seed})", total=len(rows))


def _summary_iv(scores: ArrayLike, alpha: float, tau: float, n_resamples: int,
                seed: int) -> tuple[FloatArray, float, float, int, int]:
    return (_as_scores("scores", scores), _check_alpha(alpha), _check_tau(tau),
            _check_count("n_resamples", n_resamples, 2), _check_seed(seed))


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


def _skewness(c: _Cells) -> FloatArray:
    """The moment skewness g₁ = m₃ / m₂^{3/2} of every cell (0 where m₂ = 0)."""
    counts = c.counts.astype(np.float64)
    cell_of = np.repeat(np.arange(c.counts.shape[0]), c.counts)
    d = c.values - (np.add.reduceat(c.values, c.starts) / counts)[cell_of]
    m2 = np.add.reduceat(d * d, c.starts) / counts
    m3 = np.add.reduceat(d * d * d, c.starts) / counts
    with np.errstate(invalid="ignore", divide="ignore"):
        g1: FloatArray = np.where(m2 > 0, m3 / np.where(m2 > 0, m2, 1.0) ** 1.5, 0.0)
    return g1


def _warn_doubtful_intervals(c: _Cells, keys: Sequence[Any] | None, method: str) -> None:
    """Warn where the bootstrap interval of a group's mean is doubtful, from its data."""
    counts = c.counts
    worst, first = c.values[c.starts], c.values[c.starts + counts - 1]  # sorted in cells
    equal = np.flatnonzero((counts > 1) & (worst == first))
    if equal.size:
        i = int(equal[0])
        where = "" if keys is None else f" in {equal.size} group(s), e.g. {keys[i]!r}"
        warnings.warn(
            f"all {int(counts[i])} runs scored {float(worst[i])!r}{where}: the bootstrap "
            "interval of the mean is that point and says nothing about how often another "
            "value occurs (a task never or always solved); run more seeds, or report the "
            "count of successes with an exact binomial interval",
            DegenerateDataWarning, stacklevel=3,
        )
    limit = MIN_RUNS_FOR_COVERAGE[method]
    small = np.flatnonzero((counts > 1) & (counts < limit))
    if small.size:
        where = "" if keys is None else (
            f" in {small.size} group(s), e.g. {keys[int(small[0])]!r} with "
            f"{int(counts[small[0]])} runs")
        warnings.warn(
            f"fewer than {limit} runs{where}: the 95% {method} bootstrap interval of the mean "
            f"covered less than 92% below {limit} runs in the seeded coverage study (docs: how-to/"
            "estimators.md, 'Interval coverage'); read it as optimistic, or run more seeds",
            DegenerateDataWarning, stacklevel=3,
        )
    g1 = _skewness(c)
    needed = np.ceil(RUNS_SKEWNESS_RULE * g1 * g1)
    skewed = np.flatnonzero((counts >= limit) & (worst != first) & (counts < needed))
    if skewed.size:
        i = int(skewed[np.argmax(needed[skewed] - counts[skewed])])
        where = "" if keys is None else f" in {skewed.size} group(s), e.g. {keys[i]!r}"
        warnings.warn(
            f"{int(counts[i])} runs{where}: the scores are skewed (sample skewness "
            f"{float(g1[i]):+.2f}; rare successes or scores piled at a bound show as skew), "
            f"and the bootstrap interval of a mean of skewed scores needs about 25·g₁² = "
            f"{int(needed[i])} runs to cover: in the seeded coverage study Bernoulli(0.1) "
            "covered 0.88 and Pareto(3) 0.86 at 20 runs (docs: how-to/estimators.md, "
            "'Interval coverage'); read the interval as optimistic, or run more seeds",
            DegenerateDataWarning, stacklevel=3,
        )


@overload
def summary(scores: ArrayLike, *, groups: None = None, alpha: float = 0.2, tau: float = 0.9,
            n_resamples: int = 2000, seed: int = 0, method: IntervalMethod = DEFAULT_METHOD,
            executor: Executor = "local") -> ReliabilitySummaryResult: ...


@overload
def summary(scores: ArrayLike, *, groups: GroupLabels, alpha: float = 0.2, tau: float = 0.9,
            n_resamples: int = 2000, seed: int = 0, method: IntervalMethod = DEFAULT_METHOD,
            executor: Executor = "local") -> GroupedReliabilityResult: ...


def summary(
    scores: ArrayLike,
    *,
    groups: GroupLabels | None = None,
    alpha: float = 0.2,
    tau: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_METHOD,
    executor: Executor = "local",
) -> ReliabilitySummaryResult | GroupedReliabilityResult:
    """Mean, worst case, CVaR@α, Reliability@τ and a bootstrap CI ([DMC] §4.4).

    Args:
        scores: one terminal score per run, finite.
        groups: ``None`` for one group; else one label per run, a tuple of label arrays
            (e.g. ``(model, task)`` columns of a long table) or a mapping ``name → labels``.
        alpha: CVaR tail fraction in ``(0, 1]``; ``CVaR_α = max_c {c − E[(c − X)+]/α}``, the
            mean of the worst ``αn`` runs with fractional weight on the boundary value.
        tau: Reliability@τ threshold; a run counts when its score is ``≥ tau``.
        n_resamples: bootstrap draws of the mean ([DMC] uses 2,000).
        seed: seeds the draws per group size ``n``: blocks of draws, block ``j`` from the
            ``j``-th child of ``numpy.random.SeedSequence((seed, n))``; the same scores and
            seed give bit-identical intervals.
        method: the interval of the mean, scipy.stats.bootstrap's names: ``"BCa"`` (the
            default: it covers best in the seeded coverage study of docs/how-to/estimators.md), or
            ``"percentile"`` ([DMC]'s) or ``"basic"``.
        executor: where the bootstrap draws are computed: ``"local"``, or ``"ray"`` (blocks
            of draws as Ray tasks; ``use_ray``). The same draws either way, bit for bit.

    Returns:
        A ``ReliabilitySummaryResult``, or with ``groups`` a ``GroupedReliabilityResult``
        mapping each group key to its ``ReliabilitySummaryResult`` (``r["gpt-4o", "T3"]``,
        ``r.table()``).

    Warns:
        DegenerateDataWarning: a group has a single run; all its runs scored the same;
            fewer runs than ``MIN_RUNS_FOR_COVERAGE``; or scores so skewed that its size is
            below ``RUNS_SKEWNESS_RULE · g₁²`` (the module docs give what was measured).
    """
    x, alpha, tau, n_resamples, seed = _summary_iv(scores, alpha, tau, n_resamples, seed)
    method = check_method(method)
    how = check_executor(executor)
    if groups is None:
        cells = _Cells.build(x, np.zeros(x.shape[0], dtype=np.intp), 1)
        _warn_single_runs(cells.counts, None)
        _warn_doubtful_intervals(cells, None, method)
        mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
        with executing(how):
            boot = _readonly(_bootstrap_means(cells, n_resamples, seed, how)[0])
        return ReliabilitySummaryResult(
            mean=float(mean[0]), worst=float(worst[0]), cvar=float(cvar[0]),
            reliability=float(rel[0]), n=int(x.shape[0]), alpha=alpha, tau=tau,
            bootstrap_distribution=boot, seed=seed, inputs_hash=_hash_sorted(cells.values),
            method=method, acceleration=float(_mean_acceleration(cells)[0]),
        )
    names, keys, code = _group_codes(groups, x.shape[0])
    cells = _Cells.build(x, code, len(keys))
    _warn_single_runs(cells.counts, keys)
    _warn_doubtful_intervals(cells, keys, method)
    mean, worst, cvar, rel = _tail_statistics(cells, alpha, tau)
    with executing(how):
        boot = _bootstrap_means(cells, n_resamples, seed, how)
    return GroupedReliabilityResult(
        groups=keys, names=names, mean=_readonly(mean), worst=_readonly(worst),
        cvar=_readonly(cvar), reliability=_readonly(rel), n=_readonly(cells.counts.copy()),
        alpha=alpha, tau=tau, bootstrap_distribution=_readonly(boot), seed=seed,
        _cells=cells, _index={k: i for i, k in enumerate(keys)}, method=method,
        acceleration=_readonly(_mean_acceleration(cells)),
    )

