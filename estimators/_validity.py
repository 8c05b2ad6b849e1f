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

Examples:
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
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numpy.typing import ArrayLike

from agentlog import verify
from agentlog.records import trace_files

from ._non_degeneracy import (
    NonDegeneracyResult,
    _summarize_actions,
    decision_outcomes,
    non_degeneracy,
)
from ._ownership import (
    OwnershipMap,
    ownership_map,
)
from ._probe_battery import (
    ProbeReport,
    ProbeTask,
    Scorer,
    probe_scorer,
)
from ._validity_cells import (
    _LICENSES,
    CLAIMS,
    DEGRADED,
    FAIL,
    NOT_PROBED,
    PASS,
    Cell,
    Claim,
    ScorerBasis,
    Status,
    TracesLike,
    _combine,
    _file_name,
    _table,
)

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
    loaded = [_file_name(f) for f in trace_files(traces, name="traces")]
    problems = []
    for path in loaded:
        report = verify(path)  # streams the file
        if not report.ok:
            problems.append(f"{path}: {report.problems[0]}")
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


def replay_cell(report: Any) -> Cell:
    """The ``replayed`` cell of ``replay_check`` from a channel replay's re-derivation.

    ``report`` is ``agentlog.replay.rederive_channel_replay(...)`` or its ``to_dict()``:
    how many units the traces need (``planned``), how many are ``sealed`` ok in the
    replay's output,
    ``failed`` or ``missing``, and how many re-derived scores were ``mismatched``. The gate
    is probed only when a replay actually ran and its scores were derived again:

    * nothing sealed (no replay ran, or of other traces) → **not probed**;
    * a failed unit, or a re-derived score that differs from the stored one → **fail**;
    * units not replayed yet → **not probed** (finish the replay: re-running it does only
      the missing units);
    * every unit sealed and every re-derived score equal → **pass**.
    """
    if not isinstance(report, Mapping):
        report = report.to_dict()
    planned, sealed = int(report.get("planned", 0)), int(report.get("sealed", 0))
    failed, missing = int(report.get("failed", 0)), int(report.get("missing", 0))
    mismatched, rederived = int(report.get("mismatched", 0)), int(report.get("rederived", 0))
    where = (f"channel replay {report.get('out', '?')} of window {report.get('window')!r} "
             f"under {', '.join(report.get('channels', ())) or 'no channel'}")
    first = list(report.get("problems", ()))[:1]
    example = f", e.g. {first[0]}" if first else ""
    if sealed == 0 and failed == 0:
        return Cell(REPLAY_ITEM, NOT_PROBED, f"{where}: no unit of these traces is sealed "
                    f"there ({planned} needed): run the replay first{example}")
    if failed or mismatched:
        return Cell(REPLAY_ITEM, FAIL, f"{where}: {failed} of {planned} units failed, "
                    f"{mismatched} of {rederived} re-derived units gave other scores{example}")
    if missing:
        return Cell(REPLAY_ITEM, NOT_PROBED, f"{where}: {missing} of {planned} units not "
                    "replayed yet; run the replay again to finish it")
    return Cell(REPLAY_ITEM, PASS, f"{where}: all {planned} units ran, and their scores, "
                f"derived again from the sealed states, matched ({rederived} units)")


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
    nondegeneracy: tuple[NonDegeneracyResult, ...] = ()

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
    replay: Any = None,
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
        replay: the outcome of re-executing the runs: a ``Cell``, or the report of
            ``agentlog.replay.rederive_channel_replay`` (turned into one by ``replay_cell``).
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
    # Resolved once; each audit streams the files one run at a time.
    loaded = None if traces is None else trace_files(traces, name="traces")
    if replay is not None and not isinstance(replay, Cell):
        replay = replay_cell(replay)
    if loaded is not None:
        ownership = ownership_map(loaded)
        own_cells = ownership.check(claimed_decisions)
        replay_result = replay_check(loaded, replayed=replay)
    else:
        own_cells = (Cell("ownership: model owns the claimed decisions", NOT_PROBED,
                          "no traces"),)
        replay_result = Cell(REPLAY_ITEM, NOT_PROBED, "no traces")
    cells += own_cells
    results: list[NonDegeneracyResult] = []
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
    cells.append(replay_result)
    licensed, reason = licensed_claim(scorer=scorer_status, ownership=own_cells[0].status,
                                      nondegeneracy=nd_status, replay=replay_result.status,
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
