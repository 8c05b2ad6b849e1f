"""The contextwise controllability radius ``C_M^ρ`` ([LBC] Definition 11, Appendix F.6).

* ``contextwise_cm`` is the task-matched controllability radius ``C_M^ρ`` (Definition 11 with
  the coupling restricted to the task diagonal; Appendix F.6), with the entry term bracketed
  by ``|e_A − e_B|`` and ``e_A + e_B`` when only distances to a reference are stored.

POT is imported only when a transport problem is solved, so importing this module is cheap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._wasserstein import FloatArray, _emd_solver, _readonly, _weights


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
