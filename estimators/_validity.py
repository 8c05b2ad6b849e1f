"""The validity card: what a benchmark score licenses ([DMC] §4.1, §4.4, §5.5).

Four audits, each a cell that is ``"pass"``, ``"fail"`` or ``"not probed"``; a not-probed
item is never read as passing.

(a) **Scorer probe battery** (§3.2, §4.4 "BenchAudit"). For each probe task the user gives
    the correct submission and the ground-truth ids; the battery derives four forged
    variants and runs the user's scorer ``scorer(submission, truth) -> float`` on all five:

    * *empty*: no records, a well-formed self-report;
    * *fabricated*: as many records, same fields, invented ids (not in the truth);
    * *duplicate-laden*: every correct record submitted twice;
    * *contradictory metadata*: the correct records with a self-report that contradicts
      them (the self-reported row count set to 0 or, for an empty submission, 1).

    When the task names the metadata key that self-reports the row count (``count_key``),
    the empty, fabricated and duplicate-laden variants keep it consistent with their
    records, so they look well-formed.

    Rule: the scorer is **criterion-sensitive** iff on every probe task it scores the
    correct submission strictly above the empty, the fabricated and the duplicate-laden
    variant (by more than ``margin``, default 0): it separates correct from degraded work
    product. Contradictory metadata is the converse probe: the work product is correct and
    only the report is wrong, so a scorer that grades the data scores it as the correct
    submission (within ``tolerance``); a drop means it grades the report (§3.2). That cell
    is reported but does not gate the claim. A scorer that raises or returns a non-finite
    value on a probe leaves that comparison not probed.

(b) **Decision-ownership map** (§4.1, §4.2), read from traces: every ``select`` stream with
    its recorded ``owner`` (``"model"``, ``"scaffold"``, or ``"mixed"`` when both occur) and
    every ``proceed`` stream (owner not recorded: ``"unrecorded"``). The cell passes iff
    the claimed decisions ``D_claimed`` (default: every decision in the traces) are all
    model-owned: ``D_claimed ⊆ D_model``. A claimed decision absent from the traces fails
    (nothing shows the model making it); an ``"unrecorded"`` one is not probed.

(c) **Non-degeneracy** of a model-owned decision (§4.1): ``Var(A) > 0`` over the chosen
    actions and ``E[Y | A = a1] ≠ E[Y | A = a2]`` for some pair. Test: fail when a single
    action was ever chosen; otherwise a seeded Monte Carlo permutation test (9,999
    permutations of Y across runs) of the between-action statistic ``Σ_a n_a Ȳ_a²``
    (equivalent to the one-way ANOVA F under permutation), ``p = (1 + #{T* ≥ T})/(1 + R)``;
    pass iff ``p ≤ level`` (0.05). Only actions chosen in two or more runs enter the test
    (a run whose action was seen once carries no within-action information); with fewer
    than two such actions, or when they cover fewer than half of the runs, the cell is
    not probed.

(d) **Licensed claim**, the strongest reading the lattice of §5.5 permits:

    * scorer not probed → **none**;
    * scorer not criterion-sensitive (a shape scorer) → **self-report compliance**;
    * criterion-sensitive, ``scorer_basis="specification"`` → **specification compliance**;
    * criterion-sensitive outcome scorer, and the model owns the claimed decisions, they
      are non-degenerate (ownership is necessary, not sufficient: §4.1) and the runs
      replay (every trace verifies *and* a re-execution was run and matched: verification
      alone leaves the gate not probed) → **model capability**;
    * otherwise (an outcome scorer over an uncontrolled scaffold) → **system performance**.

    ``model capability`` also licenses ``system performance``; the other claims license
    only themselves. The card checks the asserted ``claim`` against the licensed one.

Example:
    >>> from agentlog.estimators import reliability
    >>> from agentlog.examples import scorers
    >>> card = reliability.validity_card(scorer=scorers.shape_scorer,
    ...                                  probes=scorers.probe_tasks())
    >>> card.cell("scorer: criterion-sensitive").status
    'fail'
    >>> card.licensed_claim
    'self-report compliance'
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import Trace, read_traces, verify
from agentlog.records import Score, Selection, iter_runs

from ._record_f1 import record_f1

Status = Literal["pass", "fail", "not probed"]
PASS: Status = "pass"
FAIL: Status = "fail"
NOT_PROBED: Status = "not probed"

Claim = Literal["model capability", "system performance", "specification compliance",
                "self-report compliance", "none"]
#: The claims of the lattice, strongest first ([DMC] §5.5).
CLAIMS: tuple[Claim, ...] = ("model capability", "system performance",
                             "specification compliance", "self-report compliance", "none")
_LICENSES: dict[str, frozenset[str]] = {
    "model capability": frozenset({"model capability", "system performance"}),
    "system performance": frozenset({"system performance"}),
    "specification compliance": frozenset({"specification compliance"}),
    "self-report compliance": frozenset({"self-report compliance"}),
    "none": frozenset(),
}
ScorerBasis = Literal["outcome", "specification"]

CORRECT = "correct"
EMPTY = "empty"
FABRICATED = "fabricated"
DUPLICATE_LADEN = "duplicate-laden"
CONTRADICTORY = "contradictory metadata"
VARIANTS = (CORRECT, EMPTY, FABRICATED, DUPLICATE_LADEN, CONTRADICTORY)
DEGRADED = (EMPTY, FABRICATED, DUPLICATE_LADEN)

TracesLike = str | os.PathLike[str] | Trace | Sequence[str | os.PathLike[str] | Trace]


@dataclass(frozen=True)
class Cell:
    """One item of the card: ``status`` is ``"pass"``, ``"fail"`` or ``"not probed"``."""

    item: str
    status: Status
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"item": self.item, "status": self.status, "detail": self.detail}


def _combine(statuses: Sequence[Status]) -> Status:
    """``fail`` if any fails, ``pass`` only if there is at least one and all pass."""
    if FAIL in statuses:
        return FAIL
    if statuses and all(s == PASS for s in statuses):
        return PASS
    return NOT_PROBED


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return out


# --------------------------------------------------------------------- (a) probe battery


@dataclass(frozen=True)
class Submission:
    """A submitted work product: records (mappings with an ``"id"``) and a self-report."""

    records: tuple[Mapping[str, Any], ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def ids(self) -> list[Any]:
        """The record ids, in order, repeats included."""
        return [r.get("id") for r in self.records]


@dataclass(frozen=True)
class ProbeTask:
    """One probe: the correct submission of a task and its ground-truth record ids.

    Attributes:
        name: the task's name.
        correct: the correct submission; its record ids must equal ``truth``.
        truth: the ground-truth record ids.
        count_key: the metadata key that self-reports the row count, if any: the battery
            keeps it consistent in the degraded variants and contradicts it in the
            contradictory-metadata variant.
        contradictory_metadata: an explicit contradictory self-report (overrides the one
            derived from ``count_key``). Without either, that probe is not probed.
    """

    name: str
    correct: Submission
    truth: tuple[Hashable, ...]
    count_key: str | None = None
    contradictory_metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "truth", tuple(self.truth))


Scorer = Callable[[Submission, tuple[Hashable, ...]], float]


def _with_count(task: ProbeTask, records: Sequence[Mapping[str, Any]]) -> Submission:
    meta = dict(task.correct.metadata)
    if task.count_key is not None:
        meta[task.count_key] = len(records)
    return Submission(tuple(records), meta)


def probe_variants(task: ProbeTask) -> dict[str, Submission | None]:
    """The five submissions of the battery for ``task`` (None: cannot be derived)."""
    correct = task.correct.records
    truth = set(task.truth)
    fabricated = []
    for i, rec in enumerate(correct):
        new_id: Any = f"fabricated-{task.name}-{i:06d}"
        while new_id in truth:
            new_id = f"{new_id}-x"
        fabricated.append({**rec, "id": new_id})
    contradictory: Submission | None = None
    if task.contradictory_metadata is not None:
        contradictory = Submission(correct, task.contradictory_metadata)
    elif task.count_key is not None:
        meta = dict(task.correct.metadata)
        meta[task.count_key] = 0 if correct else 1
        contradictory = Submission(correct, meta)
    return {
        CORRECT: task.correct,
        EMPTY: _with_count(task, []),
        FABRICATED: _with_count(task, fabricated),
        DUPLICATE_LADEN: _with_count(task, [*correct, *correct]),
        CONTRADICTORY: contradictory,
    }


@dataclass(frozen=True, eq=False)
class ProbeReport:
    """The scorer's score on every (probe task, variant) and the cells they decide.

    Attributes:
        tasks: probe task names (rows of ``scores``).
        variants: ``VARIANTS`` (columns of ``scores``).
        scores: shape ``(n_tasks, 5)``; NaN where not probed.
        errors: ``(task, variant, message)`` for every probe the scorer could not score.
        cells: one per degraded variant ("separates ...") and the contradictory-metadata
            probe ("ignores contradictory metadata").
        criterion_sensitive: the combined cell of the three degraded variants.
        margin, tolerance: the separation margin and the contradictory-metadata tolerance.
    """

    tasks: tuple[str, ...]
    variants: tuple[str, ...]
    scores: NDArray[np.float64]
    errors: tuple[tuple[str, str, str], ...]
    cells: tuple[Cell, ...]
    criterion_sensitive: Cell
    margin: float
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks),
            "variants": list(self.variants),
            "scores": [[None if math.isnan(v) else float(v) for v in row]
                       for row in self.scores.tolist()],
            "errors": [{"task": t, "variant": v, "message": m} for t, v, m in self.errors],
            "criterion_sensitive": self.criterion_sensitive.to_dict(),
            "cells": [c.to_dict() for c in self.cells],
            "margin": self.margin,
            "tolerance": self.tolerance,
        }

    def to_markdown(self) -> str:
        rows = [[t, *(_fmt(v) for v in row)] for t, row in zip(self.tasks, self.scores.tolist(),
                                                               strict=True)]
        lines = _table(["task", *self.variants], rows)
        lines += [f"- {t} / {v}: {m}" for t, v, m in self.errors]
        return "\n".join(lines)


def _probe_iv(scorer: Any, probes: Any, margin: float, tolerance: float) -> list[ProbeTask]:
    if not callable(scorer):
        raise ValueError(f"`scorer` must be callable as scorer(submission, truth) -> float; "
                         f"found {type(scorer).__name__}")
    if isinstance(probes, ProbeTask):
        probes = [probes]
    if not isinstance(probes, Sequence) or not probes:
        raise ValueError("`probes` must be a non-empty sequence of ProbeTask")
    for i, task in enumerate(probes):
        if not isinstance(task, ProbeTask):
            raise ValueError(f"`probes`[{i}] must be a ProbeTask; found {type(task).__name__}")
        f1 = record_f1(task.correct.records, task.truth)
        if f1.f1 != 1.0:
            raise ValueError(
                f"`probes`[{i}] ({task.name!r}): the correct submission does not match its "
                f"truth (precision {f1.precision:.3f}, recall {f1.recall:.3f}); the battery "
                "degrades a correct submission")
    for name, value in (("margin", margin), ("tolerance", tolerance)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"`{name}` must be a finite number >= 0; found {value!r}")
    return list(probes)


def probe_scorer(
    scorer: Scorer,
    probes: Sequence[ProbeTask] | ProbeTask,
    *,
    margin: float = 0.0,
    tolerance: float = 1e-9,
) -> ProbeReport:
    """Run ``scorer`` on the probe battery and decide criterion sensitivity ([DMC] §4.4).

    Args:
        scorer: ``scorer(submission, truth) -> float``, the user's scorer.
        probes: the probe tasks (correct submission and truth for a few tasks).
        margin: the correct submission must beat each degraded variant by more than this.
        tolerance: the contradictory-metadata probe passes when its score is within this
            of the correct submission's.

    Returns:
        A ``ProbeReport``.
    """
    tasks = _probe_iv(scorer, probes, margin, tolerance)
    scores = np.full((len(tasks), len(VARIANTS)), np.nan)
    errors: list[tuple[str, str, str]] = []
    for i, task in enumerate(tasks):
        for j, (variant, sub) in enumerate(probe_variants(task).items()):
            if sub is None:
                errors.append((task.name, variant, "no self-report to contradict: give the "
                               "task a count_key or contradictory_metadata"))
                continue
            try:
                value = float(scorer(sub, task.truth))
            except Exception as exc:  # an audit records a failing scorer, it does not stop
                errors.append((task.name, variant, f"scorer raised {type(exc).__name__}: "
                               f"{exc}"))
                continue
            if not math.isfinite(value):
                errors.append((task.name, variant, f"scorer returned {value}"))
                continue
            scores[i, j] = value
    correct = scores[:, 0]
    cells = []
    for variant in DEGRADED:
        col = scores[:, VARIANTS.index(variant)]
        probed = ~np.isnan(correct) & ~np.isnan(col)
        separated = probed & (correct > col + margin)
        tied = probed & ~separated
        if tied.any():
            t = int(np.flatnonzero(tied)[0])
            status, detail = FAIL, (
                f"not separated on {int(tied.sum())}/{len(tasks)} task(s), e.g. "
                f"{tasks[t].name!r}: correct {correct[t]:.3f} vs {variant} {col[t]:.3f}")
        elif probed.all():
            status, detail = PASS, (
                f"correct above {variant} on all {len(tasks)} task(s) (mean "
                f"{correct.mean():.3f} vs {col.mean():.3f})")
        else:
            status, detail = NOT_PROBED, (
                f"{int((~probed).sum())}/{len(tasks)} task(s) could not be scored")
        cells.append(Cell(f"scorer: separates {variant}", status, detail))
    combined = _combine([c.status for c in cells])
    rule = ("correct strictly above empty, fabricated and duplicate-laden on every task"
            + (f" by more than {margin}" if margin else ""))
    verdict = {PASS: "criterion-sensitive", FAIL: "not criterion-sensitive",
               NOT_PROBED: "some probes could not be scored"}[combined]
    sensitive = Cell("scorer: criterion-sensitive", combined, f"{verdict}; rule: {rule}")
    col = scores[:, VARIANTS.index(CONTRADICTORY)]
    probed = ~np.isnan(correct) & ~np.isnan(col)
    moved = probed & (np.abs(correct - col) > tolerance)
    if moved.any():
        t = int(np.flatnonzero(moved)[0])
        cells.append(Cell("scorer: ignores contradictory metadata", FAIL,
                          f"the score moves when only the self-report changes: "
                          f"{tasks[t].name!r} correct {correct[t]:.3f} vs contradictory "
                          f"{col[t]:.3f}; the scorer grades the report"))
    elif probed.all():
        cells.append(Cell("scorer: ignores contradictory metadata", PASS,
                          f"same score with a contradictory self-report on all {len(tasks)} "
                          "task(s): the scorer grades the data"))
    else:
        cells.append(Cell("scorer: ignores contradictory metadata", NOT_PROBED,
                          f"{int((~probed).sum())}/{len(tasks)} task(s) could not be probed"))
    return ProbeReport(
        tasks=tuple(t.name for t in tasks), variants=VARIANTS, scores=scores,
        errors=tuple(errors), cells=tuple([sensitive, *cells]), criterion_sensitive=sensitive,
        margin=float(margin), tolerance=float(tolerance),
    )


# ------------------------------------------------------------------ (b) ownership map


@dataclass(frozen=True)
class DecisionOwnership:
    """Who owns one decision stream across the traces.

    Attributes:
        name: the stream name (``select(..., name=)`` / ``proceed(..., name=)``).
        kind: ``"select"`` or ``"proceed"``.
        owner: ``"model"``, ``"scaffold"``, ``"mixed"`` (both recorded) or
            ``"unrecorded"`` (``proceed`` records carry no owner).
        n_model, n_scaffold: records with each owner.
        n_records: every record of the stream.
        n_runs: runs in which the stream occurs.
    """

    name: str
    kind: Literal["select", "proceed"]
    owner: Literal["model", "scaffold", "mixed", "unrecorded"]
    n_model: int
    n_scaffold: int
    n_records: int
    n_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "owner": self.owner,
                "n_model": self.n_model, "n_scaffold": self.n_scaffold,
                "n_records": self.n_records, "n_runs": self.n_runs}


@dataclass(frozen=True)
class OwnershipMap:
    """The decision-ownership map of a set of traces ([DMC] §4.1)."""

    decisions: tuple[DecisionOwnership, ...]
    traces: tuple[str, ...]

    @property
    def model_owned(self) -> frozenset[str]:
        """``D_model``: the streams whose every record is model-owned."""
        return frozenset(d.name for d in self.decisions if d.owner == "model")

    def __getitem__(self, name: str) -> DecisionOwnership:
        for d in self.decisions:
            if d.name == name:
                return d
        raise KeyError(f"no decision stream {name!r}; found "
                       f"{sorted(d.name for d in self.decisions)}")

    def check(self, claimed: Sequence[str] | None = None) -> tuple[Cell, ...]:
        """The cells for ``D_claimed ⊆ D_model``: the combined cell, then one per decision.

        ``claimed=None`` claims every decision in the traces.
        """
        by_name: dict[str, list[DecisionOwnership]] = defaultdict(list)
        for d in self.decisions:
            by_name[d.name].append(d)
        if claimed is None:
            names = sorted(by_name)
            if not names:
                return (Cell("ownership: model owns the claimed decisions", NOT_PROBED,
                             "the traces record no select or proceed decision; name the "
                             "claimed decisions with `claimed_decisions`"),)
            scope = "every decision in the traces"
        else:
            names = list(claimed)
            scope = "the claimed decisions"
        cells = []
        for name in names:
            entries = by_name.get(name, [])
            owners = {d.owner for d in entries}
            if not entries:
                cells.append(Cell(f"ownership: {name}", FAIL,
                                  "claimed but never recorded: no trace shows the model "
                                  "making it (the scaffold may make it silently)"))
            elif owners == {"model"}:
                n = sum(d.n_records for d in entries)
                cells.append(Cell(f"ownership: {name}", PASS, f"model-owned in all {n} "
                                  "records"))
            elif owners & {"scaffold", "mixed"}:
                n = sum(d.n_scaffold for d in entries)
                cells.append(Cell(f"ownership: {name}", FAIL,
                                  f"scaffold-owned in {n} record(s)"))
            else:
                cells.append(Cell(f"ownership: {name}", NOT_PROBED,
                                  "proceed records carry no owner; record the decision "
                                  "with select(..., owner=) to audit it"))
        status = _combine([c.status for c in cells])
        model = sorted(n for n, c in zip(names, cells, strict=True) if c.status == PASS)
        detail = (f"D_claimed ⊆ D_model over {scope}: {len(model)}/{len(names)} "
                  f"model-owned")
        return (Cell("ownership: model owns the claimed decisions", status, detail),
                *cells)

    def to_dict(self) -> dict[str, Any]:
        return {"traces": list(self.traces), "decisions": [d.to_dict() for d in self.decisions]}

    def to_markdown(self) -> str:
        rows = [[d.name, d.kind, d.owner, d.n_model, d.n_scaffold, d.n_runs]
                for d in self.decisions]
        return "\n".join(_table(["decision", "kind", "owner", "model", "scaffold", "runs"],
                                rows))


def ownership_map(traces: TracesLike) -> OwnershipMap:
    """Read which decisions the model owns and which the scaffold owns from traces.

    Args:
        traces: trace paths or ``agentlog.Trace`` objects (one or a sequence).

    Returns:
        An ``OwnershipMap`` with one entry per (stream, kind), sorted by name.
    """
    loaded = read_traces(traces)
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    runs: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    for t_index, trace in enumerate(loaded):
        for sel in trace.selections():
            counts[(sel.name, "select")][sel.owner] += 1
            runs[(sel.name, "select")].add((t_index, sel.run))
        for cont in trace.continuations():
            counts[(cont.name, "proceed")]["unrecorded"] += 1
            runs[(cont.name, "proceed")].add((t_index, cont.run))
    decisions = []
    for (name, kind), c in sorted(counts.items()):
        n_model, n_scaffold = c.get("model", 0), c.get("scaffold", 0)
        owner: Literal["model", "scaffold", "mixed", "unrecorded"]
        if kind == "proceed":
            owner = "unrecorded"
        elif n_model and n_scaffold:
            owner = "mixed"
        else:
            owner = "model" if n_model else "scaffold"
        decisions.append(DecisionOwnership(
            name=name, kind="select" if kind == "select" else "proceed", owner=owner,
            n_model=n_model, n_scaffold=n_scaffold, n_records=sum(c.values()),
            n_runs=len(runs[(name, kind)])))
    return OwnershipMap(tuple(decisions), tuple(str(t.path) for t in loaded))


# ---------------------------------------------------------------- (c) non-degeneracy


@dataclass(frozen=True, eq=False)
class NonDegeneracy:
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
) -> NonDegeneracy:
    """Is a decision non-degenerate: ``Var(A) > 0`` and ``E[Y | A]`` differs? (§4.1)

    Args:
        decisions: the action A of each run (any hashable: a candidate id, a category).
        outcomes: the outcome Y of each run (e.g. its ground-truth score).
        name: the decision's name, for the card.
        level: the permutation test's level.
        n_permutations: Monte Carlo permutations of the outcomes.
        seed: seeds ``numpy.random.default_rng`` for the permutations.

    Returns:
        A ``NonDegeneracy``: fail when one action was always chosen (no sample size repairs
        it) or when the permutation test of ``Σ_a n_a Ȳ_a²`` gives ``p > level``; pass when
        ``p ≤ level``; not probed when fewer than two actions occur in two or more runs.
    """
    actions, y = _non_degeneracy_iv(decisions, outcomes, level, n_permutations, seed)
    levels = sorted(set(actions), key=repr)
    index = {a: i for i, a in enumerate(levels)}
    code = np.fromiter((index[a] for a in actions), dtype=np.intp, count=len(actions))
    k, n = len(levels), len(actions)
    counts = np.bincount(code, minlength=k).astype(np.intp)
    means = np.bincount(code, weights=y, minlength=k) / counts
    item = f"non-degeneracy: {name}"
    if k < 2:
        cell = Cell(item, FAIL, f"Var(A) = 0: {levels[0]!r} chosen in all {n} runs; the "
                    "decision is degenerate and no sample size repairs it")
        return NonDegeneracy(name, tuple(levels), counts, means, math.nan, float(level),
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
        return NonDegeneracy(name, tuple(levels), counts, means, math.nan, float(level),
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
        return NonDegeneracy(name, tuple(levels), counts, means, math.nan, float(level),
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
    return NonDegeneracy(name, tuple(levels), counts, means, pvalue, float(level),
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


# ------------------------------------------------------------- replay and the lattice


REPLAY_ITEM = "replay: runs re-execute"


def replay_check(traces: TracesLike, *, replayed: Cell | None = None) -> Cell:
    """The replay gate of "model capability" ([DMC] §5.5): the runs re-execute.

    A trace that does not verify (``agentlog.verify``: seals, receipts, every draw
    regenerated from its seed, every choice ``argmax(log p + g)``) fails the gate. Traces
    that verify are necessary, not sufficient: without ``replayed``, the result of an
    actual re-execution (the replay engine's cell), the gate is **not probed**, so it
    never licenses "model capability" on verification alone.

    Args:
        traces: the recorded runs.
        replayed: the outcome of re-executing them, when a replay has been run.
    """
    loaded = read_traces(traces)
    problems = []
    for trace in loaded:
        report = verify(trace.path)
        if not report.ok:
            problems.append(f"{trace.path}: {report.problems[0]}")
    if problems:
        return Cell(REPLAY_ITEM, FAIL,
                    f"{len(problems)}/{len(loaded)} trace(s) do not verify, e.g. {problems[0]}")
    verified = (f"all {len(loaded)} trace(s) verify (recorded choices regenerate from their "
                "seeds)")
    if replayed is None:
        return Cell(REPLAY_ITEM, NOT_PROBED,
                    f"{verified}, but no run has been re-executed: a replay must be run "
                    "before the runs count as replaying")
    return Cell(REPLAY_ITEM, replayed.status, f"{verified}; re-execution: {replayed.detail}")


def licensed_claim(
    *,
    scorer: Status,
    ownership: Status,
    nondegeneracy: Status,
    replay: Status,
    scorer_basis: ScorerBasis = "outcome",
) -> tuple[Claim, str]:
    """The strongest claim the [DMC] §5.5 lattice licenses, and why.

    Only ``"pass"`` counts as passing: ``"not probed"`` reads as not passed.
    """
    if scorer_basis not in ("outcome", "specification"):
        raise ValueError(f"`scorer_basis` must be 'outcome' or 'specification'; found "
                         f"{scorer_basis!r}")
    if scorer == NOT_PROBED:
        return "none", "the scorer was not probed, so no reading of the score is licensed"
    if scorer == FAIL:
        return ("self-report compliance", "the scorer does not separate correct from "
                "degraded work product: it grades shape and self-report")
    if scorer_basis == "specification":
        return ("specification compliance", "a criterion-sensitive scorer that checks a "
                "specification, not execution success")
    gates = {"ownership": ownership, "non-degeneracy": nondegeneracy, "replay": replay}
    missing = [f"{k} {v}" for k, v in gates.items() if v != PASS]
    if not missing:
        return ("model capability", "criterion-sensitive outcome scorer; the model owns the "
                "claimed decisions, they are non-degenerate and the runs replay")
    return ("system performance", "criterion-sensitive outcome scorer, but not every model "
            f"gate passes ({', '.join(missing)}): the score measures the model–scaffold "
            "system")


# ---------------------------------------------------------------------------- the card


@dataclass(frozen=True, eq=False)
class ValidityCard:
    """A per-benchmark validity card ([DMC] §5.5).

    Attributes:
        licensed_claim: the strongest claim the lattice licenses.
        reason: why.
        asserted_claim: the claim checked against it (None: none asserted).
        scorer_basis: ``"outcome"`` or ``"specification"``, as declared.
        cells: every item, each ``"pass"``, ``"fail"`` or ``"not probed"``.
        probe: the probe battery's scores, when a scorer was probed.
        ownership: the decision-ownership map, when traces were given.
        nondegeneracy: one result per decision tested.
    """

    licensed_claim: Claim
    reason: str
    asserted_claim: str | None
    scorer_basis: str
    cells: tuple[Cell, ...]
    probe: ProbeReport | None = None
    ownership: OwnershipMap | None = None
    nondegeneracy: tuple[NonDegeneracy, ...] = ()

    def cell(self, item: str) -> Cell:
        """The cell named ``item``."""
        for c in self.cells:
            if c.item == item:
                return c
        raise KeyError(f"no cell {item!r}; cells: {[c.item for c in self.cells]}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the whole card."""
        return {
            "licensed_claim": self.licensed_claim,
            "reason": self.reason,
            "asserted_claim": self.asserted_claim,
            "scorer_basis": self.scorer_basis,
            "cells": [c.to_dict() for c in self.cells],
            "probe": None if self.probe is None else self.probe.to_dict(),
            "ownership": None if self.ownership is None else self.ownership.to_dict(),
            "nondegeneracy": [r.to_dict() for r in self.nondegeneracy],
        }

    def to_markdown(self) -> str:
        """The card as Markdown: the claim, the cells, then each audit's evidence."""
        lines = ["# Validity card", "",
                 f"**Licensed claim: {self.licensed_claim}**: {self.reason}.", ""]
        if self.asserted_claim is not None:
            lines += [f"Asserted claim: {self.asserted_claim}.", ""]
        lines += _table(["item", "status", "detail"],
                        [[c.item, c.status, c.detail] for c in self.cells])
        if self.probe is not None:
            lines += ["", "## Scorer probe battery", "", self.probe.to_markdown()]
        if self.ownership is not None:
            lines += ["", "## Decision ownership", "", self.ownership.to_markdown()]
        if self.nondegeneracy:
            rows = [[r.decision, _summarize_actions(r.actions, r.means, r.counts)
                     if (r.counts >= 2).any() else
                     f"{len(r.actions)} action(s), none seen in two or more runs",
                     "—" if math.isnan(r.pvalue) else f"{r.pvalue:.4f}", r.status]
                    for r in self.nondegeneracy]
            lines += ["", "## Non-degeneracy", "",
                      *_table(["decision", "E[Y|A] (n)", "p", "status"], rows)]
        lines += ["", "_Every cell is pass, fail or not probed; a not-probed item is never "
                  "read as passing ([DMC] §5.5)._", ""]
        return "\n".join(lines)


def _validity_card_iv(scorer: Any, probes: Any, traces: Any, decision_scores: Any,
                      claim: Any, scorer_basis: Any) -> None:
    if (scorer is None) != (probes is None):
        missing = "probes" if probes is None else "scorer"
        raise ValueError(f"`{missing}` is required: the probe battery runs `scorer` on "
                         "`probes`; pass both or neither")
    if claim is not None and claim not in CLAIMS[:-1]:
        raise ValueError(f"`claim` must be one of {list(CLAIMS[:-1])} or None; found {claim!r}")
    if scorer_basis not in ("outcome", "specification"):
        raise ValueError(f"`scorer_basis` must be 'outcome' or 'specification'; found "
                         f"{scorer_basis!r}")
    if isinstance(decision_scores, str) and traces is None:
        raise ValueError(f"`decision_scores`={decision_scores!r} names a score in the traces; "
                         "pass `traces` too")
    if decision_scores is not None and not isinstance(decision_scores, str | Mapping):
        raise ValueError("`decision_scores` must be a score name (read from `traces`) or a "
                         "mapping decision -> (actions, outcomes)")


def validity_card(
    *,
    scorer: Scorer | None = None,
    probes: Sequence[ProbeTask] | ProbeTask | None = None,
    traces: TracesLike | None = None,
    decision_scores: str | Mapping[str, tuple[Sequence[Hashable], ArrayLike]] | None = None,
    claimed_decisions: Sequence[str] | None = None,
    claim: Claim | None = "model capability",
    scorer_basis: ScorerBasis = "outcome",
    level: float = 0.05,
    n_permutations: int = 9999,
    seed: int = 0,
    replay: Cell | None = None,
) -> ValidityCard:
    """Build the validity card of a benchmark configuration ([DMC] §4.4, §5.5).

    Args:
        scorer: the user's scorer, ``scorer(submission, truth) -> float``.
        probes: probe tasks for the scorer (required with ``scorer``).
        traces: trace paths or ``Trace`` objects: the ownership map, the replay check, and
            the outcomes when ``decision_scores`` names a score.
        decision_scores: per-run outcomes for the non-degeneracy check: a Score name in
            ``traces`` (each claimed, else each model-owned, ``select`` stream is tested
            with ``decision_outcomes``), or a mapping ``decision → (actions, outcomes)``.
        claimed_decisions: ``D_claimed``, the decisions the construct claims to measure;
            default every decision recorded in ``traces``.
        claim: the claim to check against the licensed one (None: check none).
        scorer_basis: ``"outcome"`` (the scorer grades outcomes) or ``"specification"``
            (it checks a specification, like BFCL's AST track): the battery cannot tell
            these apart, so it is declared.
        level, n_permutations, seed: of the non-degeneracy test.
        replay: the outcome of re-executing the runs (the replay engine supplies it).
            Without it the replay gate is not probed even when every trace verifies, so
            "model capability" is not licensed (see ``replay_check``).

    Returns:
        A ``ValidityCard``; every cell is pass, fail or not probed.
    """
    _validity_card_iv(scorer, probes, traces, decision_scores, claim, scorer_basis)
    cells: list[Cell] = []
    probe: ProbeReport | None = None
    if scorer is not None and probes is not None:
        probe = probe_scorer(scorer, probes)
        cells += probe.cells
        scorer_status = probe.criterion_sensitive.status
    else:
        scorer_status = NOT_PROBED
        cells.append(Cell("scorer: criterion-sensitive", NOT_PROBED, "no scorer and probes"))
        cells += [Cell(f"scorer: separates {v}", NOT_PROBED, "no scorer and probes")
                  for v in DEGRADED]
        cells.append(Cell("scorer: ignores contradictory metadata", NOT_PROBED,
                          "no scorer and probes"))
    ownership: OwnershipMap | None = None
    loaded = None if traces is None else read_traces(traces)  # read each file once
    if loaded is not None:
        ownership = ownership_map(loaded)
        own_cells = ownership.check(claimed_decisions)
        replay_cell = replay_check(loaded, replayed=replay)
    else:
        own_cells = (Cell("ownership: model owns the claimed decisions", NOT_PROBED,
                          "no traces"),)
        replay_cell = Cell(REPLAY_ITEM, NOT_PROBED, "no traces")
    cells += own_cells
    results: list[NonDegeneracy] = []
    if isinstance(decision_scores, str):
        assert ownership is not None and loaded is not None
        names = (list(claimed_decisions) if claimed_decisions is not None else
                 sorted({d.name for d in ownership.decisions
                         if d.kind == "select" and d.owner == "model"}))
        for name in names:
            data = decision_outcomes(loaded, decision=name, score=decision_scores)
            if not data.actions:
                cells.append(Cell(f"non-degeneracy: {name}", NOT_PROBED,
                                  f"no run has both the decision and a {decision_scores!r} "
                                  "score"))
                continue
            results.append(non_degeneracy(list(data.actions), data.outcomes, name=name,
                                          level=level, n_permutations=n_permutations,
                                          seed=seed))
    elif decision_scores is not None:
        for name, (acts, ys) in decision_scores.items():
            results.append(non_degeneracy(list(acts), ys, name=str(name), level=level,
                                          n_permutations=n_permutations, seed=seed))
    cells += [r.cell for r in results]
    tested = [c for c in cells if c.item.startswith("non-degeneracy: ")]
    nd_status = _combine([c.status for c in tested])
    nd_detail = (f"{sum(c.status == PASS for c in tested)}/{len(tested)} decision(s) "
                 "non-degenerate" if tested else "no decision outcomes given "
                 "(`decision_scores`)")
    cells.append(Cell("non-degeneracy: tested decisions", nd_status, nd_detail))
    cells.append(replay_cell)
    licensed, reason = licensed_claim(scorer=scorer_status, ownership=own_cells[0].status,
                                      nondegeneracy=nd_status, replay=replay_cell.status,
                                      scorer_basis=scorer_basis)
    if claim is None:
        cells.append(Cell("claim: asserted claim licensed", NOT_PROBED, "no claim asserted"))
    else:
        ok = claim in _LICENSES[licensed]
        cells.append(Cell(f"claim: {claim}", PASS if ok else FAIL,
                          f"licensed: {licensed}" + ("" if ok else
                                                     f"; {claim} is not licensed")))
    return ValidityCard(
        licensed_claim=licensed, reason=reason, asserted_claim=claim,
        scorer_basis=scorer_basis, cells=tuple(cells), probe=probe, ownership=ownership,
        nondegeneracy=tuple(results),
    )
