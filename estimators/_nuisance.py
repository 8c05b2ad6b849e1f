"""The nuisance radius of [LBC] Theorem 1 (eq. 3).

* **Nuisance radius** (Theorem 1, eq. 3) — the most the observed contrast of two windows can
  differ from the controlled one (common entry law ``μ``, common channel ``C_n``)::

      ε_outside,n = L_s[L_C(L_MA ε_inA + L_MB ε_inB + ξ_A·[μ_A≠μ] + ξ_B·[μ_B≠μ])
                        + ε_contA + ε_contB] + ε_protocol

  An entry declared equal to ``μ`` is charged nothing, neither ``L_MX ε_inX`` nor the slack
  ``ξ_X``, whatever the constants (proof of Theorem 1, Step 3). With both entries matched
  the radius is ``ε_protocol`` (A.2, "When terms vanish").

Infinite constants follow the ``0·∞`` conventions of ``_amplify``: an absent term is
charged ``0`` by every amplifier, ``∞`` included; an infinite amplifier on any other path
gives ``∞``.

Examples:
    >>> from agentlog.estimators import bounds
    >>> r = bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(0.3, 0.1))  # [LBC] §3.3
    >>> round(r.value, 6), round(r.terms["entry_A"], 6), round(r.terms["entry_B"], 6)
    (0.29, 0.24, 0.05)
    >>> bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(0.3, 0.1),
    ...                        entry_matched=(True, True)).value
    0.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._amplification import BoolArray, FloatArray, Value, _amplify, _nonnegative, _out

_SYSTEMS = ("A", "B")
_EQ3 = ("ε_outside = L_s[L_C(L_MA·ε_inA + L_MB·ε_inB + ξ_A·[μ_A≠μ] + ξ_B·[μ_B≠μ]) "
        "+ ε_contA + ε_contB] + ε_protocol  ([LBC] Theorem 1, eq. 3)")


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
