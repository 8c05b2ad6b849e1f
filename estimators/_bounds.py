"""Attribution bounds and certificates of [LBC] (Theorem 1–3, Proposition 1, F.1).

* **Nuisance radius** (Theorem 1, eq. 3) — the most the observed contrast of two windows can
  differ from the controlled one (common entry law ``μ``, common channel ``C_n``)::

      ε_outside,n = L_s[L_C(L_MA ε_inA + L_MB ε_inB + ξ_A·[μ_A≠μ] + ξ_B·[μ_B≠μ])
                        + ε_contA + ε_contB] + ε_protocol

  An entry declared equal to ``μ`` is charged nothing, neither ``L_MX ε_inX`` nor the slack
  ``ξ_X``, whatever the constants (proof of Theorem 1, Step 3). With both entries matched
  the radius is ``ε_protocol`` (A.2, "When terms vanish").
* **Finite-sample upper certificate** (Proposition 1, eq. 9) —
  ``ℓ̄ ≤ ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` with probability ``≥ 1 − δ``.
* **Composition** (Theorem 2, eq. 12), the **propagated window bound** (Corollary 3, eq. 14)
  and **utility stability** (Theorem 3, eq. 15).
* **Module sensitivity** ``L_M`` from paired entries (Appendix F.1, Tables 11–12): ratio
  ``q95``, ratio sup or an affine envelope, with leave-one-group-out coverage.

Infinite constants are allowed and give an infinite bound. Where an infinite amplifier meets
a zero the product is decided by the path, never left as NaN: a term that is absent (an
entry declared equal to ``μ``, a constant window ``L_MX = 0``, a slack ``ξ_X = 0``, a channel
mismatch of ``0``) is charged ``0`` by every amplifier downstream, ``L_C = ∞`` and
``L_s = ∞`` included (``0·∞ = 0``); an infinite amplifier on any other path — a measured
``ε_inX = 0`` behind a non-constant window among them — gives ``∞``. An unbounded window
on a changed entry has no finite radius, which is how a backbone change inside a scaffold
window is refused ([LBC] §6.2).

Example:
    >>> from agentlog.estimators import bounds
    >>> r = bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(0.3, 0.1))  # [LBC] §3.3
    >>> round(r.value, 6), round(r.terms["entry_A"], 6), round(r.terms["entry_B"], 6)
    (0.29, 0.24, 0.05)
    >>> bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(0.3, 0.1),
    ...                        entry_matched=(True, True)).value
    0.0
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog._errors import DegenerateDataWarning

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Value = float | FloatArray
SensitivityMethod = Literal["ratio-q95", "ratio-sup", "affine"]

_SYSTEMS = ("A", "B")
_EQ3 = ("ε_outside = L_s[L_C(L_MA·ε_inA + L_MB·ε_inB + ξ_A·[μ_A≠μ] + ξ_B·[μ_B≠μ]) "
        "+ ε_contA + ε_contB] + ε_protocol  ([LBC] Theorem 1, eq. 3)")
_SUBSTITUTION_NOTE = (
    "eq. 14 contains the in-window errors ε_i..ε_j, so it is a substitution bound, not a "
    "fairness criterion ([LBC] Corollary 3): use the nuisance radius (eq. 3) to decide "
    "whether a comparison is fair."
)


# ----------------------------------------------------------------------------- helpers


def _out(a: FloatArray) -> Value:
    """A 0-d result as a Python float, anything else as a read-only array."""
    if a.ndim == 0:
        return float(a)
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


def _amplify(L: FloatArray, v: FloatArray, active: BoolArray | bool = True) -> FloatArray:
    """``L·v`` on an active path; 0 on an exact one; ``L = 0`` → 0; ``L = ∞`` → ∞.

    The conventions of the module docstring: they replace the NaN of ``0·∞``.
    """
    with np.errstate(invalid="ignore"):
        out = np.asarray(L * v, dtype=np.float64)
    out = np.where(L == 0, 0.0, out)
    out = np.where(np.isinf(L), np.inf, out)
    return np.where(active, out, 0.0)


def _nonnegative(name: str, x: Any, *, allow_inf: bool = True) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a number or an array of numbers; {exc}") from None
    if np.isnan(arr).any():
        raise ValueError(f"`{name}` must not be NaN; a constant that is unknown has no "
                         "bound: declare it (math.inf if unbounded)")
    if (arr < 0).any():
        raise ValueError(f"`{name}` must be ≥ 0 (a Lipschitz constant, distance or slack); "
                         f"found {float(arr[arr < 0].ravel()[0]):g}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"`{name}` must be finite; found inf")
    return arr


def _pair(name: str, x: Any) -> tuple[Any, Any]:
    """Split a per-system argument ``(A, B)``; a bare number applies to both systems."""
    if isinstance(x, str | bytes):
        raise ValueError(f"`{name}` must be a pair (A, B) of numbers or arrays; found {x!r}")
    if not isinstance(x, Sequence | np.ndarray) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return x, x  # one value for both systems; _nonnegative checks it is a number
    n = len(x)
    if n != 2:
        raise ValueError(f"`{name}` must be a pair (A, B), one entry per system; found "
                         f"{n} entries")
    return x[0], x[1]


def _bool_pair(name: str, x: Any) -> tuple[BoolArray, BoolArray]:
    out = []
    for part in _pair(name, x):
        arr = np.asarray(part)
        if arr.dtype != np.bool_:
            raise ValueError(f"`{name}` must hold booleans (True: the system's entry equals "
                             f"the common entry μ); found dtype {arr.dtype}: {part!r}")
        out.append(arr)
    return out[0], out[1]


def _broadcast(arrays: Mapping[str, np.ndarray[Any, Any]]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"`{k}` {v.shape}" for k, v in arrays.items() if v.ndim)
        raise ValueError(f"the per-readout arrays must broadcast to one shape; found {shapes}"
                         ) from None


def _fmt(v: Value) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    a = np.asarray(v)
    if a.size == 0:
        return "[]"
    if np.all(a == a.flat[0]):
        return f"{float(a.flat[0]):.4g}"
    return f"{float(a.min()):.4g}…{float(a.max()):.4g}"


def _hash(*arrays: ArrayLike, config: str = "") -> str:
    h = hashlib.sha256(config.encode())
    for a in arrays:
        arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------- nuisance radius


@dataclass(frozen=True, eq=False)
class NuisanceRadius:
    """The nuisance radius ``ε_outside,n`` of [LBC] Theorem 1, eq. 3.

    Floats when every input was a scalar; otherwise read-only arrays of the broadcast shape
    (one value per readout, pair, ...).

    Attributes:
        value: ``ε_outside,n``; ``math.inf`` when an unbounded constant sits on a path that
            is not exactly matched (no finite radius: refuse the pair).
        terms: the raw terms of eq. 3 before amplification, keyed ``entry_A``, ``entry_B``
            (``L_MX·ε_inX``, exactly ``0`` for a matched entry), ``slack_A``, ``slack_B``
            (``ξ_X·[μ_X≠μ]``), ``continuation_A``, ``continuation_B`` (``ε_contX``) and
            ``protocol`` (``ε_protocol``).
        contributions: the same keys on the score scale — ``L_s·L_C·entry_X``,
            ``L_s·L_C·slack_X``, ``L_s·ε_contX``, ``ε_protocol`` — which add up to ``value``.
        L_s, L_C, L_M, eps_in, xi, eps_cont, eps_protocol, entry_matched: the inputs
            (``L_M``, ``eps_in``, ``xi``, ``eps_cont``, ``entry_matched`` as ``(A, B)``).
        explanation: the arithmetic in words, naming what is charged and why.
    """

    value: Value
    terms: Mapping[str, Value]
    contributions: Mapping[str, Value]
    L_s: Value
    L_C: Value
    L_M: tuple[Value, Value]
    eps_in: tuple[Value, Value]
    xi: tuple[Value, Value]
    eps_cont: tuple[Value, Value]
    eps_protocol: Value
    entry_matched: tuple[bool | BoolArray, bool | BoolArray]
    explanation: str

    @property
    def finite(self) -> bool | BoolArray:
        """Whether the radius is finite (per readout for arrays)."""
        out = np.isfinite(self.value)
        return bool(out) if out.ndim == 0 else out

    @property
    def exact(self) -> bool | BoolArray:
        """Whether the radius is exactly 0 (an exact cell: entries, channel, protocol matched)."""
        out = np.asarray(self.value) == 0
        return bool(out) if out.ndim == 0 else out

    @property
    def non_expansive(self) -> bool | BoolArray:
        """``L_MA, L_MB ≤ 1``: the windows do not amplify entry mismatch (Corollary 1)."""
        out = (np.asarray(self.L_M[0]) <= 1) & (np.asarray(self.L_M[1]) <= 1)
        return bool(out) if out.ndim == 0 else out

    def within_tolerance(self, eps_fair: ArrayLike, *, r: ArrayLike = 0.0) -> bool | BoolArray:
        """``ε̂_outside + r ≤ ε_fair``: the numeric half of Definitions 1 and 7.

        Only the number: admissibility also needs the qualitative conditions of Assumption 1
        and the declared estimand, decided before any score is read.

        Args:
            eps_fair: the pre-registered tolerance ``ε_fair,n > 0`` (per readout).
            r: the one-sided radius ``r_n(δ)`` of the estimate (Definition 7); ``0`` in exact
                cells and for the population statement of Definition 1.
        """
        fair = _nonnegative("eps_fair", eps_fair)
        if (fair == 0).any():
            raise ValueError("`eps_fair` must be > 0 (Definition 1 fixes a positive tolerance)")
        rr = _nonnegative("r", r)
        out = np.asarray(self.value) + rr <= fair
        return bool(out) if out.ndim == 0 else out

    def __str__(self) -> str:
        return self.explanation


def _nuisance_radius_iv(
    L_s: ArrayLike, L_C: ArrayLike, L_M: Any, eps_in: Any, xi: Any, eps_cont: Any,
    eps_protocol: ArrayLike, entry_matched: Any,
) -> dict[str, Any]:
    named: dict[str, Any] = {
        "L_s": _nonnegative("L_s", L_s),
        "L_C": _nonnegative("L_C", L_C),
        "eps_protocol": _nonnegative("eps_protocol", eps_protocol),
    }
    for name, pair in (("L_M", L_M), ("eps_in", eps_in), ("xi", xi), ("eps_cont", eps_cont)):
        a, b = _pair(name, pair)
        named[f"{name}_A"] = _nonnegative(name, a)
        named[f"{name}_B"] = _nonnegative(name, b)
    named["entry_matched_A"], named["entry_matched_B"] = _bool_pair("entry_matched",
                                                                    entry_matched)
    shape = _broadcast(named)
    return {k: np.broadcast_to(v, shape) for k, v in named.items()}


def nuisance_radius(
    *,
    L_s: ArrayLike = 1.0,
    L_C: ArrayLike = 1.0,
    L_M: Any,
    eps_in: Any,
    xi: Any = (0.0, 0.0),
    eps_cont: Any = (0.0, 0.0),
    eps_protocol: ArrayLike = 0.0,
    entry_matched: Any = (False, False),
) -> NuisanceRadius:
    """The nuisance radius of two windows A and B under one readout ([LBC] eq. 3).

    ``ε_outside,n = L_s[L_C(L_MA ε_inA + L_MB ε_inB + ξ_A·[μ_A≠μ] + ξ_B·[μ_B≠μ])
    + ε_contA + ε_contB] + ε_protocol`` bounds ``|Δ_obs − Δ*(μ, C_n)|`` under Assumption 1
    and the boundary factorization (Theorem 1). A matched entry (``μ_X = μ``, e.g. equal
    entry hashes on every task) charges neither its entry term nor its slack, whatever
    ``L_MX``, ``ε_inX`` and ``ξ_X`` say (proof, Step 3); both matched leaves
    ``L_s(ε_contA + ε_contB) + ε_protocol``, and ``ε_protocol`` alone when the channels are
    shared.

    Every argument broadcasts: pass arrays to get one radius per readout (``L_s`` per
    readout, ``eps_in`` per pair, ...). Per-system arguments are pairs ``(A, B)``; a bare
    number applies to both systems.

    Args:
        L_s: ``L_{s_n}``, Lipschitz constant of the readout's score ``s_n`` (``1`` for a
            score read directly off a ``[0, 1]`` distance).
        L_C: ``L_{C_n}``, amplification of the common channel (``1`` for a directly
            observable window, Definition 6).
        L_M: ``(L_MA, L_MB)``, each window's sensitivity to its entry (``fit_sensitivity``);
            ``math.inf`` when none is finite, e.g. a backbone change inside the window.
        eps_in: ``(ε_inA, ε_inB)``, ``W(μ_X, μ)``: each entry law's distance to the common
            entry ``μ``; ignored for a matched entry.
        xi: ``(ξ_A, ξ_B)``, slack of each window's affine sensitivity bound; charged only
            when that system's entry differs from ``μ``.
        eps_cont: ``(ε_contA, ε_contB)``, channel mismatch ``sup_z W(C_X(·|z), C_n(·|z))``;
            ``0`` for a shared channel.
        eps_protocol: ``ε_protocol,n``, remaining protocol imbalance on the score scale.
        entry_matched: ``(μ_A = μ, μ_B = μ)``, booleans (or boolean arrays).

    Returns:
        A ``NuisanceRadius``.

    Raises:
        ValueError: a constant is negative or NaN, a pair does not have two entries,
            ``entry_matched`` is not boolean, or the arrays do not broadcast.
    """
    v = _nuisance_radius_iv(L_s, L_C, L_M, eps_in, xi, eps_cont, eps_protocol, entry_matched)
    Ls, Lc, prot = v["L_s"], v["L_C"], v["eps_protocol"]
    terms: dict[str, FloatArray] = {}
    contrib: dict[str, FloatArray] = {}
    for X in _SYSTEMS:
        unmatched = ~v[f"entry_matched_{X}"]
        terms[f"entry_{X}"] = _amplify(v[f"L_M_{X}"], v[f"eps_in_{X}"], unmatched)
        terms[f"slack_{X}"] = np.where(unmatched, v[f"xi_{X}"], 0.0)
        # A term that is absent — a matched entry, a constant window (L_MX = 0), no slack
        # (ξ_X = 0) — is charged 0 by any amplifier, ∞ included (0·∞ = 0). A measured
        # ε_inX = 0 behind a non-constant window is not absent: an unbounded L_C still
        # charges it.
        present = {"entry": unmatched & (v[f"L_M_{X}"] != 0),
                   "slack": unmatched & (v[f"xi_{X}"] != 0)}
        for kind in ("entry", "slack"):
            contrib[f"{kind}_{X}"] = _amplify(
                Ls, _amplify(Lc, terms[f"{kind}_{X}"], present[kind]), present[kind])
    for X in _SYSTEMS:
        cont = np.asarray(v[f"eps_cont_{X}"], dtype=np.float64)
        terms[f"continuation_{X}"] = cont
        contrib[f"continuation_{X}"] = _amplify(Ls, cont, cont > 0)
    terms["protocol"] = contrib["protocol"] = np.asarray(prot, dtype=np.float64)
    order = ["entry_A", "entry_B", "slack_A", "slack_B", "continuation_A", "continuation_B",
             "protocol"]
    value = np.zeros(Ls.shape)
    for key in order:
        value = value + contrib[key]
    value_out = _out(value)
    matched = (_bool_out(v["entry_matched_A"]), _bool_out(v["entry_matched_B"]))
    explanation = _explain_radius(v, terms, contrib, value)
    return NuisanceRadius(
        value=value_out,
        terms=MappingProxyType({k: _out(terms[k]) for k in order}),
        contributions=MappingProxyType({k: _out(contrib[k]) for k in order}),
        L_s=_out(Ls), L_C=_out(Lc),
        L_M=(_out(v["L_M_A"]), _out(v["L_M_B"])),
        eps_in=(_out(v["eps_in_A"]), _out(v["eps_in_B"])),
        xi=(_out(v["xi_A"]), _out(v["xi_B"])),
        eps_cont=(_out(v["eps_cont_A"]), _out(v["eps_cont_B"])),
        eps_protocol=_out(prot),
        entry_matched=matched,
        explanation=explanation,
    )


def _bool_out(a: BoolArray) -> bool | BoolArray:
    if a.ndim == 0:
        return bool(a)
    out = np.array(a, dtype=np.bool_)
    out.flags.writeable = False
    return out


def _explain_radius(v: Mapping[str, Any], terms: Mapping[str, FloatArray],
                    contrib: Mapping[str, FloatArray], value: FloatArray) -> str:
    lines = [_EQ3]
    if value.ndim == 0:
        lines.append(
            f"  = {_fmt(float(v['L_s']))}·[{_fmt(float(v['L_C']))}·("
            f"{_fmt(float(terms['entry_A']))} + {_fmt(float(terms['entry_B']))} + "
            f"{_fmt(float(terms['slack_A']))} + {_fmt(float(terms['slack_B']))}) + "
            f"{_fmt(float(terms['continuation_A']))} + "
            f"{_fmt(float(terms['continuation_B']))}] + {_fmt(float(terms['protocol']))}"
            f" = {_fmt(float(value))}")
    else:
        finite = np.isfinite(value)
        parts = []
        if finite.any():
            fv = value[finite]
            parts.append(f"finite ones min {fv.min():.4g}, median {float(np.median(fv)):.4g}, "
                         f"max {fv.max():.4g}")
        if (~finite).any():
            parts.append(f"{int((~finite).sum())} infinite")
        lines.append(f"  over {value.size} values: " + "; ".join(parts))
    for X in _SYSTEMS:
        matched = v[f"entry_matched_{X}"]
        L_M, eps, xi = v[f"L_M_{X}"], v[f"eps_in_{X}"], v[f"xi_{X}"]
        if matched.all():
            ignored = [f"{n} = {_fmt(_out(a))}" for n, a in
                       ((f"ε_in{X}", eps), (f"ξ_{X}", xi)) if (a > 0).any()]
            lines.append(
                f"{X}: entry equals μ — no entry or slack term, whatever L_M{X} "
                f"(Theorem 1, Step 3)" + (f"; declared {', '.join(ignored)} ignored"
                                          if ignored else ""))
            continue
        what = "entry differs from μ" if not matched.any() else \
            f"entry differs from μ on {int((~matched).sum())} of {matched.size}"
        lines.append(
            f"{X}: {what} — entry term L_M{X}·ε_in{X} = {_fmt(L_M)}·{_fmt(eps)} = "
            f"{_fmt(_out(terms[f'entry_{X}']))}, slack ξ_{X} = {_fmt(_out(terms[f'slack_{X}']))}"
            f"; on the score scale {_fmt(_out(contrib[f'entry_{X}']))} + "
            f"{_fmt(_out(contrib[f'slack_{X}']))}")
        if (np.isinf(L_M) & ~matched).any():
            lines.append(
                f"{X}: L_M{X} is unbounded on an entry that differs from μ: no finite radius "
                "(a backbone change inside a scaffold window, [LBC] §6.2) — refuse the "
                "pair under this design")
    # an entry that differs from μ behind a constant window and without slack charges nothing
    charged_any = np.zeros(np.shape(v["L_C"]), dtype=bool)
    for X in _SYSTEMS:
        charged_any = charged_any | (~v[f"entry_matched_{X}"] & (
            (v[f"L_M_{X}"] != 0) | (v[f"xi_{X}"] != 0)))
    if (np.isinf(v["L_C"]) & charged_any).any():
        lines.append("L_C is unbounded and an entry differs from μ: no finite radius")
    if (np.isinf(v["L_s"]) & (charged_any | (v["eps_cont_A"] > 0) | (v["eps_cont_B"] > 0))
            ).any():
        lines.append("L_s is unbounded on a mismatched path: no finite radius")
    cont = terms["continuation_A"] + terms["continuation_B"]
    if (cont > 0).any():
        lines.append(f"channel mismatch ε_contA + ε_contB = {_fmt(_out(cont))}, on the score "
                     f"scale {_fmt(_out(contrib['continuation_A'] + contrib['continuation_B']))}")
    both = v["entry_matched_A"] & v["entry_matched_B"]
    if both.all() and (cont == 0).all():
        lines.append(
            f"both entries equal μ and the channel is shared: the radius is ε_protocol = "
            f"{_fmt(_out(terms['protocol']))}"
            + (" — an exact cell" if (terms["protocol"] == 0).all() else ""))
    elif (terms["protocol"] > 0).any():
        lines.append(f"protocol imbalance ε_protocol = {_fmt(_out(terms['protocol']))}")
    return "\n".join(lines)


# ------------------------------------------------------- finite-sample certificate


@dataclass(frozen=True)
class UpperCertificate:
    """Proposition 1 ([LBC] eq. 9): ``ℓ̄ ≤ value`` with probability ``≥ 1 − δ``.

    Attributes:
        value: ``ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` (not clipped to 1).
        mean: ``ℓ̂_N``, the mean of the context-level losses.
        sampling: the Hoeffding term ``√(log(1/δ)/(2N))``.
        n: ``N``, the number of task contexts (clusters), not of rollouts.
        eta_roll, eta_align, eta_ann: the declared deterministic error bounds.
        confidence_level: ``1 − δ``.
        inputs_hash: SHA-256 of the losses, clusters and settings.
    """

    value: float
    mean: float
    sampling: float
    n: int
    eta_roll: float
    eta_align: float
    eta_ann: float
    confidence_level: float
    inputs_hash: str

    @property
    def delta(self) -> float:
        """``δ = 1 − confidence_level``."""
        return 1.0 - self.confidence_level

    @property
    def vacuous(self) -> bool:
        """The bound is at least 1, the largest loss: it certifies nothing."""
        return self.value >= 1.0


def _upper_certificate_iv(
    losses: ArrayLike, clusters: ArrayLike | None, confidence_level: float,
    etas: Mapping[str, float],
) -> tuple[FloatArray, NDArray[Any] | None]:
    try:
        x = np.asarray(losses, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`losses` must be numbers in [0, 1]; {exc}") from None
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`losses` must be a non-empty 1-D array, one loss per context or "
                         f"rollout; found shape {x.shape}")
    if np.isnan(x).any() or (x < 0).any() or (x > 1).any():
        raise ValueError("`losses` must lie in [0, 1] (Hoeffding's inequality needs bounded "
                         "losses); found NaN or a value outside [0, 1]")
    g = None
    if clusters is not None:
        g = np.asarray(clusters)
        if g.shape != x.shape:
            raise ValueError(f"`clusters` must have the shape of `losses` {x.shape}, one "
                             f"context label per loss; found {g.shape}")
    if not (isinstance(confidence_level, int | float) and 0 < confidence_level < 1):
        raise ValueError(f"`confidence_level` must be in (0, 1); found {confidence_level!r}")
    for name, eta in etas.items():
        _nonnegative(name, eta)
        if np.ndim(eta) != 0:
            raise ValueError(f"`{name}` must be a scalar; found shape {np.shape(eta)}")
    return x, g


def upper_certificate(
    losses: ArrayLike,
    *,
    clusters: ArrayLike | None = None,
    confidence_level: float = 0.95,
    eta_roll: float = 0.0,
    eta_align: float = 0.0,
    eta_ann: float = 0.0,
) -> UpperCertificate:
    """Finite-sample upper certificate of a mean loss ([LBC] Proposition 1, eq. 9).

    ``ℓ̄ ≤ ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` with probability at least
    ``1 − δ`` over ``N`` i.i.d. task contexts, where ``ℓ̂_N`` is the mean of the rollout-based
    context losses ``ℓ_i ∈ [0, 1]`` and the ``η`` bound finite-rollout, alignment and
    annotation error (assumed, not derived). The context is the statistical unit: repeated
    rollouts of one context tighten ``η_roll``, they do not increase ``N``.

    Args:
        losses: ``ℓ_i ∈ [0, 1]``, one per context, or one per rollout with ``clusters``.
        clusters: context label of each loss; losses are averaged within a context first
            and ``N`` is the number of contexts.
        confidence_level: ``1 − δ``.
        eta_roll, eta_align, eta_ann: ``η_roll``, ``η_align``, ``η_ann`` (≥ 0).

    Returns:
        An ``UpperCertificate``.
    """
    etas = {"eta_roll": eta_roll, "eta_align": eta_align, "eta_ann": eta_ann}
    x, g = _upper_certificate_iv(losses, clusters, confidence_level, etas)
    if g is None:
        per_context = x
        label_key = ""
    else:
        _, inverse = np.unique(g, return_inverse=True)
        per_context = np.bincount(inverse, weights=x) / np.bincount(inverse)
        label_key = repr([str(lab) for lab in g.tolist()])
    n = int(per_context.size)
    delta = 1.0 - float(confidence_level)
    sampling = math.sqrt(math.log(1.0 / delta) / (2.0 * n))
    mean = float(per_context.mean())
    value = mean + sampling + float(eta_roll) + float(eta_align) + float(eta_ann)
    return UpperCertificate(
        value=value, mean=mean, sampling=sampling, n=n, eta_roll=float(eta_roll),
        eta_align=float(eta_align), eta_ann=float(eta_ann),
        confidence_level=float(confidence_level),
        inputs_hash=_hash(x, config=f"{confidence_level!r}|{eta_roll!r}|{eta_align!r}|"
                                    f"{eta_ann!r}|{label_key}"),
    )


# ----------------------------------------------------------------------- composition


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
    """Recursion eq. 13 and the per-source terms of eq. 12 (0·∞ by the module's rules)."""
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


# ------------------------------------------------------------- sensitivity fitting


@dataclass(frozen=True)
class GroupCoverage:
    """Leave-one-group-out check of a fitted constant on one held-out group (Table 12a).

    Attributes:
        label: the group (system, pipeline).
        n: its number of pairs.
        constant_train, slack_train: ``L_M`` (and ``ξ``) fitted on every other group.
        constant_own, slack_own: fitted on this group alone (NaN when it cannot be).
        coverage: share of this group's pairs with ``y ≤ constant_train·x + slack_train``.
    """

    label: Hashable
    n: int
    constant_train: float
    slack_train: float
    constant_own: float
    slack_own: float
    coverage: float


@dataclass(frozen=True, eq=False)
class SensitivityFit:
    """A module-sensitivity constant ``L_M`` fitted on paired entries ([LBC] F.1).

    The fitted envelope is ``y ≤ constant·x + slack``; the ratio designs have ``slack = 0``.

    Attributes:
        method: ``"ratio-q95"``, ``"ratio-sup"`` or ``"affine"``.
        level: the quantile used by ``"ratio-q95"`` and the affine slack.
        constant: ``L_M``.
        slack: ``ξ`` (0 for the ratio designs).
        n: number of pairs.
        coverage: in-sample share of pairs under the envelope.
        max_ratio: ``max y/x`` over pairs with ``x > 0`` (NaN when there is none).
        n_expansive: pairs with ``y > x``, locally expansive (Table 12b).
        groups: leave-one-group-out checks, one per group in order of first appearance
            (empty without ``groups``).
        heldout_coverage: pooled share of held-out pairs under the envelope fitted without
            their group (NaN without ``groups``).
        inputs_hash: SHA-256 of ``x``, ``y``, the groups and the settings.
    """

    method: str
    level: float
    constant: float
    slack: float
    n: int
    coverage: float
    max_ratio: float
    n_expansive: int
    groups: tuple[GroupCoverage, ...]
    heldout_coverage: float
    inputs_hash: str

    @property
    def heldout_coverage_mean(self) -> float:
        """Mean of the per-group held-out coverages (Table 13's "mean")."""
        if not self.groups:
            return math.nan
        return float(np.mean([g.coverage for g in self.groups]))

    @property
    def heldout_coverage_min(self) -> float:
        """Smallest per-group held-out coverage (Table 13's "min")."""
        if not self.groups:
            return math.nan
        return float(min(g.coverage for g in self.groups))

    def bound(self, x: ArrayLike) -> Value:
        """The envelope ``constant·x + slack`` at entry distance(s) ``x``."""
        xx = _nonnegative("x", x)
        return _out(self.constant * xx + self.slack)


def _fit(method: str, x: FloatArray, y: FloatArray, level: float) -> tuple[float, float] | None:
    """``(L, ξ)`` or None when the design is not identified (affine with one distinct x)."""
    if method == "affine":
        xc = x - x.mean()
        sxx = float(xc @ xc)
        if x.size < 2 or sxx == 0:
            return None
        slope = max(0.0, float(xc @ (y - y.mean())) / sxx)
        slack = max(0.0, float(np.quantile(y - slope * x, level)))
        return slope, slack
    r = y / x
    return (float(r.max()) if method == "ratio-sup" else float(np.quantile(r, level))), 0.0


def _covered(method: str, x: FloatArray, y: FloatArray, L: float, xi: float) -> BoolArray:
    # Compare the statistic the fit was taken on, so that an in-sample sup covers exactly.
    if method == "affine":
        return np.asarray(y - L * x <= xi)
    return np.asarray(y / x <= L)


def _fit_sensitivity_iv(
    x: ArrayLike, y: ArrayLike, method: str, groups: ArrayLike | None, level: float,
) -> tuple[FloatArray, FloatArray, NDArray[Any] | None]:
    if method not in ("ratio-q95", "ratio-sup", "affine"):
        raise ValueError(f"`method` must be 'ratio-q95', 'ratio-sup' or 'affine' ([LBC] "
                         f"Table 11); found {method!r}")
    X = _nonnegative("x", x, allow_inf=False)
    Y = _nonnegative("y", y, allow_inf=False)
    for name, a in (("x", X), ("y", Y)):
        if a.ndim != 1:
            raise ValueError(f"`{name}` must be 1-D, one distance per paired entry; found "
                             f"shape {a.shape}")
    if X.shape != Y.shape:
        raise ValueError(f"`x` and `y` must have the same length, one pair each; found "
                         f"{X.shape[0]} and {Y.shape[0]}")
    if X.size == 0:
        raise ValueError("`x` is empty: fitting L_M needs at least one paired entry")
    if method != "affine" and (X <= 0).any():
        i = int(np.argmax(X <= 0))
        raise ValueError(
            f"`x` must be > 0 for the ratio designs: pair {i} has x = {float(X[i]):g}, so y/x is "
            "undefined (an exit displacement at zero entry mismatch is slack, not "
            "sensitivity — [LBC] F.2); drop such pairs or use method='affine'")
    if not (isinstance(level, int | float) and 0 < level <= 1):
        raise ValueError(f"`level` must be in (0, 1]; found {level!r}")
    if method == "affine" and _fit(method, X, Y, float(level)) is None:
        raise ValueError("`x` must hold at least two distinct entry distances for "
                         "method='affine': a slope is not identified from one")
    G = None
    if groups is not None:
        G = np.asarray(groups)
        if G.shape != X.shape:
            raise ValueError(f"`groups` must have the shape of `x` {X.shape}, one system "
                             f"label per pair; found {G.shape}")
    return X, Y, G


def fit_sensitivity(
    x: ArrayLike,
    y: ArrayLike,
    *,
    method: SensitivityMethod = "ratio-q95",
    groups: ArrayLike | None = None,
    level: float = 0.95,
) -> SensitivityFit:
    """Fit the module-sensitivity constant ``L_M`` from paired entries ([LBC] F.1).

    Each pair enters one window twice on the same task; ``x`` is the entry mismatch of the
    two entries, ``y`` the distance between the two exits (or readouts). Designs (Table 11):

    * ``"ratio-q95"`` — ``L_M = q_level(y/x)`` (numpy's linear quantile), the paper's
      selected design: a high-probability envelope, not a worst-case bound.
    * ``"ratio-sup"`` — ``L_M = max y/x``.
    * ``"affine"`` — ``y ≤ a·x + ξ``: ``a`` is the least-squares slope (floored at 0) and
      ``ξ = max(0, q_level(y − a·x))``, the slack that puts a share ``level`` of pairs under
      the line. The paper names this design "envelope, slope + slack" without giving the
      fitting rule; this is our reading. ``level=1`` gives the worst-case envelope. It is
      the design for pairs at ``x = 0`` (F.2), which a ratio cannot describe.

    With ``groups`` (system labels), each group is held out in turn: the constant is fitted
    on every other group and the held-out coverage is the share of the group's pairs under
    that envelope (Table 12a), the transferability a panel-level constant assumes.

    Args:
        x: entry distances ``x ≥ 0`` (``> 0`` for the ratio designs).
        y: exit distances ``y ≥ 0``, paired with ``x``.
        method: ``"ratio-q95"``, ``"ratio-sup"`` or ``"affine"``.
        groups: a label per pair, for the leave-one-group-out check (≥ 2 groups).
        level: the quantile of ``"ratio-q95"`` and of the affine slack (``0.95``: the
            paper's ``q95``); ``"ratio-sup"`` ignores it.

    Returns:
        A ``SensitivityFit``.

    Warns:
        DegenerateDataWarning: a group alone cannot identify an affine slope (its own
            constant is NaN).
    """
    X, Y, G = _fit_sensitivity_iv(x, y, method, groups, level)
    lev = float(level)
    fitted = _fit(method, X, Y, lev)
    assert fitted is not None  # checked by _fit_sensitivity_iv
    L, xi = fitted
    positive = X > 0
    max_ratio = float((Y[positive] / X[positive]).max()) if positive.any() else math.nan
    per_group: list[GroupCoverage] = []
    heldout = math.nan
    label_key = ""
    if G is not None:
        labels = list(dict.fromkeys(G.tolist()))
        label_key = repr([repr(lab) for lab in G.tolist()])
        if len(labels) < 2:
            raise ValueError(f"`groups` must hold at least two groups for the "
                             f"leave-one-group-out check; found {len(labels)}")
        index = {lab: i for i, lab in enumerate(labels)}
        codes = np.array([index[lab] for lab in G.tolist()])
        covered_total = 0
        degenerate = []
        for i, lab in enumerate(labels):
            test = codes == i
            train_fit = _fit(method, X[~test], Y[~test], lev)
            if train_fit is None:
                raise ValueError(
                    f"`groups`: without group {lab!r} the remaining pairs hold one distinct "
                    "entry distance, which identifies no affine slope")
            own = _fit(method, X[test], Y[test], lev)
            if own is None:
                degenerate.append(lab)
                own = (math.nan, math.nan)
            cov = _covered(method, X[test], Y[test], *train_fit)
            covered_total += int(cov.sum())
            per_group.append(GroupCoverage(
                label=lab, n=int(test.sum()), constant_train=train_fit[0],
                slack_train=train_fit[1], constant_own=own[0], slack_own=own[1],
                coverage=float(cov.mean())))
        heldout = covered_total / X.size
        if degenerate:
            warnings.warn(
                f"group(s) {degenerate!r} hold one distinct entry distance: their own affine "
                "constant is not identified and is NaN (the held-out check is unaffected)",
                DegenerateDataWarning, stacklevel=2)
    return SensitivityFit(
        method=method, level=lev, constant=L, slack=xi, n=int(X.size),
        coverage=float(_covered(method, X, Y, L, xi).mean()), max_ratio=max_ratio,
        n_expansive=int((Y > X).sum()), groups=tuple(per_group), heldout_coverage=heldout,
        inputs_hash=_hash(X, Y, config=f"{method}|{lev!r}|{label_key}"),
    )
