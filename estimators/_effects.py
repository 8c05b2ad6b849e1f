"""Paired-intervention policy effects ([SSC] eq. 3–4) and their repeatability.

Each paired block (a task and a replicate, run under the same random numbers) has the four
Opened-Mean conclusions θ_ab of a 2×2 intervention: selection a ∈ {0 uniform, 1 agent} ×
stopping b ∈ {0 fixed, 1 adaptive}. Per block (eq. 4)

    Δsel = θ10 − θ00,   Δstop = θ01 − θ00,   Δint = θ11 − θ10 − θ01 + θ00,

and Δsel + Δstop + Δint = θ11 − θ00 (the total) by construction. Effects are averaged
within each task, tasks weigh equally, and intervals resample whole tasks (shared draws
for the four effects). Repeatability across replicates is the one-way ICC(1,k)
([SSC] Appendix C).

These are the policy effects. A contrast of two CESS estimates is *not* one (Theorem 2).

Example:
    >>> from agentlog.estimators import cess
    >>> fx = cess.policy_effects([0.0, 0.1], [0.3, 0.5], [0.1, 0.1], [0.5, 0.6], n_resamples=100)
    >>> round(fx.selection, 3), round(fx.total, 3)
    (0.35, 0.5)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning

from ._bootstrap import BootstrapResult, cluster_bootstrap, codes
from ._cess import THEOREM_2_NOTE, inputs_hash

FloatArray = NDArray[np.float64]
EFFECTS = ("selection", "stopping", "interaction", "total")


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
class PolicyEffects:
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

    def confidence_interval(self, effect: str) -> tuple[float, float]:
        if effect not in EFFECTS:
            raise KeyError(f"unknown effect {effect!r}; one of {list(EFFECTS)}")
        low, high = self.bootstrap.confidence_interval(self.confidence_level)
        j = EFFECTS.index(effect)
        return float(low[j]), float(high[j])


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
) -> PolicyEffects:
    """Policy effects of a paired 2×2 intervention ([SSC] eq. 3–4).

    Args:
        theta_00, theta_10, theta_01, theta_11: Opened Mean per paired block under
            (uniform, fixed), (agent, fixed), (uniform, adaptive), (agent, adaptive).
        cluster: task of each block (default: every block its own cluster).
        repeat: replicate of each block; with ``cluster`` it gives ICC(1,k) per effect.
        n_resamples, seed, confidence_level: the task-clustered bootstrap; with a single
            cluster its intervals have zero width (``DegenerateDataWarning``).
    """
    arms = []
    for name, x in (("theta_00", theta_00), ("theta_10", theta_10), ("theta_01", theta_01),
                    ("theta_11", theta_11)):
        arr = np.asarray(x, dtype=np.float64)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"`{name}` must be a non-empty 1-D array over paired blocks; "
                             f"found shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"`{name}` must be finite: every block needs all four arms "
                             f"(NaN at block {int(np.flatnonzero(~np.isfinite(arr))[0])})")
        arms.append(arr)
    n = arms[0].shape[0]
    for name, arr in zip(("theta_10", "theta_01", "theta_11"), arms[1:], strict=True):
        if arr.shape[0] != n:
            raise ValueError(f"`{name}` has {arr.shape[0]} blocks, `theta_00` has {n}: the "
                             "arms must be paired block by block")
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
    boot = cluster_bootstrap(np.column_stack([per_block[e] for e in EFFECTS]), clusters,
                             n_resamples=n_resamples, seed=seed)
    icc = None
    if repeat is not None:
        if cluster is None:
            raise ValueError("`repeat` needs `cluster` (the task of each block) for ICC(1,k)")
        icc = {e: icc_1k(per_block[e], target=cluster, repeat=repeat) for e in EFFECTS}
    est = boot.estimate
    return PolicyEffects(
        selection=float(est[0]), stopping=float(est[1]), interaction=float(est[2]),
        total=float(est[3]), per_block=per_block, bootstrap=boot,
        confidence_level=confidence_level, icc=icc, n_blocks=n, n_clusters=boot.n_clusters,
        inputs_hash=inputs_hash(t00, t10, t01, t11, codes(clusters, name="cluster")[1],
                                config=f"{n_resamples}|{seed}"),
    )
