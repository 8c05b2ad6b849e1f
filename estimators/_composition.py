"""Composition, propagation and utility bounds of [LBC] (Theorem 2, Corollary 3, Theorem 3).

* **Composition** (Theorem 2, eq. 12), the **propagated window bound** (Corollary 3, eq. 14)
  and **utility stability** (Theorem 3, eq. 15).

Infinite constants follow the ``0·∞`` conventions of ``_amplify``: an absent term is
charged ``0`` by every amplifier, ``∞`` included; an infinite amplifier on any other path
gives ``∞``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ._amplification import BoolArray, FloatArray, Value, _amplify, _nonnegative, _out

_SUBSTITUTION_NOTE = (
    "eq. 14 contains the in-window errors ε_i..ε_j, so it is a substitution bound, not a "
    "fairness criterion ([LBC] Corollary 3): use the nuisance radius (eq. 3) to decide "
    "whether a comparison is fair."
)


@dataclass(frozen=True, eq=False)
class CompositionBound:
    """Theorem 2 ([LBC] eq. 12): ``W_{d_m}(ν_A,m, ν_B,m)`` bounded at every stage.

    Arrays have the stage axis first (``K`` stages) and any broadcast shape after it.

    Attributes:
        value: the bound at the last interface, ``m = K``.
        per_stage: the bound at every interface ``m = 1..K`` (shape ``(K, ...)``), from the
            recursion ``Δ_k ≤ ε_k + ξ_k + L_k Δ_{k−1}``, ``Δ_0 ≤ ε_0`` (eq. 13).
        contributions: shape ``(K + 1, ...)``: ``ε_0 Π_{j≤K} L_j`` and then
            ``(ε_k + ξ_k) Π_{j>k} L_j`` for ``k = 1..K``; they add up to ``value``.
        eps0, eps, L, xi: the inputs ``ε_0``, ``ε_1..ε_K``, ``L_1..L_K``, ``ξ_1..ξ_K``.
    """

    value: Value
    per_stage: FloatArray
    contributions: FloatArray
    eps0: Value
    eps: FloatArray
    L: FloatArray
    xi: FloatArray

    @property
    def non_expansive(self) -> bool:
        """Every ``L_k ≤ 1`` (Corollary 2): errors add and no stage amplifies them."""
        return bool((self.L <= 1).all())

    @property
    def additive(self) -> Value:
        """Corollary 2's bound ``ε_0 + Σ_k (ε_k + ξ_k)``, valid when ``non_expansive``."""
        return _out(np.asarray(self.eps0) + (self.eps + self.xi).sum(axis=0))


