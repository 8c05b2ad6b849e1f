"""Eq. 4 on every (pair, target) cell, and the conventional ladder R0–R5 ([LBC] Table 2)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from agentlog import DegenerateDataWarning

from ._admissibility import Admissibility
from ._board import Decision, LadderRung, PairDecision
from ._inputs import _Inputs
from ._plan import Plan
from ._radius import (
    MIN_DF,
    _cornish_fisher,
    _critical,
    _Moments,
    _moments,
    _onehot,
    _radius,
    _t_quantiles,
    _warn_degenerate,
)

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_METHOD = {"cr2-bm-cf": "CR2, Bell–McCaffrey df, Cornish–Fisher skewness terms",
           "cr2-bm": "CR2, Bell–McCaffrey df", "cr1": "CR1, t(G−1)"}


@dataclass(frozen=True)
class _Cells:
    """Everything per (pair, target) cell, flattened to ``K = P · T`` rows."""

    pairs: list[tuple[int, int]]
    targets: tuple[str, ...]
    d: FloatArray  # (K, N)
    mask: BoolArray  # (K, N)
    mo: _Moments
    tq: FloatArray  # (K,) the multiplier of se: t(df), plus the skewness terms under cf
    q: FloatArray
    rad: FloatArray  # ε̂_out + r
    eps: FloatArray
    r: FloatArray
    tol: FloatArray
    admissible: BoolArray
    ok: BoolArray  # admissible, enough tasks, G ≥ 2


def _values(plan: Plan, inp: _Inputs) -> tuple[FloatArray, BoolArray]:
    """``(S, N, T)`` oriented target values and the ``(S, N)`` used-task mask."""
    orient = np.array([plan.orientation()[n] for n in plan.readout_names])
    y = inp.y.copy()
    if plan.failure.policy == "score":
        bottom = np.array([plan.failure_value(n) for n in plan.readout_names])
        y = np.where(inp.failed[:, :, None], bottom[None, None, :], y)
        used = inp.present.copy()
    else:
        used = inp.present & ~inp.failed
    y = np.where(used[:, :, None], y, 0.0) * orient
    w = plan.composite_weights()
    comp = y @ np.array([w[n] for n in plan.readout_names])
    return np.concatenate([comp[:, :, None], y], axis=2), used


def _cells(plan: Plan, inp: _Inputs, adm: Admissibility, pairs: list[tuple[int, int]],
           values: FloatArray, used: BoolArray) -> _Cells:
    targets = plan.targets
    T, N = len(targets), values.shape[1]
    ia = np.array([a for a, _ in pairs], dtype=np.intp)
    ib = np.array([b for _, b in pairs], dtype=np.intp)
    d = (values[ia] - values[ib]).transpose(0, 2, 1).reshape(-1, N)  # (P·T, N)
    mask = np.repeat(used[ia] & used[ib], T, axis=0)
    # A difference's rounding error scales with the scores it subtracts, not with itself.
    magnitude = np.maximum(np.abs(values[ia]), np.abs(values[ib])).transpose(0, 2, 1)
    mo = _moments(d, mask, _onehot(inp.codes, len(inp.clusters)), plan.sampling,
                  magnitude.reshape(-1, N))
    m = len(pairs)
    tq = _critical(1.0 - plan.delta_prime / (2.0 * m), mo.df, mo.skew, plan.sampling)
    eps = np.empty(len(pairs) * T)
    r = np.empty_like(eps)
    tol = np.empty_like(eps)
    adm_ok = np.empty(eps.shape, dtype=bool)
    for p, (a, b) in enumerate(pairs):
        pa = adm.pair(inp.systems[a], inp.systems[b])
        for t, name in enumerate(targets):
            tr = pa.targets[name]
            k = p * T + t
            eps[k], r[k], tol[k] = tr.eps_out, tr.r, tr.tolerance
            adm_ok[k] = pa.admissible(name)
    q = _radius(mo, tq)
    with np.errstate(invalid="ignore"):
        rad = eps + r
    ok = adm_ok & (mo.n >= plan.min_common_tasks) & (mo.g >= 2)
    _warn_degenerate([f"{inp.systems[pairs[k // T][0]]} vs {inp.systems[pairs[k // T][1]]} on "
                      f"`{targets[k % T]}`" for k in np.flatnonzero(ok & mo.degenerate)],
                     "certify.certify")
    return _Cells(pairs, targets, d, mask, mo, tq, q, rad, eps, r, tol, adm_ok, ok)


def _decisions(plan: Plan, inp: _Inputs, adm: Admissibility, c: _Cells
               ) -> dict[str, tuple[PairDecision, ...]]:
    T = len(c.targets)
    out: dict[str, list[PairDecision]] = {t: [] for t in c.targets}
    for p, (ia, ib) in enumerate(c.pairs):
        a, b = inp.systems[ia], inp.systems[ib]
        pa = adm.pair(a, b)
        for t, name in enumerate(c.targets):
            k = p * T + t
            n, g, df = int(c.mo.n[k]), int(c.mo.g[k]), float(c.mo.df[k])
            dominant = None
            delta, q, rad = float(c.mo.mean[k]), float(c.q[k]), float(c.rad[k])
            better = worse = None
            reason: str | None
            decision: Decision
            margin = math.nan
            if not pa.admissible(name):
                decision = "refused"
                reason = pa.targets[name].reason or pa.reason
                if pa.status == "insufficient":
                    decision = "not-enough-common-tasks"
            elif n < plan.min_common_tasks:
                decision = "not-enough-common-tasks"
                reason = (f"{n} common tasks < min_common_tasks = {plan.min_common_tasks}"
                          + (" (failed tasks dropped)" if plan.failure.policy == "drop"
                             else ""))
            elif g < 2:
                decision = "not-enough-common-tasks"
                reason = (f"the {n} common tasks fall in {g} cluster; the cluster-robust "
                          "radius needs at least 2")
            else:
                total = q + rad
                margin = abs(delta) / total if total > 0 else (math.inf if delta else 0.0)
                if abs(delta) > total:
                    decision = "certified"
                    better, worse = (a, b) if delta > 0 else (b, a)
                    reason = None
                elif rad > 0 and abs(delta) <= rad:
                    decision = "undecided-attribution"
                    reason = (f"|Δ̂| = {abs(delta):.4g} lies within the nuisance radius "
                              f"ε̂_out + r = {rad:.4g}: more tasks alone cannot certify it")
                elif c.mo.degenerate[k]:
                    decision = "undecided-sampling"
                    reason = ("zero cluster-robust variance: every cluster's mean difference "
                              f"is {delta:.4g}, so nothing measures the sampling error and the "
                              "pair is never certified (q = inf, whatever the gap)")
                elif df < MIN_DF:
                    decision = "undecided-sampling"
                    dominant = _dominant(inp, c.mo.counts[k])
                    reason = (f"sampling-limited because one cluster dominates: cluster "
                              f"{dominant!r} holds {int(c.mo.counts[k].max())} of {n} tasks, "
                              f"so the variance has {df:.2g} effective degrees of freedom "
                              f"(< {MIN_DF:g}) and q = {q:.4g}; add tasks in other clusters")
                else:
                    decision = "undecided-sampling"
                    reason = (f"|Δ̂| = {abs(delta):.4g} ≤ q + ε̂_out + r = {total:.4g}; the "
                              "sampling radius q prevents certification")
            out[name].append(PairDecision(
                a=a, b=b, target=name, decision=decision, better=better, worse=worse,
                delta=delta, se=float(c.mo.se[k]), q=q, eps_out=float(c.eps[k]),
                r=float(c.r[k]), tolerance=float(c.tol[k]), n_tasks=n, n_clusters=g,
                margin=margin, reason=reason, df=df, sampling=plan.sampling,
                dominant_cluster=dominant, skewness=float(c.mo.skew[k] * math.sqrt(g))))
    return {t: tuple(v) for t, v in out.items()}


#: A system whose score is the same on all but at most this many of a pair's common tasks
#: shows no spread that could reveal a rare outcome (see ``_warn_shape``).
RARE_OUTCOMES = 1
#: ``|G₁|`` beyond this is skewed by the standard of symmetric differences: about 5 % of the
#: pairs of the symmetric null designs exceed it at every G from 8 to 40 (see ``_warn_shape``).
SKEW_WARNING = 2.0


def _warn_shape(plan: Plan, inp: _Inputs, c: _Cells, values: FloatArray,
                decisions: dict[str, tuple[PairDecision, ...]]) -> None:
    """Warn about certified pairs whose scores' shape the radius cannot see.

    Measured on the null designs of docs/explanation/certificates.md (two-system boards
    of rare 0/1 successes, ``p_g ~ Beta(0.3, 7)``, against a calibrated continuous scorer):

    * a rare outcome that did not happen: a false certificate there needs a run of tasks
      without a success, and the sample then looks like a clean gap with a small spread
      (its skewness is small, so no skewness threshold flags it). A certified pair where
      either system scores the same value on all but at most ``RARE_OUTCOMES`` (1) of the
      common tasks warns: on that design (8 to 40 clusters, 2 and 10 systems) it flagged
      719 of the default radius's 1,017 false certificates, and it never fires on a
      continuous score.
    * skew the plan's radius ignores: under ``"cr2-bm"`` or ``"cr1"``, a certified pair whose
      cluster-level differences are skewed, ``|G₁| > SKEW_WARNING`` (2), and which the same
      variance and degrees of freedom would not certify once the Cornish–Fisher skewness
      terms of ``"cr2-bm-cf"`` widen its quantile. The threshold is the 95th percentile of
      ``|G₁|`` over the pairs of the symmetric null designs (normal and t(3) noise;
      balanced, mild and lognormal cluster sizes), which sits at 1.96–2.07 for every G
      from 8 to 40; 27–39 % of the rare-binary pairs and 5–28 % of the lognormal-effect
      pairs exceed it. Without the threshold the skewness terms alone would also name up
      to a third of the correct certificates of symmetric designs (the power the default
      gives up there), whose sample skewness is noise. Under ``"cr2-bm-cf"`` the skewness
      is in the radius and nothing more is flagged: the false certificates that remain come
      from samples whose skewness is small.
    """
    T = len(c.targets)
    level = 1.0 - plan.delta_prime / (2.0 * len(c.pairs))
    skewed: list[str] = []
    rare: list[str] = []
    if plan.sampling != "cr2-bm-cf":  # the plan's own variance and df, plus the skewness terms
        q_cf = _radius(c.mo, c.tq + _cornish_fisher(level, c.mo.skew))
    cells = [(p * T + t, pd) for t, name in enumerate(c.targets)
             for p, pd in enumerate(decisions[name]) if pd.decision == "certified"]
    if not cells:
        return
    rows = np.array([k for k, _ in cells])
    both = np.array([c.pairs[k // T] for k, _ in cells])  # (n, 2) systems of each cell
    off = np.stack([_off_mode(values[both[:, j], :, rows % T], c.mask[rows])
                    for j in (0, 1)], axis=1)
    for (k, pd), k_off, (ia, ib) in zip(cells, off, both, strict=True):
        where = f"{pd.better} ≻ {pd.worse} on `{pd.target}`"
        if (plan.sampling != "cr2-bm-cf" and abs(pd.skewness) > SKEW_WARNING
                and abs(pd.delta) <= q_cf[k] + c.rad[k]):
            skewed.append(f"{where} (G₁ = {pd.skewness:.2g})")
        for s, o in ((ia, k_off[0]), (ib, k_off[1])):
            if o <= RARE_OUTCOMES:
                rare.append(f"{where} ({inp.systems[s]} differs from its most common score "
                            f"on {o} of {int(c.mo.n[k])} tasks)")
                break
    if skewed:
        warnings.warn(
            f"certify.certify: {len(skewed)} certified pair(s) have skewed differences "
            f"(|G₁| > {SKEW_WARNING:g}) and would not be certified once their skewness is "
            f"accounted for ({_shown(skewed)}): the "
            f"t reference of sampling = {plan.sampling!r} assumes symmetric differences. "
            "Use sampling = \"cr2-bm-cf\" (the default)", DegenerateDataWarning, stacklevel=3)
    if rare:
        warnings.warn(
            f"certify.certify: {len(rare)} certified pair(s) rest on a system whose score "
            f"barely varies ({_shown(rare)}): if that score is a rare 0/1 outcome, a success "
            "that did not happen leaves no trace that any sampling radius computed from these "
            "scores can see. Add tasks, or check the pair with certify.sampling_radius(..., "
            "sampling=\"betting\", score_range=(low, high))", DegenerateDataWarning,
            stacklevel=3)


def _off_mode(x: FloatArray, keep: BoolArray) -> NDArray[np.intp]:
    """Per row, how many kept tasks differ from the row's most common value, capped at 2
    (0: constant; 1: all but one task equal; 2: anything else); rows keep ≥ 2 tasks."""
    n = keep.sum(axis=1)
    xs = np.sort(np.where(keep, x, np.inf), axis=1)
    at = np.arange(len(xs))
    first, second, last, penult = xs[:, 0], xs[at, 1], xs[at, n - 1], xs[at, n - 2]
    return np.where(first == last, 0, np.where((second == last) | (first == penult), 1, 2))


def _shown(rows: list[str]) -> str:
    return "; ".join(rows[:3]) + (f"; and {len(rows) - 3} more" if len(rows) > 3 else "")


def _dominant(inp: _Inputs, counts: FloatArray) -> str:
    """The label of the cluster holding the most of a cell's tasks."""
    return inp.clusters[int(np.argmax(counts))]


