"""Fitting the module sensitivity ``L_M`` from paired entries ([LBC] Appendix F.1).

* **Module sensitivity** ``L_M`` from paired entries (Appendix F.1, Tables 11–12): ratio
  ``q95``, ratio sup or an affine envelope, with leave-one-group-out coverage.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning

from ._amplification import BoolArray, FloatArray, Value, _hash, _nonnegative, _out
from ._labels import codes

SensitivityMethod = Literal["ratio-q95", "ratio-sup", "affine"]


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
        _, code = codes(G.tolist(), name="groups", levels=labels)
        covered_total = 0
        degenerate = []
        for i, lab in enumerate(labels):
            test = code == i
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
