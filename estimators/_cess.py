"""CESS: Causal Evidence Selection Correction of a candidate-pool conclusion ([SSC]).

A trajectory opens documents ``J_1..J_T`` (``T ≤ K``) from a pool of ``N`` candidates whose
evidence scores ``Y_i ∈ [L, U]`` are seen only when opened. The pool target is
``θ* = (1/N) Σ_i Y_i`` ([SSC] eq. 1). With the logged probability ``p_t`` of the chosen
document, the survival probability ``s_t = Π_{k≤t}(1 − c_k)`` (``c_1 = 0``, eq. 5) and
outcome-model predictions ``m_i`` fixed before the search (``m̄`` their pool mean):

* Opened Mean       ``(1/T) Σ_t Y_{J_t}``
* outcome regression ``m̄``
* sequential IPW    ``(1/K) Σ_t Y_{J_t} / (N p_t s_t)``
* raw DR (eq. 6)    ``m̄ + (1/K) Σ_t (Y_{J_t} − m_{J_t}) / (N p_t s_t)`` — design-unbiased for
  θ* (Theorem 1) whenever the logged probabilities are the controller's and overlap holds
* CESS (eq. 9)      ``Π[m̄ + λ(raw − m̄)]``; clip-then-shrink (eq. 13) ``Π[m̄ + λ(Π[raw] − m̄)]``;
  opened anchor (eq. 12) ``Π[ō + λ(Π[raw] − ō)]``; ``Π`` clips to ``[L, U]``.

Everything is vectorised over trajectories (rows) and rounds (columns); rounds a trajectory
did not reach are NaN. ``K`` (``budget``) is the maximum budget, also for a trajectory that
stopped early.

Example:
    >>> import numpy as np
    >>> from agentlog.estimators import cess
    >>> r = cess.estimate([0.5, -0.2], [0.1, 0.2], [1.0, 0.8], [0.1, 0.0], 0.05, 10,
    ...                   budget=2, lam=0.5)
    >>> round(float(r.dr_raw[0]), 6), round(float(r.estimate[0]), 6)
    (0.1875, 0.11875)
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning
from agentlog.context import block_async_signals

Order = Literal["shrink-then-clip", "clip-then-shrink"]
Anchor = Literal["prediction", "opened"]
FloatArray = NDArray[np.float64]

THEOREM_2_NOTE = (
    "CESS estimates the candidate-pool conclusion θ*, which is the same under every supported "
    "search policy; a difference of two CESS estimates is therefore not a policy effect "
    "([SSC] Theorem 2). Measure policy effects with paired interventions "
    "(cess.policy_effects)."
)


def inputs_hash(*arrays: Any, config: str = "") -> str:
    """SHA-256 over the shape and float64 bytes of every input and a configuration string."""
    h = hashlib.sha256(config.encode())
    for a in arrays:
        arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(arr.shape).encode())
        h.update(arr.data)  # the buffer itself: no copy of large inputs
    return h.hexdigest()


# Inputs past this many bytes are hashed on a second thread while the estimators run.
_HASH_BESIDE_BYTES = 1 << 24


def _hash_beside(*arrays: FloatArray, config: str) -> Callable[[], str]:
    """``inputs_hash(*arrays, config=config)``, computed beside the estimators when large.

    hashlib releases the GIL over large buffers and numpy's loops do too, so on a second
    core the SHA-256 of 10⁶ × 10 rounds (~300 MB) overlaps the numpy work instead of
    adding to it. The value is the same either way; call the returned function for it.
    """
    if sum(a.nbytes for a in arrays) < _HASH_BESIDE_BYTES:
        value = inputs_hash(*arrays, config=config)
        return lambda: value
    out: list[str] = []

    def work() -> None:
        block_async_signals()  # a Ctrl-C during the estimate goes to the main thread
        out.append(inputs_hash(*arrays, config=config))

    worker = threading.Thread(target=work, name="agentlog-cess-inputs-hash", daemon=True)
    worker.start()

    def result() -> str:
        worker.join()  # the hash of validated float64 arrays always finishes
        # An exception on the worker left nothing: hashing again raises it here.
        return out[0] if out else inputs_hash(*arrays, config=config)

    return result


@dataclass(frozen=True)
class CessResult:
    """Per-trajectory CESS estimates and diagnostics (arrays of shape ``(n_trajectories,)``).

    Attributes:
        opened_mean: mean of the opened evidence scores (NaN with no opened document).
        outcome_regression: ``m̄``.
        ipw: sequential IPW ``(1/K) Σ Y/(N p s)``.
        dr_raw: [SSC] eq. 6, unclipped.
        estimate: the requested CESS variant (eq. 9, 12 or 13).
        ess: effective sample size of the weights ``w_t = 1/(N p_t s_t)``: ``(Σw)²/Σw²``.
        max_weight: largest ``w_t``.
        min_ps: smallest ``p_t s_t``.
        n_rounds: observed rounds ``T``.
        support_low, support_high: the eq. 10 interval when ``rho`` was given, else NaN.
    """

    opened_mean: FloatArray
    outcome_regression: FloatArray
    ipw: FloatArray
    dr_raw: FloatArray
    estimate: FloatArray
    ess: FloatArray
    max_weight: FloatArray
    min_ps: FloatArray
    n_rounds: NDArray[np.int64]
    support_low: FloatArray
    support_high: FloatArray
    lam: FloatArray
    budget: int
    order: str
    anchor: str
    bounds: tuple[float, float]
    inputs_hash: str
    note: str = field(default=THEOREM_2_NOTE)

    def __len__(self) -> int:
        return int(self.estimate.shape[0])


def _as_rounds(name: str, x: ArrayLike) -> FloatArray:
    # No copy of a float64 input: estimate never writes to its inputs, and at 10⁶ × 10
    # rounds each copy costs ~80 MB and tens of milliseconds.
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be an array of numbers; {exc}") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must have shape (n_trajectories, K) or (K,); found shape {arr.shape}"
        )
    return arr


def _per_trajectory(name: str, x: ArrayLike, n: int) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(
            f"`{name}` must be a scalar or have shape ({n},), one value per trajectory; "
            f"found shape {arr.shape}"
        )
    return arr.copy()


def _rounds_problem(name: str, arr: FloatArray, observed: NDArray[np.bool_]) -> None:
    """Raise the error that names the first round where ``arr`` (``p``, ``s`` or
    ``m_chosen``) breaks its contract: NaN exactly where ``y`` is, finite where observed,
    and ``p``/``s`` in (0, 1]."""
    mismatch = np.isnan(arr) != ~observed
    if mismatch.any():
        row, col = np.argwhere(mismatch)[0]
        what = "NaN" if np.isnan(arr[row, col]) else "a value"
        raise ValueError(
            f"`{name}` has {what} at trajectory {row}, round {col + 1} where `y` "
            f"{'is observed' if observed[row, col] else 'is NaN (not reached)'}; "
            "NaN must mark exactly the rounds not reached"
        )
    if np.isinf(arr).any():  # NaN outside the observed rounds was checked just above
        row, col = np.argwhere(observed & ~np.isfinite(arr))[0]
        raise ValueError(f"`{name}` must be finite on observed rounds; found "
                         f"{arr[row, col]} at trajectory {row}, round {col + 1}")
    bad = observed & ~((arr > 0) & (arr <= 1))
    row, col = np.argwhere(bad)[0]
    raise ValueError(
        f"`{name}` must be in (0, 1] on observed rounds; found {arr[row, col]} at "
        f"trajectory {row}, round {col + 1}. A zero probability breaks overlap "
        "(Assumption 1): report the eq. 10 support interval instead"
    )


def _estimate_iv(
    y: ArrayLike, p: ArrayLike, s: ArrayLike, m_chosen: ArrayLike, m_bar: ArrayLike,
    n_pool: ArrayLike, budget: int, lam: ArrayLike, order: str, anchor: str,
    bounds: tuple[float, float],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
           NDArray[np.bool_]]:
    Y = _as_rounds("y", y)
    P = _as_rounds("p", p)
    S = _as_rounds("s", s)
    M = _as_rounds("m_chosen", m_chosen)
    for name, arr in (("p", P), ("s", S), ("m_chosen", M)):
        if arr.shape != Y.shape:
            raise ValueError(
                f"`{name}` must have the shape of `y` {Y.shape}; found shape {arr.shape}"
            )
    n, k_cols = Y.shape
    if n == 0:
        raise ValueError("`y` holds no trajectories; pass at least one row")
    if not isinstance(budget, int | np.integer) or isinstance(budget, bool) or budget < 1:
        raise ValueError(f"`budget` must be a positive int (K in eq. 6); found {budget!r}")
    if k_cols > budget:
        # A prefix analysis: the first `budget` rounds, as in [SSC] Table 10.
        Y, P, S, M = Y[:, :budget], P[:, :budget], S[:, :budget], M[:, :budget]
    observed = ~np.isnan(Y)
    n_observed = int(np.count_nonzero(observed))
    # Rounds are a prefix: once a trajectory stops, every later round is NaN (a True after
    # a False in a row; bools compare as 0 < 1, one pass).
    if np.greater(observed[:, 1:], observed[:, :-1]).any():
        row, col = np.argwhere(observed[:, 1:] & ~observed[:, :-1])[0]
        raise ValueError(
            f"`y` has a NaN inside the observed prefix: trajectory {row}, round {col + 1} is "
            f"missing but round {col + 2} is observed; rounds not reached must be trailing NaN"
        )
    # Each check below is a cheap screen over whole arrays; only an input that fails one
    # pays for finding where (_rounds_problem), so valid inputs take a few passes each.
    for name, arr in (("p", P), ("s", S), ("m_chosen", M)):
        if name == "m_chosen":
            ok = np.array_equal(np.isfinite(arr), observed)
        else:
            # in (0, 1] is False for NaN and inf: equal to `observed` means in range where
            # observed and not in range elsewhere.
            ok = np.array_equal(np.greater(arr, 0) & np.less_equal(arr, 1), observed)
        # ... and the rounds not reached hold NaN, not a value: as many NaN as unobserved.
        if not ok or np.count_nonzero(np.isnan(arr)) != arr.size - n_observed:
            _rounds_problem(name, arr, observed)
    # fmin/fmax skip NaN (rounds not reached): one pass each, no temporary; an all-NaN
    # `y` gives NaN, which no check below trips on.
    y_low, y_high = ((np.fmin.reduce(Y, axis=None), np.fmax.reduce(Y, axis=None)) if Y.size
                     else (np.nan, np.nan))
    if np.isinf(y_low) or np.isinf(y_high):
        raise ValueError("`y` must be finite on observed rounds (inf found)")
    # s_t = Π_{k≤t}(1 − c_k) cannot grow; the slack absorbs rounding in a recomputed product.
    # NaN (rounds not reached) compares False, so no mask is needed on this hot path, and
    # the exact comparison (no temporary) screens before the tolerance is applied.
    if np.greater(S[:, 1:], S[:, :-1]).any() and (
            rises := np.greater(S[:, 1:] - S[:, :-1], 1e-12)).any():
        row, col = np.argwhere(rises)[0]
        raise ValueError(
            f"`s` must be non-increasing along the rounds (s_t = Π_{{k≤t}}(1 − c_k), eq. 5); "
            f"found s = {float(S[row, col])!r} at round {col + 1} and "
            f"{float(S[row, col + 1])!r} at round {col + 2} of trajectory {row}. Pass the "
            "survival probability, not the per-round stopping probability c_t"
        )
    low, high = bounds
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"`bounds` must be finite with L < U; found {bounds!r}")
    if y_low < low or y_high > high:
        row, col = np.argwhere(np.less(Y, low) | np.greater(Y, high))[0]
        raise ValueError(
            f"`y` must lie in `bounds` [{float(low)!r}, {float(high)!r}] (the score range of "
            f"Π and eq. 10); found {float(Y[row, col])!r} at trajectory {row}, round "
            f"{col + 1}. Rescale the scores or pass the range they live in as `bounds`"
        )
    MB = _per_trajectory("m_bar", m_bar, n)
    if not np.isfinite(MB).all():
        raise ValueError("`m_bar` must be finite")
    N = _per_trajectory("n_pool", n_pool, n)
    if (N < 1).any() or (np.round(N) != N).any():
        raise ValueError(f"`n_pool` must be a positive integer pool size; found {N[N < 1][:3]}"
                         if (N < 1).any() else "`n_pool` must be integers")
    LAM = _per_trajectory("lam", lam, n)
    if not ((LAM >= 0) & (LAM <= 1)).all():
        raise ValueError(f"`lam` must be in [0, 1]; found {LAM[~((LAM >= 0) & (LAM <= 1))][0]}")
    if order not in ("shrink-then-clip", "clip-then-shrink"):
        raise ValueError(
            f"`order` must be 'shrink-then-clip' (eq. 9) or 'clip-then-shrink' (eq. 13); "
            f"found {order!r}"
        )
    if anchor not in ("prediction", "opened"):
        raise ValueError(f"`anchor` must be 'prediction' (eq. 9/13) or 'opened' (eq. 12); "
                         f"found {anchor!r}")
    return Y, P, S, M, MB, N, LAM, observed


def estimate(
    y: ArrayLike,
    p: ArrayLike,
    s: ArrayLike,
    m_chosen: ArrayLike,
    m_bar: ArrayLike,
    n_pool: ArrayLike,
    *,
    budget: int,
    lam: ArrayLike = 1.0,
    order: Order = "shrink-then-clip",
    anchor: Anchor = "prediction",
    bounds: tuple[float, float] = (-1.0, 1.0),
    rho: ArrayLike | None = None,
) -> CessResult:
    """Opened Mean, OR, sequential IPW, raw DR (eq. 6) and CESS (eq. 9/12/13) per trajectory.

    Args:
        y, p, s, m_chosen: shape ``(n, K)`` (or ``(K,)``): per round the evidence score of the
            selected document, its logged selection probability ``p_t``, the survival
            probability ``s_t = Π_{k≤t}(1 − c_k)`` and its prediction ``m_{J_t}``; NaN for
            rounds not reached. Columns beyond ``budget`` are ignored (prefix analysis).
            ``y`` must lie in ``bounds``; ``s`` must not increase along the rounds.
        m_bar: the pool-mean prediction ``m̄``, per trajectory or scalar.
        n_pool: pool size ``N``, per trajectory or scalar.
        budget: ``K`` in eq. 6, the maximum budget (also for trajectories that stopped).
        lam: shrinkage ``λ ∈ [0, 1]``, scalar or per trajectory (task-wise CESS).
        order: ``"shrink-then-clip"`` (eq. 9) or ``"clip-then-shrink"`` (eq. 13).
        anchor: ``"prediction"`` (shrink toward ``m̄``) or ``"opened"`` (toward the Opened
            Mean, eq. 12).
        bounds: ``(L, U)``, the score range used by ``Π`` and eq. 10.
        rho: inaccessible pool mass ``ρ = 1 − |D+|/N`` per trajectory. When some ``ρ > 0`` the
            inputs must describe the reachable pool (``n_pool = |D+|``, ``m_bar`` over D+), the
            estimate targets ``θ+``, and ``support_low/high`` give the eq. 10 interval for
            θ*; a ``DegenerateDataWarning`` says the point estimate is not θ*.

    Returns:
        A ``CessResult``. A trajectory that opened nothing has a NaN Opened Mean and the
        estimate ``m̄`` under either anchor (``DegenerateDataWarning``).

    Raises:
        ValueError: a malformed input, named in backticks: shapes, NaN outside the rounds
            not reached, ``p``/``s`` outside (0, 1], an increasing ``s``, ``y`` outside
            ``bounds``, ``lam`` outside [0, 1].
    """
    Y, P, S, M, MB, N, LAM, observed = _estimate_iv(
        y, p, s, m_chosen, m_bar, n_pool, budget, lam, order, anchor, bounds)
    low, high = float(bounds[0]), float(bounds[1])
    R = None if rho is None else _per_trajectory("rho", rho, Y.shape[0])
    if R is not None and not ((R >= 0) & (R <= 1)).all():
        raise ValueError("`rho` must be in [0, 1] for every trajectory (NaN found or out "
                         "of range)")
    digest = _hash_beside(Y, P, S, M, MB, N, LAM, config=f"{budget}|{order}|{anchor}|"
                          f"{low!r}|{high!r}|{rho is not None}")
    K = float(budget)
    n_rounds = observed.sum(axis=1)
    # w_t = 1/(N p_t s_t); unobserved rounds contribute nothing (weight 0, no NaN).
    # The arrays are (trajectories × K) float64, 80 MB at 10^6 × 10: each step below
    # writes into a buffer it owns instead of a fresh temporary (same operations in the
    # same order, so the same bits). The validation guarantees that p, s, m and y are NaN
    # exactly on the rounds not reached, so fmin(p·s, inf) is p·s there-or-inf in one pass.
    PS = np.multiply(P, S)
    np.fmin(PS, np.inf, out=PS)  # unreached rounds: infinite p·s, weight 0
    w = np.multiply(N[:, None], PS)
    np.divide(1.0, w, out=w)
    y0 = np.where(observed, Y, 0.0)
    scratch = np.where(observed, M, 0.0)  # m0
    np.subtract(y0, scratch, out=scratch)  # y0 - m0
    np.multiply(w, scratch, out=scratch)
    dr_raw = MB + scratch.sum(axis=1) / K
    np.multiply(w, y0, out=scratch)
    ipw = scratch.sum(axis=1) / K
    with np.errstate(invalid="ignore", divide="ignore"):
        opened = y0.sum(axis=1) / n_rounds
        sw = w.sum(axis=1)
        np.multiply(w, w, out=scratch)
        ess = sw * sw / scratch.sum(axis=1)
    empty = n_rounds == 0
    if empty.any():
        warnings.warn(
            f"{int(empty.sum())} trajectory(ies) opened no document: their Opened Mean is "
            "NaN and their estimate is m̄ (no correction term"
            + ("; the opened anchor of eq. 12 falls back to m̄ there)" if anchor == "opened"
               else ")"),
            DegenerateDataWarning, stacklevel=2,
        )
    # With nothing opened there is no ō to anchor on: the opened anchor falls back to m̄
    # (raw DR is m̄ there too), so the estimate is m̄, as the warning says.
    base = MB if anchor == "prediction" else np.where(empty, MB, opened)
    corrected = dr_raw if order == "shrink-then-clip" else np.clip(dr_raw, low, high)
    est = np.clip(base + LAM * (corrected - base), low, high)
    # Row extremes over K short rows: one pass per column into a buffer is faster than a
    # reduction over rows (~15x slower) or a transposed copy (min and max are exact, so
    # the order does not change a bit).
    max_w = np.zeros(Y.shape[0])
    min_ps = PS[:, 0].copy()
    for k in range(PS.shape[1]):
        np.maximum(max_w, w[:, k], out=max_w)
        np.minimum(min_ps, PS[:, k], out=min_ps)
    max_w = np.where(n_rounds > 0, max_w, np.nan)
    min_ps = np.where(n_rounds > 0, min_ps, np.nan)
    if R is None:
        s_low = s_high = np.full(Y.shape[0], np.nan)
    else:
        s_low, s_high = support_interval(est, R, bounds=bounds)
        if (R > 0).any():
            warnings.warn(
                f"{int((R > 0).sum())} trajectory(ies) reach only part of the pool (ρ up to "
                f"{R.max():.3g}): the point estimate targets the reachable mean θ+, not θ*; "
                "report support_low/support_high ([SSC] eq. 10)",
                DegenerateDataWarning, stacklevel=2,
            )
    return CessResult(
        opened_mean=opened, outcome_regression=MB, ipw=ipw, dr_raw=dr_raw, estimate=est,
        ess=ess, max_weight=max_w, min_ps=min_ps, n_rounds=n_rounds.astype(np.int64),
        support_low=s_low, support_high=s_high, lam=LAM, budget=int(budget), order=order,
        anchor=anchor, bounds=(low, high),
        inputs_hash=digest(),
    )


def support_interval(
    theta_plus: ArrayLike, rho: ArrayLike, *, bounds: tuple[float, float] = (-1.0, 1.0)
) -> tuple[FloatArray, FloatArray]:
    """The sharp interval for θ* when a mass ρ of the pool is unreachable ([SSC] eq. 10).

    ``θ* ∈ [(1−ρ)θ+ + ρL, (1−ρ)θ+ + ρU]``, width ``ρ(U − L)``.
    """
    t = np.asarray(theta_plus, dtype=np.float64)
    r = np.asarray(rho, dtype=np.float64)
    if not np.isfinite(t).all():
        raise ValueError("`theta_plus` must be finite")
    if not ((r >= 0) & (r <= 1)).all():
        raise ValueError(f"`rho` must be in [0, 1]; found {r[~((r >= 0) & (r <= 1))].ravel()[0]}")
    low, high = bounds
    if not low < high:
        raise ValueError(f"`bounds` must satisfy L < U; found {bounds!r}")
    return (1 - r) * t + r * low, (1 - r) * t + r * high


SUM_TOLERANCE = 1e-6  # the tolerance al.select holds a logged vector to


def _logged_vector(k: int, ids: Sequence[Any], probs: ArrayLike) -> FloatArray:
    """Validate logged vector ``k`` as ``al.select`` validates what it logs."""
    try:
        arr = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`vectors` item {k}: the probabilities must be numbers; {exc}"
                         ) from None
    if arr.shape != (len(ids),):
        raise ValueError(
            f"`vectors` item {k}: each logged vector must have one probability per id; found "
            f"shape {arr.shape} for {len(ids)} ids"
        )
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(
            f"`vectors` item {k}: probabilities must be finite; found {arr[bad]} for id "
            f"{ids[bad]!r}. A NaN is not an unreachable candidate: log 0 for those"
        )
    if (arr < 0).any():
        bad = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(f"`vectors` item {k}: probabilities must be non-negative; found "
                         f"{arr[bad]} for id {ids[bad]!r}")
    total = float(arr.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(
            f"`vectors` item {k}: a logged probability vector must sum to 1 within "
            f"{SUM_TOLERANCE}; found sum {total!r}. Pass the full vector the controller drew "
            "from (al.select logs it), not scores"
        )
    return arr


@dataclass(frozen=True)
class Support:
    """Reachable candidates D+ of a logged design and the inaccessible mass ρ (eq. 10)."""

    reachable: frozenset[Any]
    n_pool: int
    rho: float


def support_from_vectors(
    vectors: Sequence[tuple[Sequence[Any], ArrayLike]], *, pool: Sequence[Any] | None = None
) -> Support:
    """D+ and ρ from logged full probability vectors: ``[(candidate_ids, probs), ...]``.

    A candidate is reachable if it had positive probability in some logged vector. The pool
    is ``pool`` when given (e.g. every candidate of the task), else the union of logged ids.
    """
    reachable: set[Any] = set()
    seen: set[Any] = set()
    for k, (ids, probs) in enumerate(vectors):
        arr = _logged_vector(k, ids, probs)
        seen.update(ids)
        reachable.update(i for i, q in zip(ids, arr, strict=True) if q > 0)
    universe = set(pool) if pool is not None else seen
    if not universe:
        raise ValueError("`vectors` describe an empty pool; pass the logged vectors or `pool`")
    unknown = reachable - universe
    if unknown:
        raise ValueError(f"logged candidates {sorted(map(str, unknown))[:3]} are not in `pool`")
    return Support(frozenset(reachable), len(universe), 1.0 - len(reachable) / len(universe))
