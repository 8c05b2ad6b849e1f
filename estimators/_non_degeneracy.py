"""Audit (c) of the validity card: non-degeneracy of a decision ([DMC] §4.1)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import Trace
from agentlog.records import Score, Selection, iter_runs

from ._labels import codes
from ._validity_cells import (
    FAIL,
    NOT_PROBED,
    PASS,
    Cell,
    Status,
    TracesLike,
)

# ---------------------------------------------------------------- (c) non-degeneracy


@dataclass(frozen=True, eq=False)
class NonDegeneracyResult:
    """Non-degeneracy of one decision A with outcome Y ([DMC] §4.1).

    Attributes:
        decision: the decision's name.
        actions: the distinct actions A chosen, sorted by ``repr``.
        counts: runs per action.
        means: ``E[Y | A = a]`` per action.
        pvalue: the permutation p-value of differing ``E[Y | A]`` (NaN when ``Var(A) = 0``).
        level: the test's level.
        n_permutations: Monte Carlo permutations of Y.
        cell: the verdict.
    """

    decision: str
    actions: tuple[Any, ...]
    counts: NDArray[np.intp]
    means: NDArray[np.float64]
    pvalue: float
    level: float
    n_permutations: int
    cell: Cell

    @property
    def status(self) -> Status:
        return self.cell.status

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision,
                "actions": [{"action": repr(a), "n": int(n), "mean_outcome": float(m)}
                            for a, n, m in zip(self.actions, self.counts.tolist(),
                                               self.means.tolist(), strict=True)],
                "pvalue": None if math.isnan(self.pvalue) else self.pvalue,
                "level": self.level, "n_permutations": self.n_permutations,
                "status": self.cell.status, "detail": self.cell.detail}


def _non_degeneracy_iv(decisions: Sequence[Hashable], outcomes: ArrayLike, level: float,
                       n_permutations: int, seed: int) -> tuple[list[Hashable],
                                                                NDArray[np.float64]]:
    if isinstance(decisions, str | bytes) or not isinstance(decisions, Sequence):
        raise ValueError("`decisions` must be a sequence of per-run actions")
    actions = list(decisions)
    if not actions:
        raise ValueError("`decisions` is empty; pass one action per run")
    for i, a in enumerate(actions):
        try:
            hash(a)
        except TypeError:
            raise ValueError(f"`decisions`[{i}] must be hashable; found "
                             f"{type(a).__name__}") from None
    try:
        y = np.asarray(outcomes, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`outcomes` must be numbers; {exc}") from None
    if y.shape != (len(actions),):
        raise ValueError(f"`outcomes` must hold one value per decision ({len(actions)}); "
                         f"found shape {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError(f"`outcomes` must be finite; found {y[~np.isfinite(y)][0]} at run "
                         f"{int(np.flatnonzero(~np.isfinite(y))[0])}")
    if not (isinstance(level, float | int) and 0 < level < 1):
        raise ValueError(f"`level` must be in (0, 1); found {level!r}")
    for name, value, low in (("n_permutations", n_permutations, 1), ("seed", seed, 0)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
            raise ValueError(f"`{name}` must be an int >= {low}; found {value!r}")
    return actions, y


def non_degeneracy(
    decisions: Sequence[Hashable],
    outcomes: ArrayLike,
    *,
    name: str = "decision",
    level: float = 0.05,
    n_permutations: int = 9999,
    seed: int = 0,
) -> NonDegeneracyResult:
    """Is a decision non-degenerate: ``Var(A) > 0`` and ``E[Y | A]`` differs? (§4.1)

    Args:
        decisions: the action A of each run (any hashable: a candidate id, a category).
        outcomes: the outcome Y of each run (e.g. its ground-truth score).
        name: the decision's name, for the card.
        level: the permutation test's level.
        n_permutations: Monte Carlo permutations of the outcomes.
        seed: seeds ``numpy.random.default_rng`` for the permutations.

    Returns:
        A ``NonDegeneracyResult``: fail when one action was always chosen (no sample size repairs
        it) or when the permutation test of ``Σ_a n_a Ȳ_a²`` gives ``p > level``; pass when
        ``p ≤ level``; not probed when fewer than two actions occur in two or more runs.
    """
    actions, y = _non_degeneracy_iv(decisions, outcomes, level, n_permutations, seed)
    levels, code = codes(actions, name="decisions", levels=sorted(set(actions), key=repr))
    k, n = len(levels), len(actions)
    counts = np.bincount(code, minlength=k).astype(np.intp)
    means = np.bincount(code, weights=y, minlength=k) / counts
    item = f"non-degeneracy: {name}"
    if k < 2:
        cell = Cell(item, FAIL, f"Var(A) = 0: {levels[0]!r} chosen in all {n} runs; the "
                    "decision is degenerate and no sample size repairs it")
        return NonDegeneracyResult(name, tuple(levels), counts, means, math.nan, float(level),
                                   int(n_permutations), cell)
    replicated = counts >= 2
    n_rep = int(replicated.sum())
    once = k - n_rep
    seen = (f"{k} actions: {n_rep} seen in two or more runs, {once} seen once"
            if once else f"{k} actions")
    if n_rep < 2:
        # With (almost) every action seen once, E[Y|A] cannot be compared: the permutation
        # statistic is then nearly constant and its p-value says nothing either way.
        cell = Cell(item, NOT_PROBED, f"Var(A) > 0 ({seen}), but only {n_rep} "
                    "action(s) occur in two or more runs; comparing E[Y|A] needs at least "
                    "two replicated actions (record more runs, or a coarser decision)")
        return NonDegeneracyResult(name, tuple(levels), counts, means, math.nan, float(level),
                                   int(n_permutations), cell)
    # The test compares the replicated actions only: a run whose action was seen once
    # carries no within-action information, and a verdict resting on such runs would
    # read noise as a difference of E[Y|A].
    keep = replicated[code]
    m = int(keep.sum())
    if 2 * m < n:
        # Most runs chose an action no other run chose: a verdict from the few that did
        # would speak for a minority of the data, so the decision is not probed.
        cell = Cell(item, NOT_PROBED, f"Var(A) > 0 ({seen}), but only {m} of {n} runs chose "
                    "an action another run also chose; a test of E[Y|A] would rest on a "
                    "minority of the runs (record more runs, or a coarser decision)")
        return NonDegeneracyResult(name, tuple(levels), counts, means, math.nan, float(level),
                                   int(n_permutations), cell)
    rep_index = np.cumsum(replicated) - 1
    sub_code = rep_index[code[keep]]
    sub_y = y[keep]
    sub_counts = counts[replicated]
    onehot = np.zeros((m, n_rep))
    onehot[np.arange(m), sub_code] = 1.0
    sub_means = means[replicated]
    observed = float((sub_means * sub_means * sub_counts).sum())
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    step = max(1, (1 << 22) // m)
    for lo in range(0, n_permutations, step):
        hi = min(n_permutations, lo + step)
        perm = rng.permuted(np.broadcast_to(sub_y, (hi - lo, m)), axis=1)
        sums = perm @ onehot
        null[lo:hi] = (sums * sums / sub_counts).sum(axis=1)
    gamma = abs(observed) * np.finfo(np.float64).eps * 100
    pvalue = float((1 + np.count_nonzero(null >= observed - gamma)) / (1 + n_permutations))
    verdict = PASS if pvalue <= level else FAIL
    relation = "≤" if verdict == PASS else ">"
    over = f" over the {m} runs of replicated actions" if once else ""
    cell = Cell(item, verdict, f"Var(A) > 0 ({seen}); E[Y|A] = "
                f"{{{_summarize_actions(levels, means, counts)}}}; permutation p = "
                f"{pvalue:.4f} {relation} {level}{over}")
    return NonDegeneracyResult(name, tuple(levels), counts, means, pvalue, float(level),
                               int(n_permutations), cell)


SHOWN_ACTIONS = 5  # E[Y|A] entries a cell or a Markdown row shows; to_dict keeps them all


def _summarize_actions(levels: Sequence[Any], means: NDArray[np.float64],
                       counts: NDArray[np.intp]) -> str:
    """E[Y|A] of the most frequent replicated actions, then how many are not shown."""
    order = sorted((i for i in range(len(levels)) if counts[i] >= 2),
                   key=lambda i: (-int(counts[i]), repr(levels[i])))
    shown = ", ".join(f"{levels[i]!r}: {means[i]:.3f} (n={int(counts[i])})"
                      for i in order[:SHOWN_ACTIONS])
    rest = len(order) - SHOWN_ACTIONS
    once = int((counts == 1).sum())
    extra = [f"{rest} more replicated"] if rest > 0 else []
    extra += [f"{once} seen once"] if once else []
    return shown + (f", … ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class DecisionOutcomes:
    """Per-run action and outcome of one decision stream, read from traces.

    Attributes:
        decision: the stream name.
        score: the Score name used as outcome.
        actions: per run, the candidate id chosen, or the sorted tuple of the distinct ids
            chosen when the run made the decision with different outcomes more than once.
        outcomes: per run, the value of the run's last Score named ``score``.
        runs_without_decision, runs_without_score: runs left out.
    """

    decision: str
    score: str
    actions: tuple[Any, ...]
    outcomes: NDArray[np.float64]
    runs_without_decision: int
    runs_without_score: int


_pool_decoder = msgspec.msgpack.Decoder(list[Any])


def decision_outcomes(traces: TracesLike, *, decision: str, score: str) -> DecisionOutcomes:
    """Per-run action A of stream ``decision`` and outcome Y (Score ``score``) from traces.

    A run's action is the candidate id it chose in the stream, or the sorted tuple of the
    distinct ids when it chose differently at different steps (e.g. retried at one fault
    and skipped at another). Runs that never made the decision, or have no such score,
    are left out and counted.
    """
    actions: list[Any] = []
    outcomes: list[float] = []
    no_decision = no_score = 0
    current: Trace | None = None
    pools: dict[bytes, list[Any]] = {}
    # One run at a time (a run's selections and scores are its own records): memory holds
    # the current run and the per-run actions and outcomes, never a whole file.
    for trace, run in iter_runs(traces, name="traces"):
        if trace is not current:
            current, pools = trace, {}
        chosen: set[Any] = set()
        last: float | None = None
        for rec in run.records:
            kind = type(rec)
            if kind is Selection and rec.name == decision:
                if rec.pool not in pools:
                    pools[rec.pool] = _pool_decoder.decode(trace.blob(rec.pool))
                chosen.add(pools[rec.pool][rec.choice])
            elif kind is Score and rec.name == score:
                last = rec.value
        if not chosen:
            no_decision += 1
        elif last is None:
            no_score += 1
        else:
            ids = sorted(chosen, key=repr)
            actions.append(ids[0] if len(ids) == 1 else tuple(ids))
            outcomes.append(last)
    return DecisionOutcomes(decision, score, tuple(actions), np.asarray(outcomes, np.float64),
                            no_decision, no_score)
