"""Wasserstein distances between empirical laws, solved exactly ([LBC] eq. 6).

* ``wasserstein`` is ``W_d(μ, ν) = inf_{Γ ∈ Π(μ, ν)} ∫ d dΓ`` ([LBC] eq. 6) between two
  empirical laws, solved exactly with POT's network simplex (``ot.emd2``);
  ``wasserstein_many`` solves many small problems with a low per-problem overhead.

The network simplex behind ``_emd_solver`` and the checks of weights and cost matrices here
serve every distance of ``distance`` (the controllability distance, ``C_M``, FGW). POT is
imported inside the functions that use it, so importing this module is cheap.

Examples:
    >>> from agentlog.estimators import distance
    >>> distance.wasserstein([0.0, 1.0], [0.5, 2.0])
    0.75
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
EmdSolver = Callable[[FloatArray, FloatArray, FloatArray], tuple[FloatArray, float]]

# POT's own default for the network simplex.
_MAX_ITER = 100_000


def _emd_public(a: FloatArray, b: FloatArray, M: FloatArray) -> tuple[FloatArray, float]:
    """``(plan, cost)`` by the public ``ot.emd`` (marginals already checked by the caller)."""
    import ot

    plan = np.asarray(ot.emd(a, b, M, numItermax=_MAX_ITER, check_marginals=False),
                      dtype=np.float64)
    return plan, float(np.sum(plan * M))


@functools.cache
def _emd_solver() -> EmdSolver:
    """``(a, b, M) -> (plan, cost)`` for balanced problems whose marginals are already checked.

    ``ot.emd``/``ot.emd2`` spend 60-150 µs per call on backend dispatch, conversions and
    marginal checks before a 3-10 µs network simplex on a 5×5 problem. For the thousands of
    small problems of one operator step we call the network simplex POT itself calls
    (``ot.lp.emd_wrap.emd_c``), after checking once, on a problem with a known answer, that
    its calling convention is the one expected. Any other POT falls back to the public
    ``ot.emd(..., check_marginals=False)``: slower, the same numbers.
    """
    public = _emd_public
    try:
        from ot.lp import emd_wrap

        raw = emd_wrap.emd_c
        a0 = np.array([0.5, 0.5])
        b0 = np.array([0.25, 0.75])
        m0 = np.array([[0.0, 1.0], [1.0, 0.0]])
        for n_extra in (2, 0):  # POT ≥ 0.9.6 takes warm-start potentials after numThreads
            try:
                out = raw(a0, b0, m0, _MAX_ITER, 1, *([None] * n_extra))
            except TypeError:
                continue
            plan0, cost0, code0 = out[0], out[1], out[-1]
            if (code0 == 1 and abs(float(cost0) - 0.25) < 1e-12
                    and np.allclose(plan0, [[0.25, 0.25], [0.0, 0.5]])):
                extra = (None,) * n_extra

                def fast(a: FloatArray, b: FloatArray, M: FloatArray,
                         extra: tuple[None, ...] = extra) -> tuple[FloatArray, float]:
                    res = raw(a, b, M, _MAX_ITER, 1, *extra)
                    if res[-1] != 1:  # not optimal: let the public path warn or raise
                        return public(a, b, M)
                    return res[0], float(res[1])

                return fast
    except Exception:  # a different POT layout: use the public API
        pass
    return public


def _weights(name: str, w: ArrayLike | None, n: int) -> FloatArray:
    if w is None:
        return np.full(n, 1.0 / n)
    try:
        arr = np.array(w, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be an array of weights; {exc}") from None
    if arr.shape != (n,):
        raise ValueError(
            f"`{name}` must have one weight per support point, shape ({n},); found shape "
            f"{arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite; found {arr[~np.isfinite(arr)][0]}")
    if (arr < 0).any():
        raise ValueError(f"`{name}` must be non-negative; found {arr[arr < 0][0]}")
    total = arr.sum()
    if total <= 0:
        raise ValueError(f"`{name}` must have positive total mass; all weights are zero")
    arr /= total
    return arr


def _cost_matrix(name: str, cost: ArrayLike, *, bounded: bool = False) -> FloatArray:
    try:
        M = np.array(cost, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a matrix of numbers; {exc}") from None
    if M.ndim != 2 or M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"`{name}` must be a non-empty 2-D matrix; found shape {M.shape}")
    if not np.isfinite(M).all():
        i, j = np.argwhere(~np.isfinite(M))[0]
        raise ValueError(f"`{name}` must be finite; found {M[i, j]} at ({i}, {j})")
    if (M < 0).any():
        i, j = np.argwhere(M < 0)[0]
        raise ValueError(f"`{name}` must be non-negative; found {M[i, j]} at ({i}, {j})")
    if bounded and (M > 1).any():
        i, j = np.argwhere(M > 1)[0]
        raise ValueError(
            f"`{name}` must take values in [0, 1] ([LBC] A.5 requires bounded costs for "
            f"Theorem 4); found {M[i, j]} at ({i}, {j})"
        )
    return M


def _samples(name: str, x: ArrayLike) -> FloatArray:
    try:
        arr = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"`{name}` must be numeric samples of shape (n,) or (n, d); {exc}. For other "
            "objects pass a ground cost: `cost=callable` or a cost matrix"
        ) from None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"`{name}` must have shape (n,) or (n, d) with n ≥ 1; found shape "
                         f"{np.shape(x)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite; found {arr[~np.isfinite(arr)][0]}")
    return arr


def _wasserstein_iv(
    x: Any, y: Any, cost: Any, a: ArrayLike | None, b: ArrayLike | None, p: float
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating):
        raise ValueError(f"`p` must be a number ≥ 1; found {p!r}")
    if not (math.isfinite(p) and p >= 1):
        raise ValueError(f"`p` must be a finite number ≥ 1; found {p!r}")
    if cost is None:
        if x is None or y is None:
            raise ValueError("pass samples `x` and `y`, or a ground cost matrix `cost`")
        X, Y = _samples("x", x), _samples("y", y)
        if X.shape[1] != Y.shape[1]:
            raise ValueError(
                f"`x` and `y` must live in the same space: `x` has dimension {X.shape[1]}, "
                f"`y` has dimension {Y.shape[1]}"
            )
        diff = X[:, None, :] - Y[None, :, :]
        M = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    elif callable(cost):
        if x is None or y is None:
            raise ValueError("a callable `cost` needs the samples `x` and `y` it compares")
        xs, ys = list(x), list(y)
        if not xs or not ys:
            raise ValueError(f"`x` and `y` must be non-empty; found {len(xs)} and {len(ys)}")
        M = _cost_matrix("cost", [[cost(u, v) for v in ys] for u in xs])
    else:
        M = _cost_matrix("cost", cost)
        for name, s, n in (("x", x, M.shape[0]), ("y", y, M.shape[1])):
            if s is not None and len(s) != n:
                raise ValueError(
                    f"`{name}` has {len(s)} points but `cost` has shape {M.shape}: a cost matrix "
                    "has one row per point of `x` and one column per point of `y`"
                )
    wa = _weights("a", a, M.shape[0])
    wb = _weights("b", b, M.shape[1])
    return wa, wb, M, float(p)


def wasserstein(
    x: ArrayLike | Sequence[Any] | None = None,
    y: ArrayLike | Sequence[Any] | None = None,
    *,
    cost: ArrayLike | Callable[[Any, Any], float] | None = None,
    a: ArrayLike | None = None,
    b: ArrayLike | None = None,
    p: float = 1,
) -> float:
    """The p-Wasserstein distance between two empirical laws ([LBC] eq. 6), exactly.

    ``W_p(μ, ν) = (min_{Γ ∈ Π(a, b)} Σ_ij Γ_ij c(x_i, y_j)^p)^{1/p}`` with ``μ = Σ a_i δ_{x_i}``
    and ``ν = Σ b_j δ_{y_j}``, solved by POT's network simplex (``ot.emd2``). At ``p = 1`` in
    one dimension it equals ``scipy.stats.wasserstein_distance``.

    Args:
        x, y: samples of shape ``(n,)`` or ``(n, d)`` (Euclidean ground distance); any
            sequences when ``cost`` is a callable; optional (only length-checked) when
            ``cost`` is a matrix.
        cost: the ground distance ``c``: ``None`` (Euclidean), a callable ``cost(x_i, y_j)``,
            or a precomputed non-negative matrix of shape ``(n, m)``.
        a, b: non-negative weights of the samples, normalised to sum to 1; uniform when
            ``None``.
        p: the order, ``p ≥ 1``; the ground distance is raised to ``p``.

    Returns:
        The distance, a float.

    Raises:
        ValueError: NaN or infinite input, negative weights or costs, mismatched shapes or
            dimensions, or ``p < 1``; the message names the parameter.
    """
    wa, wb, M, pp = _wasserstein_iv(x, y, cost, a, b, p)
    import ot

    Mp = M if pp == 1 else M**pp
    value = float(ot.emd2(wa, wb, Mp, numItermax=_MAX_ITER, check_marginals=False))
    value = max(value, 0.0)
    return value if pp == 1 else value ** (1.0 / pp)


def wasserstein_many(
    costs: ArrayLike | Sequence[ArrayLike],
    *,
    a: ArrayLike | Sequence[ArrayLike | None] | None = None,
    b: ArrayLike | Sequence[ArrayLike | None] | None = None,
    p: float = 1,
) -> FloatArray:
    """``wasserstein(cost=costs[k], a=a[k], b=b[k], p=p)`` for many small problems at once.

    Validation is vectorised when the problems share a shape, point masses are solved in
    closed form (their only coupling is the product), and the rest go straight to POT's network
    simplex without ``ot.emd2``'s per-call dispatch (see ``tests/benchmarks/bench_distance.py``
    for the overhead against a bare ``ot.emd2`` call). The values equal ``ot.emd2``'s.

    Args:
        costs: ground-distance matrices, a 3-D array ``(n_problems, n, m)`` or a sequence of
            2-D matrices of any shapes.
        a, b: per-problem weights (``None`` entries, or ``None`` for all, mean uniform), in the
            same layout as ``costs``; normalised to sum to 1.
        p: the order, ``p ≥ 1``.

    Returns:
        The distances, shape ``(n_problems,)``.
    """
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating) or not (
        math.isfinite(p) and p >= 1
    ):
        raise ValueError(f"`p` must be a finite number ≥ 1; found {p!r}")
    stacked: FloatArray | None = None
    try:
        arr = np.asarray(costs, dtype=np.float64)
        if arr.ndim == 3:
            stacked = arr
    except (TypeError, ValueError):
        pass
    if stacked is not None:
        n_prob, n, m = stacked.shape
        if n == 0 or m == 0:
            raise ValueError(f"`costs` must hold non-empty matrices; found shape {stacked.shape}")
        bad = ~np.isfinite(stacked) | (stacked < 0)
        if bad.any():
            k, i, j = np.argwhere(bad)[0]
            raise ValueError(f"`costs[{k}]` must be finite and non-negative; found "
                             f"{stacked[k, i, j]} at ({i}, {j})")
        mats: Sequence[FloatArray] = list(stacked)
        A = _many_weights("a", a, n_prob, [n] * n_prob)
        B = _many_weights("b", b, n_prob, [m] * n_prob)
    else:
        if isinstance(costs, np.ndarray) or not isinstance(costs, Sequence):
            raise ValueError("`costs` must be a 3-D array or a sequence of 2-D cost matrices; "
                             f"found {type(costs).__name__} of shape {np.shape(costs)}")
        mats = _many_costs(costs)
        n_prob = len(mats)
        A = _many_weights("a", a, n_prob, [M.shape[0] for M in mats])
        B = _many_weights("b", b, n_prob, [M.shape[1] for M in mats])
    solve = _emd_solver()
    out = np.empty(n_prob)
    for k in range(n_prob):
        M = mats[k] if p == 1 else mats[k] ** p
        wa, wb = A[k], B[k]
        if M.shape[0] == 1 or M.shape[1] == 1:
            out[k] = wa @ M @ wb
        else:
            out[k] = solve(wa, wb, np.ascontiguousarray(M))[1]
    np.maximum(out, 0.0, out=out)
    if p != 1:
        out **= 1.0 / p
    return out


def _many_weights(
    name: str, w: ArrayLike | Sequence[ArrayLike | None] | None, n_prob: int, sizes: list[int]
) -> list[FloatArray]:
    if w is None:
        return [np.full(s, 1.0 / s) for s in sizes]
    if len(w) != n_prob:  # type: ignore[arg-type]
        raise ValueError(f"`{name}` must hold one weight vector per problem ({n_prob}); found "
                         f"{len(w)}")  # type: ignore[arg-type]
    if isinstance(w, np.ndarray) and w.ndim == 2 and len(set(sizes)) == 1:
        W = np.array(w, dtype=np.float64)
        if W.shape[1] != sizes[0]:
            raise ValueError(f"`{name}` must have shape ({n_prob}, {sizes[0]}); found {W.shape}")
        if not np.isfinite(W).all() or (W < 0).any():
            k = int(np.argwhere(~(np.isfinite(W) & (W >= 0)))[0][0])
            raise ValueError(f"`{name}[{k}]` must be finite and non-negative; found {W[k]}")
        total = W.sum(axis=1, keepdims=True)
        if (total <= 0).any():
            k = int(np.argwhere(total[:, 0] <= 0)[0][0])
            raise ValueError(f"`{name}[{k}]` must have positive total mass; all weights are zero")
        return list(W / total)
    uniform = {s: np.full(s, 1.0 / s) for s in set(sizes)}
    out: list[FloatArray] = []
    given: list[int] = []
    for k, (wk, s) in enumerate(zip(w, sizes, strict=True)):  # type: ignore[arg-type]
        if wk is None:
            out.append(uniform[s])
            continue
        # the network simplex reads C-contiguous float64 vectors
        arr = None if isinstance(wk, str | bytes) else np.ascontiguousarray(wk, dtype=np.float64)
        if arr is None or arr.shape != (s,):
            return [_weights(f"{name}[{k}]", wk, s)]  # raises, naming the problem
        out.append(arr)
        given.append(k)
    if given:
        # One pass over every weight, then per-problem messages only when something is wrong.
        flat = np.concatenate([out[k] for k in given])
        sizes_given = np.array([out[k].size for k in given])
        totals = np.add.reduceat(flat, np.concatenate(([0], np.cumsum(sizes_given)[:-1])))
        if not (np.isfinite(flat).all() and (flat >= 0).all() and (totals > 0).all()):
            for k in given:
                _weights(f"{name}[{k}]", out[k], sizes[k])
        for k, total in zip(given, totals.tolist(), strict=True):
            out[k] = out[k] / total
    return out


def _many_costs(costs: Sequence[ArrayLike]) -> list[FloatArray]:
    mats: list[FloatArray] = []
    for k, c in enumerate(costs):
        try:
            M = np.asarray(c, dtype=np.float64)
        except (TypeError, ValueError):
            M = np.empty(0)
        if M.ndim != 2 or 0 in M.shape:
            _cost_matrix(f"costs[{k}]", c)  # raises with the message for this problem
        mats.append(M)
    if mats:
        flat = np.concatenate([M.ravel() for M in mats])
        if not (np.isfinite(flat).all() and (flat >= 0).all()):
            for k, M in enumerate(mats):
                _cost_matrix(f"costs[{k}]", M)
    return mats


def _readonly(arr: NDArray[Any]) -> NDArray[Any]:
    arr.setflags(write=False)
    return arr