def _stages_iv(eps: ArrayLike, L: ArrayLike, xi: ArrayLike, eps0: ArrayLike,
               names: tuple[str, str, str, str], *, allow_empty: bool = False,
               ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    e_name, l_name, x_name, e0_name = names
    E = _nonnegative(e_name, eps)
    Lk = _nonnegative(l_name, L)
    X = _nonnegative(x_name, xi)
    E0 = _nonnegative(e0_name, eps0)
    if Lk.ndim == 0:
        raise ValueError(f"`{l_name}` must have one constant per stage (stage axis first); "
                         "found a scalar")
    K = Lk.shape[0]
    if K == 0 and not allow_empty:
        raise ValueError(f"`{l_name}` must hold at least one stage")
    if E.ndim == 0:
        E = np.broadcast_to(E, (K,))
    if X.ndim == 0:
        X = np.broadcast_to(X, (K,))
    for name, a in ((e_name, E), (x_name, X)):
        if a.shape[0] != K:
            raise ValueError(f"`{name}` must have one value per stage, the length of "
                             f"`{l_name}` ({K}); found {a.shape[0]}")
    try:
        tail = np.broadcast_shapes(E.shape[1:], Lk.shape[1:], X.shape[1:], E0.shape)
    except ValueError:
        raise ValueError(
            f"`{e_name}`, `{l_name}`, `{x_name}` (after the stage axis) and `{e0_name}` must "
            f"broadcast; found {E.shape}, {Lk.shape}, {X.shape}, {E0.shape}") from None
    full = (K, *tail)

    def stages(a: FloatArray) -> FloatArray:
        # trailing axes align from the right, behind the stage axis
        pad = (1,) * (len(tail) - (a.ndim - 1))
        return np.broadcast_to(a.reshape((K, *pad, *a.shape[1:])), full)

    return stages(E), stages(Lk), stages(X), np.broadcast_to(E0, tail)


def _chain(E: FloatArray, Lk: FloatArray, X: FloatArray, E0: FloatArray,
           ) -> tuple[FloatArray, FloatArray]:
    """Recursion eq. 13 and the per-source terms of eq. 12 (0·∞ by ``_amplify``'s rules)."""
    K = Lk.shape[0]
    per_stage = np.empty(Lk.shape)
    prev = np.asarray(E0, dtype=np.float64)
    for k in range(K):
        prev = E[k] + X[k] + _amplify(Lk[k], prev, prev > 0)
        per_stage[k] = prev
    contributions = np.empty((K + 1, *Lk.shape[1:]))
    sources = [E0] + [E[k] + X[k] for k in range(K)]
    for s, src in enumerate(sources):
        term = np.asarray(src, dtype=np.float64)
        for j in range(s, K):  # source s = 0 is ε_0, s = k ≥ 1 enters at stage k
            term = _amplify(Lk[j], term, term > 0)
        contributions[s] = term
    return per_stage, contributions


def composition_bound(
    eps: ArrayLike,
    *,
    L: ArrayLike,
    xi: ArrayLike = 0.0,
    eps0: ArrayLike = 0.0,
) -> CompositionBound:
    """Compositional substitution bound across ``K`` stages ([LBC] Theorem 2, eq. 12).

    ``W_{d_m}(ν_A,m, ν_B,m) ≤ ε_0 Π_{j=1}^m L_j + Σ_{k=1}^m (ε_k + ξ_k) Π_{j=k+1}^m L_j``
    for every ``m``, an empty product being 1, under Assumption 2 (local replacement error
    ``sup_z W(Q_A,k(·|z), Q_B,k(·|z)) ≤ ε_k`` on reachable states) and Assumption 3
    (``W(νQ_B,k, ν'Q_B,k) ≤ L_k W(ν, ν') + ξ_k`` on admissible laws). No ``L_k < 1`` is
    needed.

    Args:
        eps: ``ε_1..ε_K``, local replacement error per stage (stage axis first; trailing
            axes broadcast, e.g. one column per chain).
        L: ``L_1..L_K``, downstream stability constants.
        xi: ``ξ_1..ξ_K`` (or one number for every stage).
        eps0: ``ε_0 ≥ W_{d_0}(ν_A,0, ν_B,0)``, the initial mismatch.

    Returns:
        A ``CompositionBound``.
    """
    E, Lk, X, E0 = _stages_iv(eps, L, xi, eps0, ("eps", "L", "xi", "eps0"))
    per_stage, contributions = _chain(E, Lk, X, E0)
    ro = [np.array(a) for a in (per_stage, contributions, E, Lk, X)]
    for a in ro:
        a.flags.writeable = False
    return CompositionBound(value=_out(per_stage[-1]), per_stage=ro[0], contributions=ro[1],
                            eps0=_out(E0), eps=ro[2], L=ro[3], xi=ro[4])


@dataclass(frozen=True, eq=False)
class PropagatedBound:
    """Corollary 3 ([LBC] eq. 14): a window's substitution error at the pipeline's end.

    Attributes:
        value: ``ε_subst^global = L_{j+1:K}·window + downstream_slack``.
        window: the bound at the window's exit, ``ε_{i−1} Π_{k=i}^j L_k +
            Σ_{k=i}^j (ε_k + ξ_k) Π_{r=k+1}^j L_r``.
        downstream_gain: ``L_{j+1:K} = Π_{k=j+1}^K L_k`` (1 with no downstream stage).
        downstream_slack: ``Σ_{k=j+1}^K ξ_k Π_{r=k+1}^K L_r``.
        eps_entry, eps, L, xi, L_downstream, xi_downstream: the inputs.
        note: eq. 14 is a substitution bound, not a fairness criterion.
    """

    value: Value
    window: Value
    downstream_gain: Value
    downstream_slack: Value
    eps_entry: Value
    eps: FloatArray
    L: FloatArray
    xi: FloatArray
    L_downstream: FloatArray
    xi_downstream: FloatArray
    note: str = field(default=_SUBSTITUTION_NOTE)

    def substitutable(self, epsilon: float) -> bool | BoolArray:
        """``ε_subst^global ≤ ε``: the windows are ε-substitutable in the pipeline."""
        eps = _nonnegative("epsilon", epsilon)
        out = np.asarray(self.value) <= eps
        return bool(out) if out.ndim == 0 else out


def propagated_bound(
    eps: ArrayLike,
    *,
    L: ArrayLike,
    xi: ArrayLike = 0.0,
    eps_entry: ArrayLike = 0.0,
    L_downstream: ArrayLike = (),
    xi_downstream: ArrayLike = 0.0,
) -> PropagatedBound:
    """Propagated bound for a window of stages ``i..j`` ([LBC] Corollary 3, eq. 14).

    ``ε_subst^global = L_{j+1:K}[ε_{i−1} Π_{k=i}^j L_k + Σ_{k=i}^j (ε_k + ξ_k) Π_{r=k+1}^j L_r]
    + Σ_{k=j+1}^K ξ_k Π_{r=k+1}^K L_r``, with ``L_{j+1:K} = Π_{k=j+1}^K L_k``: systems A and B
    differ on stages ``i..j`` and share the stages after ``j``. It is Theorem 2's recursion
    with ``ε_k = 0`` downstream. A difference between the two systems' downstream stages
    must be bounded separately, propagated and added (use ``composition_bound``).

    Args:
        eps: ``ε_i..ε_j``, local replacement errors inside the window.
        L: ``L_i..L_j``; xi: ``ξ_i..ξ_j``.
        eps_entry: ``ε_{i−1} ≥ W_{d_{i−1}}(ν_A,i−1, ν_B,i−1)``.
        L_downstream: ``L_{j+1}..L_K`` (empty when the window ends the pipeline).
        xi_downstream: ``ξ_{j+1}..ξ_K`` (or one number for every downstream stage).

    Returns:
        A ``PropagatedBound``.
    """
    E, Lk, X, E0 = _stages_iv(eps, L, xi, eps_entry, ("eps", "L", "xi", "eps_entry"))
    window_stages, _ = _chain(E, Lk, X, E0)
    window = window_stages[-1]
    Ld = _nonnegative("L_downstream", L_downstream)
    if Ld.ndim == 0:
        raise ValueError("`L_downstream` must have one constant per downstream stage (stage "
                         "axis first); found a scalar")
    Kd = Ld.shape[0]
    if Kd == 0:
        Xd = np.zeros((0,))
        _nonnegative("xi_downstream", xi_downstream)
        if np.ndim(xi_downstream) and np.shape(xi_downstream)[0] != 0:
            raise ValueError("`xi_downstream` must be empty or a number when `L_downstream` "
                             "is empty")
        value = window
        gain = np.ones(window.shape)
        dslack = np.zeros(window.shape)
    else:
        zeros = np.zeros((Kd,))
        Ed, Ld, Xd, W0 = _stages_iv(zeros, Ld, xi_downstream, window,
                                    ("eps", "L_downstream", "xi_downstream", "eps_entry"))
        per_stage, _ = _chain(Ed, Ld, Xd, W0)
        value = per_stage[-1]
        gain = _inf_prod(Ld)
        _, dcontrib = _chain(Ed, Ld, Xd, np.zeros(W0.shape))
        dslack = dcontrib[1:].sum(axis=0)
    arrs = [np.array(a) for a in (E, Lk, X, Ld, Xd)]
    for a in arrs:
        a.flags.writeable = False
    return PropagatedBound(
        value=_out(np.asarray(value)), window=_out(np.asarray(window)),
        downstream_gain=_out(np.asarray(gain)), downstream_slack=_out(np.asarray(dslack)),
        eps_entry=_out(E0), eps=arrs[0], L=arrs[1], xi=arrs[2], L_downstream=arrs[3],
        xi_downstream=arrs[4])


def _inf_prod(L: FloatArray) -> FloatArray:
    zero = (L == 0).any(axis=0)
    with np.errstate(invalid="ignore"):
        p = np.prod(L, axis=0)
    return np.where(zero, 0.0, p)


@dataclass(frozen=True)
class UtilityBound:
    """Theorem 3 ([LBC] eq. 15): ``|E_{ν_A,K}[U] − E_{ν_B,K}[U]| ≤ value``.

    Attributes:
        value: ``L_U · distance``.
        L_U: Lipschitz constant of ``U`` with respect to ``d_K``.
        distance: the bound on ``W_{d_K}(ν_A,K, ν_B,K)`` it multiplies.
    """

    value: Value
    L_U: Value
    distance: Value


def utility_bound(
    distance: CompositionBound | PropagatedBound | ArrayLike, *, L_U: ArrayLike,
) -> UtilityBound:
    """Utility stability ([LBC] Theorem 3, eq. 15).

    ``|E_{ν_A,K}[U] − E_{ν_B,K}[U]| ≤ L_U·W_{d_K}(ν_A,K, ν_B,K)`` by Kantorovich–Rubinstein
    duality, for any ``U`` that is ``L_U``-Lipschitz in ``d_K``; with Theorem 2 at ``m = K``
    this is ``L_U[ε_0 Π_j L_j + Σ_k (ε_k + ξ_k) Π_{j>k} L_j]``.

    Args:
        distance: a bound on the terminal Wasserstein distance: a ``CompositionBound``
            (its ``value``, ``m = K``), a ``PropagatedBound`` or a number/array.
        L_U: ``L_U ≥ 0``.

    Returns:
        A ``UtilityBound``.
    """
    if isinstance(distance, CompositionBound | PropagatedBound):
        d = _nonnegative("distance", distance.value)
    else:
        d = _nonnegative("distance", distance)
    LU = _nonnegative("L_U", L_U)
    try:
        np.broadcast_shapes(d.shape, LU.shape)
    except ValueError:
        raise ValueError(f"`distance` {d.shape} and `L_U` {LU.shape} must broadcast") from None
    value = _amplify(LU, d, d > 0)
    return UtilityBound(value=_out(value), L_U=_out(LU), distance=_out(d))
