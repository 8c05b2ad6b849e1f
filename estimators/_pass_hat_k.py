"""pass^k of τ-bench (Yao et al. 2025): the chance that ``k`` trials of a task all succeed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._scores import FloatArray, _check_count, _readonly


@dataclass(frozen=True, eq=False)
class PassHatKResult:
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


def pass_hat_k(successes: ArrayLike, trials: ArrayLike, k: int) -> PassHatKResult:
    """pass^k (τ-bench, Yao et al. 2025): the chance that ``k`` trials of a task all succeed.

    Args:
        successes: successful trials per task ``c_t``.
        trials: trials per task ``n_t`` (scalar or per task), each ``≥ k``.
        k: the number of trials that must all succeed.

    Returns:
        A ``PassHatKResult`` whose ``estimate`` is ``mean_t C(c_t, k) / C(n_t, k)``.
    """
    c, n, k = _pass_hat_k_iv(successes, trials, k)
    j = np.arange(k)
    # C(c, k)/C(n, k) = Π_{j<k} (c − j)/(n − j); a factor is 0 once j reaches c.
    per_task = np.prod(np.maximum(c[:, None] - j, 0) / (n[:, None] - j), axis=1)
    return PassHatKResult(estimate=float(per_task.mean()), per_task=_readonly(per_task), k=k)
