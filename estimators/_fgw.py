"""The fused Gromov–Wasserstein graph discrepancy of [LBC] eq. 20.

* ``fgw_discrepancy`` is the fused Gromov–Wasserstein graph discrepancy of eq. 20
  (``ot.gromov.fused_gromov_wasserstein2``), an upper bound from several starts.

POT is imported inside the function that uses it, so importing this module is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._wasserstein import FloatArray, _cost_matrix, _emd_solver, _readonly, _weights


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
