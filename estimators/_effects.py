"""Paired-intervention policy effects ([SSC] eq. 3–4) and their repeatability.

Each paired block (a task and a replicate, run under the same random numbers) has the four
Opened-Mean conclusions θ_ab of a 2×2 intervention: selection a ∈ {0 uniform, 1 agent} ×
stopping b ∈ {0 fixed, 1 adaptive}. Per block (eq. 4)

    Δsel = θ10 − θ00,   Δstop = θ01 − θ00,   Δint = θ11 − θ10 − θ01 + θ00,

and Δsel + Δstop + Δint = θ11 − θ00 (the total) by construction. Effects are averaged
within each task and tasks weigh equally. The interval of each effect is, by default, the
cluster t interval over the G per-task effects ``ū ± t_{1−α/2}(G − 1)·s/√G`` (exact for
normal per-task effects at any G ≥ 2); the task-clustered percentile bootstrap (shared
draws for the four effects) stays available (``interval="percentile"``). In the seeded
coverage study (``tests/benchmarks/bench_effects_coverage.py``, 3,000 trials per cell)
the 95 % t interval covered 0.945 at 3 tasks and 0.946 at 5 with normal per-task effects,
where the percentile bootstrap covered 0.743 and 0.838; with skewed (centred exponential)
effects t covered 0.875 at 5 tasks and 0.931 at 20, percentile 0.782 and 0.907. The t
reference is doubtful when the per-task effects are skewed: below ``9·g₁²`` tasks (g₁ the
sample skewness of the per-task effects; ``EFFECTS_SKEWNESS_RULE`` says how 9 was chosen)
a ``DegenerateDataWarning`` says so, and per-task effects that are all equal (a
zero-width interval, as 0/1 outcomes that never succeed give) warn too. A skew the sample
did not reach cannot be seen: with rare successes most small samples are all zeros, which
the all-equal warning reports. Repeatability across replicates is the one-way
ICC(1,k) ([SSC] Appendix C).

These are the policy effects. A contrast of two CESS estimates is *not* one (Theorem 2).

Examples:
    >>> from agentlog.estimators import cess
    >>> fx = cess.policy_effects([0.0, 0.1, 0.2], [0.3, 0.5, 0.4], [0.1, 0.1, 0.3],
    ...                          [0.5, 0.6, 0.9], n_resamples=100)
    >>> round(fx.selection, 3), round(fx.total, 3)
    (0.3, 0.567)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning
from agentlog.display import html_repr, render_estimates, render_fields, render_notes

from ._bootstrap import BootstrapResult, cluster_bootstrap, group_means
from ._cess import THEOREM_2_NOTE, inputs_hash
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

FloatArray = NDArray[np.float64]
EFFECTS = ("selection", "stopping", "interaction", "total")
EffectInterval = Literal["t", "percentile"]
EFFECT_INTERVALS: tuple[str, ...] = ("t", "percentile")
#: The per-task effects' skewness rule: the t reference of their mean is doubtful below
#: ``EFFECTS_SKEWNESS_RULE · g₁²`` tasks, g₁ the sample skewness. Cochran's rule for a mean
#: uses 25; over a handful of tasks the sample skewness is too noisy for it (with normal
#: effects it fired on 45 % of 5-task samples, 26 % at 10), while 9 fired on 24 % and 7 %
#: of normal samples and on 40-43 % (exponential) and 50-59 % (lognormal) of skewed ones
#: at 5-10 tasks (tests/benchmarks/bench_effects_coverage.py --skew).
EFFECTS_SKEWNESS_RULE = 9.0
#: Below this many tasks the skewness rule is not applied: the sample skewness of G values
#: cannot exceed (G − 2)/√(G − 1) (0.71 at 3, 1.15 at 4), so it would only measure the
#: shape of a handful of numbers.
MIN_TASKS_FOR_SKEWNESS = 5


def sample_skewness(x: FloatArray) -> float:
    """The moment skewness ``g₁ = m₃ / m₂^{3/2}`` of ``x`` (0 for fewer than 3 values or a
    zero spread)."""
    if x.shape[0] < 3:
        return 0.0
    d = x - x.mean()
    m2 = float(np.mean(d * d))
    if m2 <= 0.0:
        return 0.0
    return float(np.mean(d * d * d)) / float(m2 ** 1.5)


def skew_doubt(x: FloatArray, rule: float, floor: int = 2) -> tuple[float, int] | None:
    """``(g₁, values needed)`` when ``len(x)`` is below ``max(floor, ⌈rule·g₁²⌉)`` (the t
    or bootstrap reference of the mean is then doubtful), else None."""
    g1 = sample_skewness(x)
    needed = max(floor, math.ceil(rule * g1 * g1))
    return (g1, needed) if x.shape[0] < needed else None


def icc_1k(values: ArrayLike, *, target: Any, repeat: Any) -> float:
    """One-way random-effects ICC(1,k) = (MSB − MSW) / MSB for k repeats per target.

    Args:
        values: one measurement per (target, repeat).
        target: the target (task) of each measurement.
        repeat: the repeat (replicate) of each measurement; every target needs the same k.

    Returns:
        ICC(1,k); NaN, with a ``DegenerateDataWarning``, when every target has the same mean
        (MSB = 0): the ratio is undefined, there is no between-target spread to repeat.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not np.isfinite(v).all():
        raise ValueError("`values` must be a finite 1-D array")
    t_uniq, t = codes(target, name="target")
    r_uniq, r = codes(repeat, name="repeat")
    if t.shape != v.shape or r.shape != v.shape:
        raise ValueError("`target` and `repeat` need one label per value")
    n, k = len(t_uniq), len(r_uniq)
    if n < 2 or k < 2:
        raise ValueError(f"ICC(1,k) needs >= 2 targets and >= 2 repeats; found {n} and {k}")
    table = np.full((n, k), np.nan)
    table[t, r] = v
    if np.isnan(table).any() or v.shape[0] != n * k:
        raise ValueError("ICC(1,k) needs a balanced design: every target measured once in "
                         "every repeat")
    row_means = table.mean(axis=1)
    msb = k * np.sum((row_means - table.mean()) ** 2) / (n - 1)
    msw = np.sum((table - row_means[:, None]) ** 2) / (n * (k - 1))
    if msb == 0:
        warnings.warn(
            f"ICC(1,k) is undefined: the {n} targets have identical means over the {k} "
            "repeats (MSB = 0), so there is no between-target variance; returning NaN",
            DegenerateDataWarning, stacklevel=2,
        )
        return float("nan")
    return float((msb - msw) / msb)


