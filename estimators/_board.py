"""The certified leaderboard and its parts: pair decisions, the ladder, calibration."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from agentlog.display import (
    format_number,
    html_repr,
    render_fields,
    render_notes,
    render_table,
)

from ._admissibility import Admissibility, _j
from ._plan import COMPOSITE, Plan
from ._ranks import RankIntervalsResult, cycle_notes, rank_text, render_rank_figure

__all__ = [
    "BoardResult",
    "CalibrationResult",
    "LadderRung",
    "LeaveOneOut",
    "PairDecision",
]

Decision = Literal["certified", "undecided-sampling", "undecided-attribution", "refused",
                   "not-enough-common-tasks"]
# The columns of a pair and of a rung, as `agentlog certify` prints them.
_PAIR_COLUMNS = ["pair", "decision", "Δ̂", "q", "df", "ε̂_out", "r", "tasks", "margin"]
_RUNG_COLUMNS = ["rule", "analysis", "adds", "pairs ordered"]
_LOO_COLUMNS = ["cluster left out", "certified", "Jaccard", "reversed", "winners",
                "winner flip"]


def _pair_row(p: PairDecision) -> list[str]:
    decision = (f"certified: {p.better} ≻ {p.worse}" if p.decision == "certified"
                else p.decision)
    return [f"{p.a} vs {p.b}", decision, format_number(p.delta, "+.3f"), format_number(p.q),
            format_number(p.df, ".3g"), format_number(p.eps_out, ".3g"),
            format_number(p.r, ".3g"), str(p.n_tasks), format_number(p.margin, ".3g")]


def _rung_row(r: LadderRung) -> list[str]:
    return [r.rule, r.label, r.adds, f"{r.decided} of {r.out_of}"]


def _loo_row(lo: LeaveOneOut) -> list[Any]:
    return [lo.cluster, lo.certified, format_number(lo.jaccard, ".2f"), lo.flips,
            ", ".join(lo.winners), "yes" if lo.winner_flip else "no"]


@dataclass(frozen=True)
class PairDecision:
    """The decision on one pair and target.

    Attributes:
        a, b: the pair, in family order.
        target: ``"composite"`` or a readout.
        decision: ``"certified"``, ``"undecided-sampling"``, ``"undecided-attribution"``,
            ``"refused"`` or ``"not-enough-common-tasks"``.
        better, worse: the certified order (``None`` unless certified).
        delta: ``Δ̂ = mean(y_A − y_B)`` over the common tasks, oriented so that a positive
            value favours ``a`` (a lower-is-better readout is negated).
        se: the cluster-robust standard error (``sampling``); q: the sampling radius,
            ``crit · se`` with ``crit`` the Bonferroni ``t(df)`` quantile, plus the
            Cornish–Fisher skewness terms under ``"cr2-bm-cf"`` (``inf`` for a
            zero-variance pair, which is never certified).
        eps_out, r: the nuisance radius and its one-sided radius (Def. 7).
        tolerance: ``ε_fair``.
        n_tasks, n_clusters: the common tasks and their clusters.
        margin: ``|Δ̂| / (q + ε̂_out + r)``; certified iff > 1.
        reason: why the pair is refused, not decided or undecided.
        df: the degrees of freedom of q's t quantile: Bell–McCaffrey's effective degrees of
            freedom under ``"cr2-bm-cf"`` and ``"cr2-bm"``, ``G − 1`` under ``"cr1"``.
        sampling: the plan's sampling radius, ``"cr2-bm-cf"``, ``"cr2-bm"`` or ``"cr1"``.
        dominant_cluster: when an undecided pair has ``df`` below 3, the cluster holding
            most of its tasks: the pair is sampling-limited because that cluster dominates
            the variance (``None`` otherwise).
        skewness: ``G₁``, the adjusted sample skewness of the pair's cluster-level
            differences (the CR2-scaled cluster totals of ``d_i − Δ̂``; 0 with fewer than 3
            clusters). ``"cr2-bm-cf"`` widens ``q`` by it; ``"cr2-bm"`` and ``"cr1"``
            ignore it, and warn (``DegenerateDataWarning``) about a certified pair with
            ``|G₁| > 2`` that the skewness terms would not certify (about 5 % of the pairs of
            symmetric designs exceed 2, whatever the number of clusters).
    """

    a: str
    b: str
    target: str
    decision: Decision
    better: str | None
    worse: str | None
    delta: float
    se: float
    q: float
    eps_out: float
    r: float
    tolerance: float
    n_tasks: int
    n_clusters: int
    margin: float
    reason: str | None
    df: float = math.nan
    sampling: str = "cr2-bm-cf"
    dominant_cluster: str | None = None
    skewness: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "target": self.target, "decision": self.decision,
                "better": self.better, "worse": self.worse, "delta": _j(self.delta),
                "se": _j(self.se), "q": _j(self.q), "eps_out": _j(self.eps_out),
                "r": _j(self.r), "tolerance": _j(self.tolerance), "n_tasks": self.n_tasks,
                "n_clusters": self.n_clusters, "margin": _j(self.margin),
                "reason": self.reason, "df": _j(self.df), "sampling": self.sampling,
                "dominant_cluster": self.dominant_cluster, "skewness": _j(self.skewness)}

    @html_repr
    def _repr_html_(self) -> str:
        return (render_table(_PAIR_COLUMNS, [_pair_row(self)],
                             caption=f"Pair on {self.target} ({self.sampling})")
                + render_notes([self.reason]))


@dataclass(frozen=True)
class LadderRung:
    """One rule of the conventional ladder ([LBC] Table 2).

    Attributes:
        rule: ``"R0"`` … ``"R5"``; label: its name in Table 2; adds: what it adds.
        decided: pairs the rule orders; out_of: the pairs it is counted over (the family for
            R0–R3, the admissible pairs for R4–R5). R0 compares each system's mean over its
            own tasks; R1 is the paired t-test (t(n−1)), R2 the cluster-robust t of the
            plan's ``sampling`` (CR2 with Bell–McCaffrey df, or CR1 with t(G−1)), both at
            ``δ′``; R3 divides ``δ′`` by the family size. R1–R3 ask only for two tasks
            (clusters): the minimum number of common tasks belongs to the certificate.
        pairs: the orders it concludes, ``(better, worse)``.
    """

    rule: str
    label: str
    adds: str
    decided: int
    out_of: int
    pairs: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "label": self.label, "adds": self.adds,
                "decided": self.decided, "out_of": self.out_of,
                "pairs": [list(p) for p in self.pairs]}

    @html_repr
    def _repr_html_(self) -> str:
        return render_table(_RUNG_COLUMNS, [_rung_row(self)])


@dataclass(frozen=True)
class LeaveOneOut:
    """The board's target certified with one cluster left out (Appendix F.5)."""

    cluster: str
    certified: int
    jaccard: float
    flips: int
    winners: tuple[str, ...]
    winner_flip: bool

    @html_repr
    def _repr_html_(self) -> str:
        return render_table(_LOO_COLUMNS, [_loo_row(self)])


