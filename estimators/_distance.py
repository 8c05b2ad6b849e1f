"""Behavioural distances: Wasserstein, the controllability distance, C_M and FGW ([LBC]).

* ``wasserstein`` is ``W_d(μ, ν) = inf_{Γ ∈ Π(μ, ν)} ∫ d dΓ`` ([LBC] eq. 6) between two
  empirical laws, solved exactly with POT's network simplex (``ot.emd2``);
  ``wasserstein_many`` solves many small problems with a low per-problem overhead.
* ``controllability_distance`` iterates the controllability operator of Definition 8,

  ``(T_AB d)(h_A, h_B) = (1−γ) d_Z(φ_A(h_A), φ_B(h_B)) + γ W_d̄(P_A(·|h_A), P_B(·|h_B))`` (eq. 17)

  with the lifted branch cost
  ``d̄((ℓ_A, h'_A), (ℓ_B, h'_B)) = β d_L(ℓ_A, ℓ_B) + (1−β) d(h'_A, h'_B)`` (eq. 16), on finite
  branch kernels ``P(ℓ, h' | h)`` (eq. 7, a ``BranchKernel``) to its unique fixed point
  ``d†_AB`` (Theorem 4; Definition 9). It is run from ``d ≡ 0`` and from ``d ≡ 1`` and reports
  the iterations, the measured contraction ratio against the bound ``γ(1−β)`` and the sup gap
  between the two limits (the checks of Appendix F.7, Table 18).
* ``contextwise_cm`` is the task-matched controllability radius ``C_M^ρ`` (Definition 11 with
  the coupling restricted to the task diagonal; Appendix F.6), with the entry term bracketed
  by ``|e_A − e_B|`` and ``e_A + e_B`` when only distances to a reference are stored.
* ``fgw_discrepancy`` is the fused Gromov–Wasserstein graph discrepancy of eq. 20
  (``ot.gromov.fused_gromov_wasserstein2``), an upper bound from several starts.

POT and scipy are imported inside the functions that use them, so importing this module is
cheap.

Example:
    >>> from agentlog.estimators import distance
    >>> distance.wasserstein([0.0, 1.0], [0.5, 2.0])
    0.75
    >>> # One absorbing history each, same label, interfaces 0 and 1 apart: the fixed point
    >>> # solves d = (1−γ)·1 + γ(1−β)·d, so d† = 0.1 / (1 − 0.45) at γ = 0.9, β = 0.5.
    >>> a = distance.BranchKernel([0.0], [[(0, 0, 1.0)]])
    >>> b = distance.BranchKernel([1.0], [[(0, 0, 1.0)]])
    >>> r = distance.controllability_distance(a, b, gamma=0.9, beta=0.5)
    >>> round(float(r.distance[0, 0]), 6), r.bound, r.converged
    (0.181818, 0.45, True)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
EmdSolver = Callable[[FloatArray, FloatArray, FloatArray], tuple[FloatArray, float]]

# POT's own default for the network simplex.
_MAX_ITER = 100_000
# Successive differences below this are not used for the contraction ratio: the transport
# values carry rounding of order 1e-16, which would distort ratios of smaller steps.
_RATIO_FLOOR = 1e-6
_STOCHASTIC_ATOL = 1e-9


# ---------------------------------------------------------------------------------------------
# Exact optimal transport with a low per-problem overhead
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Branch kernels and the controllability operator (Definitions 8-10, Theorem 4)
# ---------------------------------------------------------------------------------------------


def _readonly(arr: NDArray[Any]) -> NDArray[Any]:
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, init=False, eq=False)
class BranchKernel:
    """A finite branch kernel ``P(ℓ, h' | h)`` ([LBC] eq. 7) with an interface ``φ(h)``.

    States are the histories ``h = 0..n_states−1``. Each state has an interface value
    ``φ(h)`` (Definition 3; a number or a vector) and a law over branches ``(ℓ, h')``: a label
    ``ℓ ∈ {0..n_labels−1}`` of the shared label space and a next history ``h'``. A history that
    terminates is absorbing (Definition 2): give it one branch to itself with a stop label,
    ``[(stop, h, 1.0)]``.

    Example:
        >>> k = BranchKernel([0.0, 1.0], [[(0, 1, 0.5), (1, 0, 0.5)], [(2, 1, 1.0)]])
        >>> k.n_states, k.n_labels, k.transitions()[0].tolist()
        (2, 3, [[0.0, 0.5], [0.5, 0.0], [0.0, 0.0]])

    Attributes:
        interface: ``φ(h)``, shape ``(n_states, n_features)``.
        source, label, target, probability: the branches with positive probability, one row
            each, sorted by ``source``.
        n_labels: size of the label space.
    """

    interface: FloatArray
    source: IntArray
    label: IntArray
    target: IntArray
    probability: FloatArray
    n_labels: int

    def __init__(
        self,
        interface: ArrayLike,
        branches: Sequence[Sequence[tuple[int, int, float]]],
        *,
        n_labels: int | None = None,
    ) -> None:
        """Build the kernel from per-state branch lists.

        Args:
            interface: ``φ(h)`` per state, shape ``(n_states,)`` or ``(n_states, n_features)``.
            branches: ``branches[h]`` lists ``(label, next_state, probability)``; the
                probabilities of each state sum to 1 (zero-probability branches are dropped).
            n_labels: size of the label space; default ``1 + max label``.
        """
        phi = _interface_iv(interface)
        n = phi.shape[0]
        if isinstance(branches, str | bytes) or len(branches) != n:
            raise ValueError(
                f"`branches` must list the branches of each of the {n} states (one entry per "
                f"`interface` row); found {len(branches)} entries"
            )
        src: list[int] = []
        lab: list[int] = []
        nxt: list[int] = []
        prob: list[float] = []
        for h, row in enumerate(branches):
            if len(row) == 0:
                raise ValueError(
                    f"`branches[{h}]` is empty: a branch kernel must give every state a law over "
                    f"branches; make a terminal state absorbing, e.g. [(stop_label, {h}, 1.0)]"
                )
            for item in row:
                if len(item) != 3:
                    raise ValueError(f"`branches[{h}]` entries must be (label, next_state, "
                                     f"probability); found {item!r}")
                ell, nx, q = item
                src.append(h)
                lab.append(_index(f"branches[{h}] label", ell))
                nxt.append(_index(f"branches[{h}] next_state", nx))
                prob.append(float(q))
        self._set(phi, np.array(src, dtype=np.int64), np.array(lab, dtype=np.int64),
                  np.array(nxt, dtype=np.int64), np.array(prob, dtype=np.float64), n_labels,
                  "branches")

    @classmethod
    def from_transitions(cls, interface: ArrayLike, transitions: ArrayLike) -> BranchKernel:
        """The kernel of a dense array ``transitions[h, ℓ, h'] = P(ℓ, h' | h)``.

        Args:
            interface: ``φ(h)``, shape ``(n_states,)`` or ``(n_states, n_features)``.
            transitions: shape ``(n_states, n_labels, n_states)``, each ``transitions[h]``
                summing to 1.
        """
        phi = _interface_iv(interface)
        try:
            T = np.array(transitions, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"`transitions` must be a numeric array; {exc}") from None
        n = phi.shape[0]
        if T.ndim != 3 or T.shape[0] != n or T.shape[2] != n or T.shape[1] == 0:
            raise ValueError(
                f"`transitions` must have shape (n_states, n_labels, n_states) = ({n}, L, {n}) "
                f"to match `interface`; found shape {T.shape}"
            )
        if not np.isfinite(T).all():
            raise ValueError("`transitions` must be finite (NaN or inf found)")
        h, ell, nx = np.nonzero(T)
        self = cls.__new__(cls)
        self._set(phi, h.astype(np.int64), ell.astype(np.int64), nx.astype(np.int64),
                  T[h, ell, nx], T.shape[1], "transitions", row_sums=T.sum(axis=(1, 2)))
        return self

    @classmethod
    def from_counts(
        cls, interface: ArrayLike, counts: ArrayLike, *, absorbing_label: int | None = None
    ) -> BranchKernel:
        """The empirical kernel of logged branch counts ``counts[h, ℓ, h']``.

        Each state's counts are normalised. A state with no logged branch (a terminal history,
        or one never left in the logs) is made absorbing with ``absorbing_label``; without it,
        such a state is an error.

        Args:
            interface: ``φ(h)``, shape ``(n_states,)`` or ``(n_states, n_features)``.
            counts: non-negative counts (or weights), shape ``(n_states, n_labels, n_states)``.
            absorbing_label: the stop label given to states without a logged branch.
        """
        try:
            C = np.array(counts, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"`counts` must be a numeric array; {exc}") from None
        if C.ndim != 3 or C.shape[0] != C.shape[2]:
            raise ValueError(f"`counts` must have shape (n_states, n_labels, n_states); found "
                             f"{C.shape}")
        if not np.isfinite(C).all() or (C < 0).any():
            raise ValueError("`counts` must be finite and non-negative")
        totals = C.sum(axis=(1, 2))
        empty = np.flatnonzero(totals == 0)
        if empty.size:
            if absorbing_label is None:
                raise ValueError(
                    f"`counts` has no logged branch for state(s) {empty[:5].tolist()}; pass "
                    "`absorbing_label=` to make them absorbing (terminal histories)"
                )
            ell = _index("absorbing_label", absorbing_label)
            if ell >= C.shape[1]:
                raise ValueError(f"`absorbing_label` must be < n_labels = {C.shape[1]}; found "
                                 f"{ell}")
            C[empty, ell, empty] = 1.0
            totals[empty] = 1.0
        return cls.from_transitions(interface, C / totals[:, None, None])

    def _set(self, phi: FloatArray, src: IntArray, lab: IntArray, nxt: IntArray,
             prob: FloatArray, n_labels: int | None, name: str,
             row_sums: FloatArray | None = None) -> None:
        n = phi.shape[0]
        if not np.isfinite(prob).all():
            raise ValueError(f"`{name}` probabilities must be finite (NaN or inf found)")
        if (prob < 0).any():
            k = int(np.argmax(prob < 0))
            raise ValueError(f"`{name}` probabilities must be non-negative; found {prob[k]} at "
                             f"state {src[k]}")
        if nxt.size and nxt.max() >= n:
            k = int(np.argmax(nxt >= n))
            raise ValueError(f"`{name}` next states must be in 0..{n - 1}; found {nxt[k]} at "
                             f"state {src[k]}")
        L = int(lab.max()) + 1 if n_labels is None and lab.size else n_labels
        if L is None or isinstance(L, bool) or not isinstance(L, int | np.integer) or L < 1:
            raise ValueError(f"`n_labels` must be a positive int; found {n_labels!r}")
        if lab.size and lab.max() >= L:
            raise ValueError(f"`{name}` labels must be < n_labels = {L}; found {lab.max()}")
        sums = np.bincount(src, weights=prob, minlength=n) if row_sums is None else row_sums
        off = np.flatnonzero(np.abs(sums - 1.0) > _STOCHASTIC_ATOL)
        if off.size:
            h = int(off[0])
            raise ValueError(
                f"`{name}` is not stochastic: the branch probabilities of state {h} sum to "
                f"{sums[h]!r}, not 1 (each state needs a probability law over (label, next "
                "state) branches; make terminal states absorbing)"
            )
        keep = prob > 0
        src, lab, nxt, prob = src[keep], lab[keep], nxt[keep], prob[keep]
        order = np.argsort(src, kind="stable")
        src, lab, nxt, prob = src[order], lab[order], nxt[order], prob[order]
        # Exactly stochastic rows keep the transport problems balanced to the last bit.
        prob = prob / np.bincount(src, weights=prob, minlength=n)[src]
        object.__setattr__(self, "interface", _readonly(phi))
        object.__setattr__(self, "source", _readonly(src))
        object.__setattr__(self, "label", _readonly(lab))
        object.__setattr__(self, "target", _readonly(nxt))
        object.__setattr__(self, "probability", _readonly(prob))
        object.__setattr__(self, "n_labels", int(L))

    @property
    def n_states(self) -> int:
        return int(self.interface.shape[0])

    def transitions(self) -> FloatArray:
        """The dense array ``P(ℓ, h' | h)``, shape ``(n_states, n_labels, n_states)``."""
        T = np.zeros((self.n_states, self.n_labels, self.n_states))
        np.add.at(T, (self.source, self.label, self.target), self.probability)
        return T


def _index(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
        raise ValueError(f"`{name}` must be a non-negative int; found {v!r}")
    return int(v)


def _interface_iv(interface: ArrayLike) -> FloatArray:
    try:
        phi = np.array(interface, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"`interface` must be numeric, shape (n_states,) or (n_states, n_features); {exc}. "
            "For other interface values pass `interface_cost=` to controllability_distance"
        ) from None
    if phi.ndim == 1:
        phi = phi[:, None]
    if phi.ndim != 2 or phi.shape[0] == 0:
        raise ValueError(f"`interface` must have shape (n_states,) or (n_states, n_features) "
                         f"with n_states ≥ 1; found shape {np.shape(interface)}")
    if not np.isfinite(phi).all():
        raise ValueError("`interface` must be finite (NaN or inf found)")
    return phi


@dataclass(frozen=True, eq=False)
class _Operator:
    """``T_AB`` compiled for two kernels: every transport problem of one step, laid out flat.

    The lifted costs of all state pairs live in one buffer, pair after pair, so a step is one
    gather plus one network simplex per pair whose laws both have two or more branches.
    """

    shape: tuple[int, int]
    gamma: float
    beta: float
    interface_term: FloatArray      # (1−γ) d_Z, shape (n_A, n_B)
    label_term: FloatArray          # β d_L(ℓ_A, ℓ_B), flat, pair after pair
    successor_index: IntArray       # flat index of (h'_A, h'_B) into d.ravel()
    product_weight: FloatArray      # P_A(u|h_A) P_B(v|h_B), flat
    starts: IntArray                # first flat position of each pair
    buffer: FloatArray
    lp: list[tuple[int, FloatArray, FloatArray, FloatArray]] = field(repr=False)

    @property
    def n_lp(self) -> int:
        return len(self.lp)

    def __call__(self, d: FloatArray) -> FloatArray:
        buf = self.buffer
        np.take(d.ravel(), self.successor_index, out=buf)
        buf *= 1.0 - self.beta
        buf += self.label_term
        # The product coupling is the only coupling when either law is a point mass.
        W = np.add.reduceat(self.product_weight * buf, self.starts)
        if self.lp:
            solve = _emd_solver()
            for k, pa, pb, M in self.lp:
                W[k] = solve(pa, pb, M)[1]
        np.clip(W, 0.0, 1.0, out=W)
        out: FloatArray = self.interface_term + self.gamma * W.reshape(self.shape)
        return out


def _operator_iv(
    kernel_a: BranchKernel, kernel_b: BranchKernel, gamma: float, beta: float,
    label_cost: ArrayLike | None, interface_cost: ArrayLike | None,
) -> tuple[FloatArray, FloatArray]:
    for name, k in (("kernel_a", kernel_a), ("kernel_b", kernel_b)):
        if not isinstance(k, BranchKernel):
            raise ValueError(f"`{name}` must be a BranchKernel; found {type(k).__name__}")
    for name, v in (("gamma", gamma), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise ValueError(f"`{name}` must be a number; found {v!r}")
    if not 0 <= gamma < 1:
        raise ValueError(f"`gamma` (continuation weight γ) must be in [0, 1); found {gamma!r}")
    if not 0 < beta <= 1:
        raise ValueError(f"`beta` (label weight β) must be in (0, 1]; found {beta!r}")
    nA, nB = kernel_a.n_states, kernel_b.n_states
    if label_cost is None:
        if kernel_a.n_labels != kernel_b.n_labels:
            raise ValueError(
                f"the kernels' label spaces differ ({kernel_a.n_labels} vs {kernel_b.n_labels} "
                "labels): give both kernels the same `n_labels=` if they share a label space, "
                "or pass `label_cost`, the matrix d_L(ℓ_A, ℓ_B)"
            )
        DL = 1.0 - np.eye(kernel_a.n_labels)
    else:
        DL = _cost_matrix("label_cost", label_cost, bounded=True)
        if DL.shape != (kernel_a.n_labels, kernel_b.n_labels):
            raise ValueError(
                f"`label_cost` must have shape (n_labels_a, n_labels_b) = "
                f"({kernel_a.n_labels}, {kernel_b.n_labels}); found {DL.shape}"
            )
    if interface_cost is None:
        fa, fb = kernel_a.interface.shape[1], kernel_b.interface.shape[1]
        if fa != fb:
            raise ValueError(
                f"the kernels' interfaces live in different spaces ({fa} vs {fb} features): "
                "pass `interface_cost`, the matrix d_Z(φ_A(h_A), φ_B(h_B)), or a common "
                "interface"
            )
        diff = kernel_a.interface[:, None, :] - kernel_b.interface[None, :, :]
        DZ = np.minimum(1.0, np.sqrt(np.einsum("ijk,ijk->ij", diff, diff)))
    else:
        DZ = _cost_matrix("interface_cost", interface_cost, bounded=True)
        if DZ.shape != (nA, nB):
            raise ValueError(f"`interface_cost` must have shape (n_states_a, n_states_b) = "
                             f"({nA}, {nB}); found {DZ.shape}")
    return DL, DZ


def _compile(
    kernel_a: BranchKernel, kernel_b: BranchKernel, gamma: float, beta: float,
    DL: FloatArray, DZ: FloatArray,
) -> _Operator:
    nA, nB = kernel_a.n_states, kernel_b.n_states
    kA = np.bincount(kernel_a.source, minlength=nA)
    kB = np.bincount(kernel_b.source, minlength=nB)
    offA = np.concatenate(([0], np.cumsum(kA)))
    offB = np.concatenate(([0], np.cumsum(kB)))
    # pair (i, j) in row-major order holds a kA[i] × kB[j] block, u-major within the block
    size = (kA[:, None] * kB[None, :]).ravel()
    starts = np.concatenate(([0], np.cumsum(size)[:-1]))
    pair = np.repeat(np.arange(nA * nB), size)
    local = np.arange(int(size.sum())) - starts[pair]
    i, j = pair // nB, pair % nB
    u = offA[i] + local // kB[j]
    v = offB[j] + local % kB[j]
    succ = kernel_a.target[u] * nB + kernel_b.target[v]
    label_term = beta * DL[kernel_a.label[u], kernel_b.label[v]]
    weight = kernel_a.probability[u] * kernel_b.probability[v]
    buffer = np.empty(succ.size)
    lp = []
    for k in np.flatnonzero((kA[:, None] > 1) & (kB[None, :] > 1)).tolist():
        a, b = divmod(k, nB)
        s0 = int(starts[k])
        lp.append((k, kernel_a.probability[offA[a]:offA[a + 1]],
                   kernel_b.probability[offB[b]:offB[b + 1]],
                   buffer[s0:s0 + int(size[k])].reshape(int(kA[a]), int(kB[b]))))
    return _Operator((nA, nB), float(gamma), float(beta), (1.0 - gamma) * DZ, label_term,
                     succ.astype(np.intp), weight, starts.astype(np.intp), buffer, lp)


def controllability_operator(
    kernel_a: BranchKernel,
    kernel_b: BranchKernel,
    d: ArrayLike,
    *,
    gamma: float,
    beta: float,
    label_cost: ArrayLike | None = None,
    interface_cost: ArrayLike | None = None,
) -> FloatArray:
    """One application of the controllability operator ``T_AB`` ([LBC] Definition 8).

    ``(T_AB d)(h_A, h_B) = (1−γ) d_Z(φ_A(h_A), φ_B(h_B)) + γ W_d̄(P_A(·|h_A), P_B(·|h_B))``
    (eq. 17) with ``d̄ = β d_L(ℓ_A, ℓ_B) + (1−β) d(h'_A, h'_B)`` (eq. 16). Arguments as in
    ``controllability_distance``; ``d`` has shape ``(n_states_a, n_states_b)`` with values in
    ``[0, 1]``.
    """
    DL, DZ = _operator_iv(kernel_a, kernel_b, gamma, beta, label_cost, interface_cost)
    D = _cost_matrix("d", d, bounded=True)
    if D.shape != (kernel_a.n_states, kernel_b.n_states):
        raise ValueError(f"`d` must have shape (n_states_a, n_states_b) = "
                         f"({kernel_a.n_states}, {kernel_b.n_states}); found {D.shape}")
    return _compile(kernel_a, kernel_b, gamma, beta, DL, DZ)(D)


@dataclass(frozen=True, eq=False)
class ControllabilityResult:
    """The recursive controllability distance ``d†_AB`` and the checks of Theorem 4.

    ``T_AB`` is monotone (a pointwise larger ``d`` gives a larger transport cost), so the
    iterates from ``d ≡ 0`` increase and those from ``d ≡ 1`` decrease to ``d†``:
    ``distance ≤ d† ≤ upper`` entrywise, up to rounding. Every iterate from ``d ≡ 0`` is a
    pseudometric when the ground costs are (the proof of Proposition 2), so ``distance`` is.

    Attributes:
        distance: ``d†_AB(h_A, h_B)``, the limit from ``d ≡ 0``; shape ``(n_a, n_b)``.
        upper: the limit from ``d ≡ 1``.
        iterations: operator applications until a step moved by at most ``tol``, from
            ``d ≡ 0`` and from ``d ≡ 1``.
        contraction_ratio: the largest measured ``‖d_{n+1} − d_n‖∞ / ‖d_n − d_{n−1}‖∞`` over
            both runs (steps with ``‖d_n − d_{n−1}‖∞ > 1e-6`` only, so that the ~1e-16
            rounding of the transport values moves the ratio by less than ~1e-9; where the
            modulus is attained exactly, e.g. by an absorbing pair, it can read
            ``γ(1−β)(1 + 1e-10)``); NaN when no step was that large.
        bound: the contraction modulus of Theorem 4, ``γ(1−β)``.
        sup_gap: ``‖distance − upper‖∞``, the uniqueness check (Table 18).
        converged: both runs reached ``tol`` within ``max_iter``.
        gamma, beta, tol: the settings.
        n_transport: transport problems solved by the network simplex over both runs (point
            masses are solved in closed form and not counted).
    """

    distance: FloatArray
    upper: FloatArray
    iterations: tuple[int, int]
    contraction_ratio: float
    bound: float
    sup_gap: float
    converged: bool
    gamma: float
    beta: float
    tol: float
    n_transport: int

    def whole_system(
        self,
        initial_a: ArrayLike,
        initial_b: ArrayLike,
        *,
        weights: ArrayLike | None = None,
        uniform: bool = False,
    ) -> float:
        """Whole-system controllability ``C(S_A, S_B; ρ)`` ([LBC] Definition 10, eq. 18).

        ``E_{c∼ρ}[W_{d†}(ι_A(·|c), ι_B(·|c))]``: the initial-history laws are coupled within
        each task context, never across.

        Args:
            initial_a, initial_b: ``ι_A(·|c)`` and ``ι_B(·|c)``, shape ``(n_contexts,
                n_states)``, one law over the kernel's states per context (a 1-D array is
                one context).
            weights: ``ρ`` over contexts, uniform when ``None``.
            uniform: the uniform version ``C^∞``: the largest value over contexts of positive
                weight instead of the mean.
        """
        A = np.atleast_2d(np.asarray(initial_a, dtype=np.float64))
        B = np.atleast_2d(np.asarray(initial_b, dtype=np.float64))
        n_a, n_b = self.distance.shape
        if A.ndim != 2 or A.shape[1] != n_a:
            raise ValueError(f"`initial_a` must have shape (n_contexts, {n_a}); found {A.shape}")
        if B.shape != (A.shape[0], n_b):
            raise ValueError(f"`initial_b` must have shape ({A.shape[0]}, {n_b}), one law per "
                             f"context of `initial_a`; found {B.shape}")
        rho = _weights("weights", weights, A.shape[0])
        values = np.empty(A.shape[0])
        solve = _emd_solver()
        for c in range(A.shape[0]):
            wa = _weights(f"initial_a[{c}]", A[c], n_a)
            wb = _weights(f"initial_b[{c}]", B[c], n_b)
            ia, ib = np.flatnonzero(wa), np.flatnonzero(wb)
            M = np.ascontiguousarray(self.distance[np.ix_(ia, ib)])
            values[c] = solve(wa[ia], wb[ib], M)[1]
        if uniform:
            return float(values[rho > 0].max())
        return float(rho @ values)


def controllability_distance(
    kernel_a: BranchKernel,
    kernel_b: BranchKernel,
    *,
    gamma: float,
    beta: float,
    label_cost: ArrayLike | None = None,
    interface_cost: ArrayLike | None = None,
    tol: float = 1e-9,
    max_iter: int = 1000,
) -> ControllabilityResult:
    """The recursive controllability distance ``d†_AB`` ([LBC] Definitions 8-9, Theorem 4).

    Iterates ``T_AB`` (eq. 17, lifted cost eq. 16) with exact optimal transport from
    ``d ≡ 0`` and from ``d ≡ 1`` until a step moves by at most ``tol`` in the sup norm. By
    Theorem 4 the operator contracts with modulus ``γ(1−β)`` and both runs reach the same
    fixed point; the result reports the measured ratio and the gap so that this is checked,
    not assumed ([LBC] Appendix F.7, Table 18). The error of either limit is at most
    ``tol · γ(1−β) / (1 − γ(1−β))``. One step solves one transport problem per pair of states
    whose branch laws both have two or more branches.

    Distances of a panel of systems form one pseudometric when the kernels share the label
    space and the interface space (Proposition 2): ``d†_AB`` is then symmetric
    (``d†_BA = d†_ABᵀ``), zero on ``d†_AA``'s diagonal and satisfies the triangle inequality
    across systems.

    Args:
        kernel_a, kernel_b: ``P_A`` and ``P_B`` with interfaces ``φ_A``, ``φ_B``.
        gamma: the continuation weight ``γ ∈ [0, 1)``.
        beta: the label weight ``β ∈ (0, 1]``.
        label_cost: ``d_L(ℓ_A, ℓ_B)`` in ``[0, 1]``, shape ``(n_labels_a, n_labels_b)``;
            default the discrete metric ``1{ℓ_A ≠ ℓ_B}`` on a shared label space.
        interface_cost: ``d_Z(φ_A(h_A), φ_B(h_B))`` in ``[0, 1]``, shape
            ``(n_states_a, n_states_b)``; default the truncated Euclidean metric
            ``min(1, ‖φ_A(h_A) − φ_B(h_B)‖₂)`` on the kernels' interface values.
        tol: stop a run when ``‖d_{n+1} − d_n‖∞ ≤ tol``.
        max_iter: the most operator applications per run.

    Returns:
        A ``ControllabilityResult``.

    Raises:
        ValueError: ``γ`` or ``β`` out of range, costs outside ``[0, 1]`` or NaN, or kernels
            whose label or interface spaces differ without an explicit cost.
    """
    DL, DZ = _operator_iv(kernel_a, kernel_b, gamma, beta, label_cost, interface_cost)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not (
        math.isfinite(tol) and tol > 0
    ):
        raise ValueError(f"`tol` must be a positive number; found {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"`max_iter` must be a positive int; found {max_iter!r}")
    T = _compile(kernel_a, kernel_b, gamma, beta, DL, DZ)
    shape = (kernel_a.n_states, kernel_b.n_states)
    ratio = -math.inf
    iterations = []
    limits = []
    converged = True
    for start in (0.0, 1.0):
        d = np.full(shape, start)
        prev_step = math.inf
        n = 0
        done = False
        while n < max_iter:
            new = T(d)
            n += 1
            step = float(np.max(np.abs(new - d)))
            if _RATIO_FLOOR < prev_step < math.inf:
                ratio = max(ratio, step / prev_step)
            d, prev_step = new, step
            if step <= tol:
                done = True
                break
        converged &= done
        iterations.append(n)
        limits.append(_readonly(d))
    bound = float(gamma) * (1.0 - float(beta))
    return ControllabilityResult(
        distance=limits[0], upper=limits[1], iterations=(iterations[0], iterations[1]),
        contraction_ratio=ratio if ratio > -math.inf else math.nan, bound=bound,
        sup_gap=float(np.max(np.abs(limits[0] - limits[1]))), converged=bool(converged),
        gamma=float(gamma), beta=float(beta), tol=float(tol),
        n_transport=T.n_lp * (iterations[0] + iterations[1]),
    )


# ---------------------------------------------------------------------------------------------
# The contextwise controllability radius (Definition 11, Appendix F.6)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ContextwiseCmResult:
    """The contextwise controllability radius ``C_M^ρ`` and its essential-supremum form.

    When the entry term was bracketed (``entry_reference``), ``low`` and ``high`` are its two
    ends; otherwise they are equal and ``value`` is the radius.

    Attributes:
        low, high: ``C_M^ρ`` with the entry term at its lower and upper bracket.
        sup_low, sup_high: the essential-supremum form: the largest bracket
            ``λ_in d_in + (1−λ_in) d_out`` over contexts of positive weight and over the
            support of the optimal entry coupling (for contexts with several entries: the
            coupling POT returns; another optimal coupling can give another supremum).
        per_context_low, per_context_high: the transport value per context.
        lambda_in: ``λ_in``.
        n_contexts: number of contexts.
        bracketed: the entry term was bracketed from distances to a reference.
    """

    low: float
    high: float
    sup_low: float
    sup_high: float
    per_context_low: FloatArray
    per_context_high: FloatArray
    lambda_in: float
    n_contexts: int
    bracketed: bool

    @property
    def value(self) -> float:
        """``C_M^ρ``; only identified when the entry distances were given, not bracketed."""
        if self.bracketed:
            raise ValueError(
                "the entry term was bracketed from distances to the reference, so C_M is only "
                f"known to lie in [{self.low:.6g}, {self.high:.6g}]: read `low` and `high`"
            )
        return self.low

    @property
    def sup(self) -> float:
        """The essential-supremum form; only identified when not bracketed."""
        if self.bracketed:
            raise ValueError("the entry term was bracketed: read `sup_low` and `sup_high`")
        return self.sup_low


def _per_context(name: str, x: Any) -> list[FloatArray]:
    """Per-context matrices from a 1-D array (one entry each) or a sequence of 2-D matrices."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 1:
        mats = [np.array([[v]]) for v in arr]
    elif arr is not None and arr.ndim == 3:
        mats = list(arr)
    elif isinstance(x, Sequence) and not isinstance(x, str | bytes) and (
            arr is None or arr.ndim != 2):
        mats = [np.atleast_2d(np.asarray(m, dtype=np.float64)) for m in x]
    else:
        raise ValueError(
            f"`{name}` must be a 1-D array (one distance per context) or a sequence of 2-D "
            f"matrices (entries of A × entries of B, per context); found shape {np.shape(x)}"
        )
    if not mats:
        raise ValueError(f"`{name}` holds no context; pass at least one")
    out = []
    for c, m in enumerate(mats):
        if m.ndim != 2 or 0 in m.shape:
            raise ValueError(f"`{name}[{c}]` must be a non-empty 2-D matrix; found shape "
                             f"{m.shape}")
        if not np.isfinite(m).all():
            raise ValueError(f"`{name}[{c}]` must be finite (NaN or inf found); drop the "
                             "contexts a system did not run instead")
        if (m < 0).any():
            raise ValueError(f"`{name}[{c}]` must be non-negative; found {m[m < 0][0]}")
        out.append(m)
    return out


def _per_context_vectors(name: str, x: Any, n_ctx: int) -> list[FloatArray]:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 1:
        vecs = [arr[c:c + 1] for c in range(arr.shape[0])]
    elif arr is not None and arr.ndim == 2:
        vecs = list(arr)
    elif isinstance(x, Sequence) and not isinstance(x, str | bytes):
        vecs = [np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in x]
    else:
        raise ValueError(f"`{name}` must hold one distance to the reference per context (or "
                         f"per entry of each context); found shape {np.shape(x)}")
    if len(vecs) != n_ctx:
        raise ValueError(f"`{name}` must cover the {n_ctx} contexts of `exit_distance`; found "
                         f"{len(vecs)}")
    for c, v in enumerate(vecs):
        if v.ndim != 1 or not np.isfinite(v).all() or (v < 0).any():
            raise ValueError(f"`{name}[{c}]` must be finite non-negative distances; found {v}")
    return vecs


def contextwise_cm(
    exit_distance: ArrayLike | Sequence[ArrayLike],
    entry_distance: ArrayLike | Sequence[ArrayLike] | None = None,
    *,
    entry_reference: tuple[Any, Any] | None = None,
    lambda_in: float = 0.5,
    a: Sequence[ArrayLike | None] | None = None,
    b: Sequence[ArrayLike | None] | None = None,
    weights: ArrayLike | None = None,
) -> ContextwiseCmResult:
    """The contextwise controllability radius ``C_M^ρ(A, B)`` ([LBC] Definition 11, F.6).

    ``C_M^ρ = E_{c∼ρ} inf_{Λ_c ∈ Π(η_A^c, η_B^c)} ∫ [λ_in d_B(ψ_A^in(h_A), ψ_B^in(h_B))
    + (1−λ_in) W_{d_M}(Q_A^M(·|h_A), Q_B^M(·|h_B))] dΛ_c`` — eq. 19 with the coupling restricted
    to the task diagonal. With one entry per system and task (Appendix F.6) it is
    ``mean_t[λ_in d(entry_A, entry_B) + (1−λ_in) d(exit_A, exit_B)]``.

    Where a direct entry distance is not stored, pass each system's distance to the reference
    entry as ``entry_reference=(e_A, e_B)``: by the triangle inequality the entry term lies in
    ``[|e_A − e_B|, e_A + e_B]`` and both ends are reported (``low``, ``high``).

    Args:
        exit_distance: per context, ``W_{d_M}`` between the exit laws: a 1-D array (one entry
            per system and context), or a sequence of ``(n_A^c, n_B^c)`` matrices over the
            context's entries of A and of B.
        entry_distance: ``d_B`` between the entries, in the layout of ``exit_distance`` (or a
            scalar for every context, e.g. ``0.0`` when the entry is shared).
        entry_reference: ``(e_A, e_B)``, the distances of each entry to the reference, per
            context (vectors over the entries when a context has several); instead of
            ``entry_distance``.
        lambda_in: the entry weight ``λ_in ∈ (0, 1)``; 0.5 as in Appendix F.6.
        a, b: per context, the weights of the entries of A and of B (``η_A^c``, ``η_B^c``);
            uniform when ``None``.
        weights: ``ρ`` over contexts; uniform when ``None``.

    Returns:
        A ``ContextwiseCmResult``.
    """
    if isinstance(lambda_in, bool) or not isinstance(lambda_in, int | float) or not (
        0 < lambda_in < 1
    ):
        raise ValueError(f"`lambda_in` must be in (0, 1) (Definition 11); found {lambda_in!r}")
    exits = _per_context("exit_distance", exit_distance)
    n_ctx = len(exits)
    if (entry_distance is None) == (entry_reference is None):
        raise ValueError("pass exactly one of `entry_distance` (d_B between entries; 0.0 when "
                         "shared) and `entry_reference` ((e_A, e_B), distances to a reference)")
    if entry_distance is not None:
        entry: Any = entry_distance
        if np.ndim(entry) == 0:
            e = float(entry)
            if not (math.isfinite(e) and e >= 0):
                raise ValueError(f"`entry_distance` must be finite and non-negative; found {e}")
            lows = highs = [np.full_like(m, e) for m in exits]
        else:
            lows = highs = _per_context("entry_distance", entry_distance)
            if len(lows) != n_ctx:
                raise ValueError(f"`entry_distance` must cover the {n_ctx} contexts of "
                                 f"`exit_distance`; found {len(lows)}")
    else:
        if not isinstance(entry_reference, tuple | list) or len(entry_reference) != 2:
            raise ValueError("`entry_reference` must be a pair (e_A, e_B)")
        eA = _per_context_vectors("entry_reference[0]", entry_reference[0], n_ctx)
        eB = _per_context_vectors("entry_reference[1]", entry_reference[1], n_ctx)
        lows, highs = [], []
        for c in range(n_ctx):
            lows.append(np.abs(eA[c][:, None] - eB[c][None, :]))
            highs.append(eA[c][:, None] + eB[c][None, :])
    for c in range(n_ctx):
        if lows[c].shape != exits[c].shape:
            raise ValueError(
                f"context {c}: the entry term has shape {lows[c].shape} but `exit_distance[{c}]` "
                f"has shape {exits[c].shape}; both range over the entries of A × entries of B"
            )
    rho = _weights("weights", weights, n_ctx)
    if a is not None and len(a) != n_ctx:
        raise ValueError(f"`a` must hold one weight vector per context ({n_ctx}); found {len(a)}")
    if b is not None and len(b) != n_ctx:
        raise ValueError(f"`b` must hold one weight vector per context ({n_ctx}); found {len(b)}")
    solve = _emd_solver()
    lam = float(lambda_in)
    per = np.empty((2, n_ctx))
    sups = np.empty((2, n_ctx))
    for c in range(n_ctx):
        nA, nB = exits[c].shape
        wa = _weights(f"a[{c}]", None if a is None else a[c], nA)
        wb = _weights(f"b[{c}]", None if b is None else b[c], nB)
        for end, entry in enumerate((lows[c], highs[c])):
            cost = lam * entry + (1.0 - lam) * exits[c]
            if nA == 1 or nB == 1:
                plan = wa[:, None] * wb[None, :]
                value = float(np.sum(plan * cost))
            else:
                plan, value = solve(wa, wb, np.ascontiguousarray(cost))
            per[end, c] = max(value, 0.0)
            sups[end, c] = float(cost[plan > 0].max())
    live = rho > 0
    return ContextwiseCmResult(
        low=float(rho @ per[0]), high=float(rho @ per[1]),
        sup_low=float(sups[0, live].max()), sup_high=float(sups[1, live].max()),
        per_context_low=_readonly(per[0].copy()), per_context_high=_readonly(per[1].copy()),
        lambda_in=lam, n_contexts=n_ctx, bracketed=entry_reference is not None,
    )


# ---------------------------------------------------------------------------------------------
# Fused Gromov–Wasserstein graph discrepancy (eq. 20)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FgwResult:
    """The fused Gromov–Wasserstein discrepancy ``d²_FGW(G, G')`` of eq. 20, from above.

    The objective is not convex in ``Γ``: each start reaches a stationary coupling, whose
    objective is an upper bound on the infimum. ``value`` is the smallest over the starts,
    recomputed from the coupling by eq. 20 and clipped at 0.

    Attributes:
        value: the upper bound on ``d²_FGW`` (eq. 20's right-hand side; not square-rooted).
        plan: the coupling ``Γ`` that attains it, shape ``(n, n')``.
        start_values: the objective reached from each start.
        lambda_g: ``λ_G``.
    """

    value: float
    plan: FloatArray
    start_values: FloatArray
    lambda_g: float


def _fgw_objective(C: FloatArray, R1: FloatArray, R2: FloatArray, G: FloatArray,
                   lam: float) -> float:
    """Eq. 20 at the coupling ``G``, with the quartic sum expanded through ``G``'s marginals."""
    p, q = G.sum(axis=1), G.sum(axis=0)
    quad = p @ (R1 * R1) @ p + q @ (R2 * R2) @ q - 2.0 * float(np.sum(G * (R1 @ G @ R2.T)))
    return float((1.0 - lam) * np.sum(C * G) + lam * quad)


def fgw_discrepancy(
    cost: ArrayLike,
    relation_a: ArrayLike,
    relation_b: ArrayLike,
    *,
    lambda_g: float,
    a: ArrayLike | None = None,
    b: ArrayLike | None = None,
    n_starts: int = 8,
    seed: int = 0,
) -> FgwResult:
    """The fused Gromov–Wasserstein graph discrepancy ([LBC] eq. 20), an upper bound.

    ``d²_FGW(G, G') = inf_{Γ ∈ Π(m, m')} {(1−λ_G) Σ C_ii' Γ_ii'
    + λ_G Σ |R^G_ij − R^G'_i'j'|² Γ_ii' Γ_jj'}`` (Vayer et al. 2019), solved by POT's conditional
    gradient (``ot.gromov.fused_gromov_wasserstein2``, square loss) from ``n_starts``
    couplings: the product ``m m'ᵀ``, the optimal coupling of the node costs alone, and
    random vertices of ``Π(m, m')`` drawn with ``seed``. The problem is not convex, so the
    best value found is an upper bound on the infimum; it is exact at ``λ_G = 0`` (plain
    optimal transport). It is not a metric in general (eq. 20's square is notational).

    Args:
        cost: ``C``, node costs (type, semantics, evidence identity, provenance), shape
            ``(n, n')``, non-negative.
        relation_a, relation_b: ``R^G`` ``(n, n)`` and ``R^G'`` ``(n', n')``, typed relational
            dissimilarities (need not be symmetric).
        lambda_g: the structure weight ``λ_G ∈ [0, 1]``.
        a, b: node masses ``m``, ``m'`` (importance weights), normalised to sum to 1;
            uniform when ``None``.
        n_starts: number of starting couplings, ≥ 1.
        seed: seeds the random starts.

    Returns:
        An ``FgwResult``.
    """
    C = _cost_matrix("cost", cost)
    n, m = C.shape
    R1 = _relation("relation_a", relation_a, n)
    R2 = _relation("relation_b", relation_b, m)
    if isinstance(lambda_g, bool) or not isinstance(lambda_g, int | float) or not (
        0 <= lambda_g <= 1
    ):
        raise ValueError(f"`lambda_g` (λ_G) must be in [0, 1]; found {lambda_g!r}")
    if isinstance(n_starts, bool) or not isinstance(n_starts, int) or n_starts < 1:
        raise ValueError(f"`n_starts` must be a positive int; found {n_starts!r}")
    wa, wb = _weights("a", a, n), _weights("b", b, m)
    lam = float(lambda_g)
    import ot

    solve = _emd_solver()
    if lam == 0.0:  # linear: exact, and POT's FGW divides by λ_G
        plan, _ = solve(wa, wb, np.ascontiguousarray(C))
        value = max(_fgw_objective(C, R1, R2, plan, 0.0), 0.0)
        return FgwResult(value, _readonly(plan), _readonly(np.full(n_starts, value)), lam)
    rng = np.random.default_rng(seed)
    starts = [wa[:, None] * wb[None, :], solve(wa, wb, np.ascontiguousarray(C))[0]]
    while len(starts) < n_starts:
        starts.append(solve(wa, wb, rng.random((n, m)))[0])
    values = np.empty(n_starts)
    best: tuple[float, FloatArray] | None = None
    for k, G0 in enumerate(starts[:n_starts]):
        _, log = ot.gromov.fused_gromov_wasserstein2(
            C, R1, R2, wa, wb, loss_fun="square_loss", alpha=lam, G0=G0, log=True)
        G = np.asarray(log["T"], dtype=np.float64)
        values[k] = max(_fgw_objective(C, R1, R2, G, lam), 0.0)
        if best is None or values[k] < best[0]:
            best = (float(values[k]), G)
    assert best is not None
    return FgwResult(best[0], _readonly(best[1]), _readonly(values), lam)


def _relation(name: str, R: ArrayLike, n: int) -> FloatArray:
    try:
        arr = np.array(R, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric matrix; {exc}") from None
    if arr.shape != (n, n):
        raise ValueError(f"`{name}` must have shape ({n}, {n}) to match `cost`; found "
                         f"{arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite (NaN or inf found)")
    return arr