@dataclass(frozen=True)
class PolicyEffectsResult:
    """Selection, stopping, interaction and total effects with task-clustered intervals."""

    selection: float
    stopping: float
    interaction: float
    total: float
    per_block: dict[str, FloatArray]
    bootstrap: BootstrapResult
    confidence_level: float
    icc: dict[str, float] | None
    n_blocks: int
    n_clusters: int
    inputs_hash: str = ""  # SHA-256 of the four arms (and the cluster codes)
    note: str = field(default=THEOREM_2_NOTE)
    #: The interval ``confidence_interval`` gives: ``"t"`` (cluster t, the default) or
    #: ``"percentile"`` (task-clustered bootstrap).
    interval: str = "t"
    #: Per task (cluster), the mean of each effect over its blocks: shape (G, 4).
    per_cluster: FloatArray = field(default_factory=lambda: np.empty((0, len(EFFECTS))))

    def confidence_interval(self, effect: str, method: EffectInterval | None = None, *,
                            confidence_level: float | None = None) -> ConfidenceInterval[float]:
        """The interval of ``effect`` (one of ``EFFECTS``).

        Args:
            effect: ``"selection"``, ``"stopping"``, ``"interaction"`` or ``"total"``.
            method: ``"t"`` or ``"percentile"``; default ``self.interval``.
            confidence_level: default the level the effects were estimated with
                (``self.confidence_level``, 0.95 unless ``policy_effects`` was given one).
        """
        if effect not in EFFECTS:
            raise KeyError(f"unknown effect {effect!r}; one of {list(EFFECTS)}")
        level = check_confidence_level(
            self.confidence_level if confidence_level is None else confidence_level)
        how: str = self.interval if method is None else method
        j = EFFECTS.index(effect)
        if how == "percentile":
            low, high = self.bootstrap.confidence_interval(level)
            return ConfidenceInterval(float(low[j]), float(high[j]))
        if how != "t":
            raise ValueError(f"`method` must be one of {EFFECT_INTERVALS}; found {how!r}")
        return cluster_t_interval(self.per_cluster[:, j], level)

    def standard_error(self, effect: str, method: EffectInterval | None = None) -> float:
        """The standard error of ``effect``: ``s/√G`` over the per-task effects (``"t"``) or
        the bootstrap distribution's (``"percentile"``); default ``self.interval``."""
        if effect not in EFFECTS:
            raise KeyError(f"unknown effect {effect!r}; one of {list(EFFECTS)}")
        how: str = self.interval if method is None else method
        j = EFFECTS.index(effect)
        if how == "percentile":
            return float(self.bootstrap.standard_error[j])
        return cluster_standard_error(self.per_cluster[:, j])

    @html_repr
    def _repr_html_(self) -> str:
        head = render_fields([
            ("paired blocks", self.n_blocks), ("tasks (clusters)", self.n_clusters),
            ("interval", "cluster t" if self.interval == "t" else
             f"task-clustered {self.interval} bootstrap"),
        ], caption="Policy effects ([SSC] eq. 3–4)")
        effects = render_estimates(
            ((e, getattr(self, e), *self.confidence_interval(e), self.standard_error(e))
             for e in EFFECTS),
            confidence_level=self.confidence_level, spec="+.3f")
        icc = render_fields(self.icc.items(), caption="ICC(1,k) across replicates") \
            if self.icc else ""
        return head + effects + icc + render_notes([self.note])