@dataclass(frozen=True)
class CalibrationResult:
    """Calibration and stability of the decision rule ([LBC] Appendix F.5).

    Attributes:
        n_resamples, seed: the sign-flip draws (one ±1 per cluster per draw, shared by every
            pair and target) and their seed.
        nominal: ``δ′``.
        family_rate: the board target's family-wise false-certification rate: the share of
            draws in which any pair of the family is certified on the centred, sign-flipped
            differences.
        mc_se: its Monte Carlo standard error.
        rates: the family-wise rate of every target.
        c_star: the radius scale at which the target's rate equals ``δ′`` (``c*`` > 1: the
            rule is anti-conservative and would need ``c*`` times its radius).
        c_star_by_target: ``c*`` of every target.
        drops: certified relations of the target whose margin is ≤ ``c*`` (those ``c*``
            would remove).
        jaccard_mean, jaccard_min: leave-one-cluster-out overlap of the certified set.
        flips: certified relations reversed when one cluster is left out (summed).
        winner_flips: left-out clusters after which no system that could be first on the
            full board can be first any more.
        leave_one_out: per left-out cluster.
        sampling: the sampling radius the flipped statistics use (the plan's: the null is
            taken of the same rule that decides the board, its skewness terms recomputed on
            every draw under ``"cr2-bm-cf"``).
        min_df: the smallest Bell–McCaffrey effective degrees of freedom over the target's
            decided pairs: a property of the cluster sizes alone, whatever ``sampling``.
        dominated: the target's decided pairs whose effective degrees of freedom are below
            3: one cluster dominates their variance, and there the sign-flip rate is no
            evidence that the rule is valid (see ``warning``).

    What the sign-flip null can and cannot detect: it conditions on the observed centred
    cluster totals ``E_g`` and flips their signs, so the null it builds is symmetric by
    construction. It sees a t reference that does not fit heavy tails or too few clusters
    (flipping a few large totals makes large statistics) and the dependence between pairs
    that share a system. It cannot see skew: sign flips turn any set of totals into a
    symmetric null, so a radius that ignores a long tail of the differences looks calibrated
    (on two-system boards of rare 0/1 successes against a calibrated scorer over 8 clusters
    it reported 0.026–0.034 under ``"cr2-bm"``, whose true family-wise rate there is
    0.07–0.09, and its ``c*`` dropped 4 of 47 false certificates); skew is reported per
    pair instead (``PairDecision.skewness``) and corrected by ``"cr2-bm-cf"``. Nor can it
    see that the cluster sizes themselves make the variance unreliable. Because
    ``Σ E_g = 0``, a cluster holding most tasks has a total as large as all the others
    together, and flipping it does not reproduce how ``Δ̂`` varies over new tasks: with CR1
    on a design where one cluster holds two thirds of the tasks it reports about half the
    true family-wise rate. It assumes independent, sign-symmetric clusters (dependence
    across clusters is invisible to it), treats the nuisance radius as fixed, and has only
    ``2^(G−1)`` distinct sign vectors.
    """

    n_resamples: int
    seed: int
    nominal: float
    family_rate: float
    mc_se: float
    rates: dict[str, float]
    c_star: float
    c_star_by_target: dict[str, float]
    drops: tuple[tuple[str, str], ...]
    jaccard_mean: float
    jaccard_min: float
    flips: int
    winner_flips: int
    leave_one_out: tuple[LeaveOneOut, ...]
    sampling: str = "cr2-bm-cf"
    min_df: float = math.nan
    dominated: tuple[tuple[str, str], ...] = ()

    @property
    def warning(self) -> str | None:
        """Why the sign-flip rate may be comfortable where the truth is not, when it may."""
        if not self.dominated:
            return None
        return (f"{len(self.dominated)} pair(s) have fewer than 3 effective degrees of "
                f"freedom (min {self.min_df:.2g}): one cluster dominates their variance, which "
                "the sign-flip null cannot detect, so its rate is no evidence of validity "
                "there" + (" (and CR1's t(G−1) radius under-covers them: use sampling = "
                           "\"cr2-bm-cf\")" if self.sampling == "cr1" else
                           " (the CR2 radius with Bell–McCaffrey df accounts for it)"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_resamples": self.n_resamples, "seed": self.seed, "nominal": self.nominal,
            "sampling": self.sampling, "min_df": _j(self.min_df),
            "dominated": [list(p) for p in self.dominated], "warning": self.warning,
            "family_rate": _j(self.family_rate), "mc_se": _j(self.mc_se),
            "rates": {k: _j(v) for k, v in self.rates.items()},
            "c_star": _j(self.c_star),
            "c_star_by_target": {k: _j(v) for k, v in self.c_star_by_target.items()},
            "drops": [list(p) for p in self.drops],
            "jaccard_mean": _j(self.jaccard_mean), "jaccard_min": _j(self.jaccard_min),
            "flips": self.flips, "winner_flips": self.winner_flips,
            "leave_one_out": [{"cluster": lo.cluster, "certified": lo.certified,
                               "jaccard": _j(lo.jaccard), "flips": lo.flips,
                               "winners": list(lo.winners), "winner_flip": lo.winner_flip}
                              for lo in self.leave_one_out],
        }

    @html_repr
    def _repr_html_(self) -> str:
        head = render_fields([
            ("sign-flip draws", f"{self.n_resamples:,} (seed {self.seed})"),
            ("family-wise false-certification rate",
             f"{format_number(self.family_rate, '.1%')} ± {format_number(self.mc_se, '.1%')} "
             f"(nominal {format_number(self.nominal, '.0%')})"),
            ("radius scale c*", format_number(self.c_star, ".3g")),
            ("relations c* would drop", len(self.drops)),
            ("leave one cluster out: Jaccard mean (min)",
             f"{format_number(self.jaccard_mean, '.2f')} "
             f"({format_number(self.jaccard_min, '.2f')})"),
            ("relations reversed", self.flips), ("winner flips", self.winner_flips),
            ("sampling", self.sampling), ("min df", format_number(self.min_df, ".3g")),
        ], caption="Calibration ([LBC] Appendix F.5)")
        loo = render_table(_LOO_COLUMNS, map(_loo_row, self.leave_one_out),
                           total=len(self.leave_one_out)) if self.leave_one_out else ""
        return head + loo + render_notes([self.warning])


@dataclass(frozen=True, eq=False)
class BoardResult:
    """A certified leaderboard ([LBC] §6.1, Figure 1, Tables 1–2, Table 16).

    Attributes:
        systems: the systems, best first by their mean on the board's target.
        target: the target the board ranks (``"composite"`` or a readout).
        targets: every target decided (the composite, then each readout).
        scores: ``system -> target -> mean`` over the system's tasks (readouts in their own
            units; the composite is the equal-axis mean of oriented readouts).
        n_tasks: ``system -> tasks`` scored.
        decisions: ``target -> one PairDecision per pair of the family``.
        ranks: ``target -> RankIntervalsResult`` of its certified relation.
        ladder: R0–R5 on the board's target (Table 2).
        calibration: Appendix F.5, when computed.
        admissibility: the decision it used.
        plan: the plan; plan_hash: its hash.
        input_hashes: ``path -> SHA-256`` of every input trace (empty for arrays).
        scores_hash: SHA-256 over the score arrays, masks and clusters used.
        family_size: ``m``; n_clusters: clusters over all tasks.
    """

    systems: tuple[str, ...]
    target: str
    targets: tuple[str, ...]
    scores: dict[str, dict[str, float]]
    n_tasks: dict[str, int]
    decisions: dict[str, tuple[PairDecision, ...]]
    ranks: dict[str, RankIntervalsResult]
    ladder: tuple[LadderRung, ...]
    calibration: CalibrationResult | None
    admissibility: Admissibility
    plan: Plan
    plan_hash: str
    input_hashes: dict[str, str]
    scores_hash: str
    family_size: int
    n_clusters: int

    @property
    def sampling(self) -> str:
        """The sampling radius of every pair: ``"cr2-bm-cf"``, ``"cr2-bm"`` or ``"cr1"``."""
        return str(self.plan.sampling)

    @property
    def pairs(self) -> tuple[PairDecision, ...]:
        """The decisions on the board's target."""
        return self.decisions[self.target]

    def decision(self, a: str, b: str, target: str | None = None) -> PairDecision:
        """The decision on the pair ``{a, b}`` (either order) for ``target``."""
        for p in self.decisions[target or self.target]:
            if {p.a, p.b} == {a, b}:
                return p
        raise KeyError(f"the pair ({a!r}, {b!r}) is not in the plan's family")

    def certified(self, target: str | None = None) -> list[tuple[str, str]]:
        """Certified ``(better, worse)`` relations, sorted."""
        return sorted((p.better, p.worse) for p in self.decisions[target or self.target]
                      if p.better is not None and p.worse is not None)

    def rank(self, system: str, target: str | None = None) -> tuple[int, int]:
        """The certified rank interval of ``system``."""
        return self.ranks[target or self.target].intervals[system]

    def counts(self, target: str | None = None) -> dict[str, int]:
        """How many pairs got each decision."""
        out = dict.fromkeys(("certified", "undecided-sampling", "undecided-attribution",
                             "refused", "not-enough-common-tasks"), 0)
        for p in self.decisions[target or self.target]:
            out[p.decision] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (non-finite numbers become ``None``)."""
        rank = self.ranks[self.target]
        return {
            "version": 1,
            "target": self.target,
            "targets": list(self.targets),
            "readouts": list(self.plan.readout_names),
            "plan_hash": self.plan_hash,
            "plan": self.plan.model_dump(mode="json"),
            "input_hashes": dict(self.input_hashes),
            "scores_hash": self.scores_hash,
            "family_size": self.family_size,
            "n_clusters": self.n_clusters,
            "sampling": self.sampling,
            "systems": [{"system": s, "rank": list(rank.intervals[s]),
                         "pinned": rank.pinned(s), "n_tasks": self.n_tasks[s],
                         "composite": _j(self.scores[s][COMPOSITE]),
                         "scores": {t: _j(v) for t, v in self.scores[s].items()
                                    if t != COMPOSITE}}
                        for s in self.systems],
            "counts": self.counts(),
            "pairs": [p.to_dict() for p in self.pairs],
            "cells": {t: [p.to_dict() for p in self.decisions[t]]
                      for t in self.targets if t != self.target},
            "ranks": {t: r.to_dict() for t, r in self.ranks.items()},
            "cycles": [list(c) for c in rank.cycles],
            "ladder": [r.to_dict() for r in self.ladder],
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "admissibility": self.admissibility.to_dict(),
        }

    @html_repr
    def _repr_html_(self) -> str:
        rank = self.ranks[self.target]
        readouts = list(self.plan.readout_names)
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items() if v)
        head = render_fields([
            ("target", self.target), ("systems", len(self.systems)),
            ("pairs (family size)", self.family_size), ("decisions", counts or "-"),
            ("clusters", self.n_clusters), ("sampling radius", self.sampling),
            ("plan", f"{self.plan.name or '-'} (sha256 {self.plan_hash[:12]}…)"),
        ], caption="Certified leaderboard ([LBC])")
        columns = [COMPOSITE, *readouts]
        systems = render_table(
            ["rank", "system", "tasks", *(f"{c} (target)" if c == self.target else c
                                          for c in columns)],
            ([rank_text(*rank.intervals[s]), s, self.n_tasks.get(s),
              *(self.scores.get(s, {}).get(c) for c in columns)] for s in self.systems),
            caption="Systems, best first on the target (rank: certified interval; ● pinned)",
            total=len(self.systems))
        figure = render_rank_figure(self.systems, rank.intervals, labels={
            s: format_number(self.scores.get(s, {}).get(self.target)) for s in self.systems})
        pairs = render_table(_PAIR_COLUMNS, map(_pair_row, self.pairs),
                             caption=f"Pairs on {self.target} (certified iff |Δ̂| > q + "
                                     "ε̂_out + r, eq. 4)", total=len(self.pairs))
        ladder = render_table(_RUNG_COLUMNS, map(_rung_row, self.ladder),
                              caption="Conventional ladder beside the certificate ([LBC] "
                                      "Table 2)")
        calibration = self.calibration._repr_html_() if self.calibration else ""
        return (head + systems + figure + pairs + render_notes(cycle_notes(rank.cycles))
                + ladder + calibration)

