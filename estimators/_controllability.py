"""The recursive controllability distance of [LBC] (Definitions 8-10, Theorem 4).

* ``controllability_distance`` iterates the controllability operator of Definition 8,

  ``(T_AB d)(h_A, h_B) = (1−γ) d_Z(φ_A(h_A), φ_B(h_B)) + γ W_d̄(P_A(·|h_A), P_B(·|h_B))`` (eq. 17)

  with the lifted branch cost
  ``d̄((ℓ_A, h'_A), (ℓ_B, h'_B)) = β d_L(ℓ_A, ℓ_B) + (1−β) d(h'_A, h'_B)`` (eq. 16), on finite
  branch kernels ``P(ℓ, h' | h)`` (eq. 7, a ``BranchKernel``) to its unique fixed point
  ``d†_AB`` (Theorem 4; Definition 9). It is run from ``d ≡ 0`` and from ``d ≡ 1`` and reports
  the iterations, the measured contraction ratio against the bound ``γ(1−β)`` and the sup gap
  between the two limits (the checks of Appendix F.7, Table 18).
* ``ControllabilityResult.whole_system`` is the whole-system controllability of
  Definition 10 (eq. 18).

POT is imported only when a transport problem is solved, so importing this module is cheap.

Examples:
    >>> from agentlog.estimators import distance
    >>> # One absorbing history each, same label, interfaces 0 and 1 apart: the fixed point
    >>> # solves d = (1−γ)·1 + γ(1−β)·d, so d† = 0.1 / (1 − 0.45) at γ = 0.9, β = 0.5.
    >>> a = distance.BranchKernel([0.0], [[(0, 0, 1.0)]])
    >>> b = distance.BranchKernel([1.0], [[(0, 0, 1.0)]])
    >>> r = distance.controllability_distance(a, b, gamma=0.9, beta=0.5)
    >>> round(float(r.distance[0, 0]), 6), r.bound, r.converged
    (0.181818, 0.45, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._wasserstein import FloatArray, _cost_matrix, _emd_solver, _readonly, _weights

IntArray = NDArray[np.int64]

# Successive differences below this are not used for the contraction ratio: the transport
# values carry rounding of order 1e-16, which would distort ratios of smaller steps.
_RATIO_FLOOR = 1e-6
_STOCHASTIC_ATOL = 1e-9


@dataclass(frozen=True, init=False, eq=False)
class BranchKernel:
    """A finite branch kernel ``P(ℓ, h' | h)`` ([LBC] eq. 7) with an interface ``φ(h)``.

    States are the histories ``h = 0..n_states−1``. Each state has an interface value
    ``φ(h)`` (Definition 3; a number or a vector) and a law over branches ``(ℓ, h')``: a label
    ``ℓ ∈ {0..n_labels−1}`` of the shared label space and a next history ``h'``. A history that
    terminates is absorbing (Definition 2): give it one branch to itself with a stop label,
    ``[(stop, h, 1.0)]``.

    Examples:
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