def policy_effects(
    theta_00: ArrayLike,
    theta_10: ArrayLike,
    theta_01: ArrayLike,
    theta_11: ArrayLike,
    *,
    cluster: Any = None,
    repeat: Any = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    interval: EffectInterval = "t",
) -> PolicyEffectsResult:
    """Policy effects of a paired 2×2 intervention ([SSC] eq. 3–4).

    Args:
        theta_00, theta_10, theta_01, theta_11: Opened Mean per paired block under
            (uniform, fixed), (agent, fixed), (uniform, adaptive), (agent, adaptive).
        cluster: task of each block (default: every block its own cluster).
        repeat: replicate of each block; with ``cluster`` it gives ICC(1,k) per effect.
        n_resamples, seed, confidence_level: the task-clustered bootstrap; with a single
            cluster its intervals have zero width (``DegenerateDataWarning``).
        interval: what ``confidence_interval`` gives: ``"t"`` (default; the cluster t
            interval over the per-task effects, see the module docs for its coverage) or
            ``"percentile"`` (the task-clustered bootstrap).

    Warns:
        DegenerateDataWarning: a single cluster; every effect the same in every task (a
            zero-width interval that measures no sampling error); per-task effects so
            skewed that the number of tasks is below ``9·g₁²`` (the interval's reference
            is doubtful there).
    """
    if interval not in EFFECT_INTERVALS:
        raise ValueError(f"`interval` must be one of {EFFECT_INTERVALS}; found {interval!r}")
    confidence_level = check_confidence_level(confidence_level)
    arms = [block_values(x, f"`{name}`") for name, x in (
        ("theta_00", theta_00), ("theta_10", theta_10), ("theta_01", theta_01),
        ("theta_11", theta_11))]
    n = arms[0].shape[0]
    for name, arr in zip(("theta_10", "theta_01", "theta_11"), arms[1:], strict=True):
        if arr.shape[0] != n:
            raise ValueError(f"`{name}` has {arr.shape[0]} blocks, `theta_00` has {n}: the "
                             "arms must be paired block by block")
    if repeat is not None and cluster is None:
        raise ValueError("`repeat` needs `cluster` (the task of each block) for ICC(1,k)")
    t00, t10, t01, t11 = arms
    per_block = {
        "selection": t10 - t00,
        "stopping": t01 - t00,
        "interaction": t11 - t10 - t01 + t00,
        "total": t11 - t00,
    }
    clusters = np.arange(n) if cluster is None else cluster
    n_clusters = len(codes(clusters, name="cluster")[0])
    if n_clusters < 2:
        warnings.warn(
            f"all {n} block(s) are in one cluster: the task-clustered bootstrap resamples that "
            "one cluster every time, so the intervals have zero width and say nothing about "
            "sampling error; pass `cluster` labels of at least two tasks",
            DegenerateDataWarning, stacklevel=2,
        )
    stacked = np.column_stack([per_block[e] for e in EFFECTS])
    boot = cluster_bootstrap(stacked, clusters, n_resamples=n_resamples, seed=seed)
    _, group = codes(clusters, name="cluster")
    per_cluster = group_means(stacked, group, int(group.max()) + 1)
    if n_clusters >= 2:
        warn_doubtful(per_cluster, EFFECTS)
    icc = None
    if repeat is not None:
        if cluster is None:
            raise ValueError("`repeat` needs `cluster` (the task of each block) for ICC(1,k)")
        icc = {e: icc_1k(per_block[e], target=cluster, repeat=repeat) for e in EFFECTS}
    est = boot.estimate
    return PolicyEffectsResult(
        selection=float(est[0]), stopping=float(est[1]), interaction=float(est[2]),
        total=float(est[3]), per_block=per_block, bootstrap=boot,
        confidence_level=confidence_level, icc=icc, n_blocks=n, n_clusters=boot.n_clusters,
        inputs_hash=inputs_hash(t00, t10, t01, t11, group, config=f"{n_resamples}|{seed}"),
        interval=interval, per_cluster=per_cluster,
    )