def _ladder(plan: Plan, inp: _Inputs, c: _Cells, values: FloatArray, used: BoolArray,
            decisions: tuple[PairDecision, ...], adm: Admissibility) -> tuple[LadderRung, ...]:
    t = plan.targets.index(plan.target)
    T = len(plan.targets)
    rows = np.arange(len(c.pairs)) * T + t
    names = inp.systems
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (values[:, :, t] * used).sum(axis=1) / used.sum(axis=1)
    d, mask = c.d[rows], c.mask[rows]
    n = mask.sum(axis=1).astype(np.float64)
    mean = c.mo.mean[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.where(mask, d - mean[:, None], 0.0) ** 2).sum(axis=1) / (n - 1.0)
        se_iid = np.sqrt(var / n)
    t1 = _t_quantiles(1 - plan.delta_prime / 2, n - 1.0)  # t(n − 1): the iid paired t-test
    # R2–R3 use the plan's cluster-robust variance, so that R3 ⊇ R4 ⊇ R5 telescopes.
    t2 = _critical(1 - plan.delta_prime / 2, c.mo.df[rows], c.mo.skew[rows], plan.sampling)
    se = c.mo.se[rows]
    m = len(c.pairs)

    def order(i: int, sign: float) -> tuple[str, str]:
        a, b = names[c.pairs[i][0]], names[c.pairs[i][1]]
        return (a, b) if sign > 0 else (b, a)

    def rung(rule: str, label: str, adds: str, hits: Iterable[tuple[int, float]],
             out_of: int) -> LadderRung:
        pairs = tuple(sorted(order(i, s) for i, s in hits))
        return LadderRung(rule, label, adds, len(pairs), out_of, pairs)

    with np.errstate(invalid="ignore"):
        r0 = [(i, float(means[a] - means[b])) for i, (a, b) in enumerate(c.pairs)
              if np.isfinite(means[a] - means[b]) and means[a] != means[b]]
        r1 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > t1[i] * se_iid[i]]
        r2 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > t2[i] * se[i]]
        r3 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > c.q[rows[i]]]
    admissible = [i for i, (a, b) in enumerate(c.pairs)
                  if adm.pair(names[a], names[b]).admissible(plan.target)]
    r4 = [(i, s) for i, s in r3 if i in set(admissible)]
    r5 = [(i, decisions[i].delta) for i in range(m) if decisions[i].decision == "certified"]
    return (
        rung("R0", "sorted table", "any difference counts", r0, m),
        rung("R1", "paired t-test", "sampling uncertainty", r1, m),
        rung("R2", "cluster-robust t", "task clustering (" + _METHOD[plan.sampling] + ")", r2,
             m),
        rung("R3", "+ Bonferroni", "multiplicity; a careful conventional analysis", r3, m),
        rung("R4", "+ admissibility test",
             f"{m - len(admissible)} pairs refused before any score is read", r4,
             len(admissible)),
        rung("R5", "+ nuisance radius", "certified (eq. 4)", r5, len(admissible)),
    )