def block_values(x: ArrayLike, what: str) -> FloatArray:
    """One arm's outcome per paired block as a finite 1-D float array, or a ValueError
    naming ``what`` and the first bad block."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array over paired blocks; found "
                         f"shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} must be finite: every block needs every arm (NaN or "
                         f"infinite at block {int(np.flatnonzero(~np.isfinite(arr))[0])})")
    return arr


def cluster_standard_error(per_cluster: FloatArray) -> float:
    """``s/√G`` over the finite per-task (cluster) values; 0 with fewer than two."""
    u = per_cluster[np.isfinite(per_cluster)]
    return float(u.std(ddof=1)) / math.sqrt(u.shape[0]) if u.shape[0] >= 2 else 0.0


def cluster_t_interval(per_cluster: FloatArray, confidence_level: float
                       ) -> ConfidenceInterval[float]:
    """The cluster t interval of a mean over tasks: the mean of the per-task values ± the
    t quantile on G − 1 degrees of freedom times ``s/√G`` (zero width for one task, which
    is warned about where the values are made)."""
    u = per_cluster[np.isfinite(per_cluster)]
    est = float(u.mean())
    if u.shape[0] < 2:
        return ConfidenceInterval(est, est)
    from scipy import stats

    se = cluster_standard_error(u)
    q = float(stats.t.ppf(0.5 + confidence_level / 2, u.shape[0] - 1))
    return ConfidenceInterval(est - q * se, est + q * se)


def warn_doubtful(per_cluster: FloatArray, names: Sequence[str]) -> None:
    """Warn when per-task effects (one column per name) cannot support an interval: the
    same value in every task, or a skew the number of tasks cannot carry (module docs)."""
    G = per_cluster.shape[0]
    flat = [e for j, e in enumerate(names) if np.ptp(per_cluster[:, j]) == 0.0]
    if flat:
        warnings.warn(
            f"{', '.join(flat)}: the same value in all {G} tasks, so the interval has zero "
            "width and measures no sampling error (identical arms? a score that cannot "
            "vary?); check that the arms differ and the outcome is the one you meant",
            DegenerateDataWarning, stacklevel=3,
        )
    if G < MIN_TASKS_FOR_SKEWNESS:
        return  # a handful of values cannot show a skew (|g₁| is bounded by (G−2)/√(G−1))
    doubts = {e: d for j, e in enumerate(names)
              if e not in flat
              and (d := skew_doubt(per_cluster[:, j], EFFECTS_SKEWNESS_RULE)) is not None}
    if doubts:
        worst = max(doubts, key=lambda e: doubts[e][1])
        g1, needed = doubts[worst]
        others = [e for e in doubts if e != worst]
        warnings.warn(
            f"the per-task effects are skewed ({worst}: sample skewness {g1:+.2f}"
            f"{', and ' + ', '.join(others) + ' too' if others else ''}): with "
            f"{G} tasks the interval's normal reference is doubtful (it asks for about 9·g₁² "
            f"= {needed} tasks; in the coverage study skewed effects covered 0.875 at 5 tasks "
            "and 0.931 at 20). Read the interval as optimistic, or add tasks",
            DegenerateDataWarning, stacklevel=3,
        )
