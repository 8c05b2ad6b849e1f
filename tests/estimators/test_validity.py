"""The validity card ([DMC] §4.1, §4.4, §5.5): probe battery, ownership map,
non-degeneracy, licensed claim; rendered as Markdown and JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import reliability
from agentlog.examples import scorers

# --------------------------------------------------------------------------- a toy agent


def record_dedup_runs(tmp_path: Path, *, n_runs: int = 40, owner: str = "model",
                      p_dedup: float = 0.5, with_stop: bool = False,
                      prefix: str = "run") -> list[Path]:
    """A toy extraction agent: on each seed it decides to deduplicate or not (stream
    "dedup"), submits its records and scores them by ground-truth F1 (Score "f1")."""
    task = scorers.probe_tasks(1, 10)[0]
    paths = []
    for seed in range(n_runs):
        path = tmp_path / f"{prefix}{seed}.zst"
        with al.record(path, system="toy", seed=seed, task=task.name):
            choice = al.select([p_dedup, 1 - p_dedup], candidates=["dedup", "keep"],
                               name="dedup", owner=owner)  # type: ignore[arg-type]
            rows = list(task.correct.records)
            if choice == 1:
                rows += rows[:5]  # the duplicates the mock API served
            if with_stop:
                al.proceed(0.9, name="stop")
            al.score("f1", reliability.record_f1(rows, task.truth).f1)
        paths.append(path)
    return paths


# ------------------------------------------------------------------ (a) probe battery


def test_shape_scorer_is_flagged_not_criterion_sensitive() -> None:
    report = reliability.probe_scorer(scorers.shape_scorer, scorers.probe_tasks())
    assert report.criterion_sensitive.status == "fail"
    cells = {c.item: c.status for c in report.cells}
    assert cells["scorer: separates fabricated"] == "fail"  # [DMC] §3.2: 0.987 = 0.987
    assert cells["scorer: separates duplicate-laden"] == "fail"
    assert cells["scorer: separates empty"] == "pass"  # an empty payload still loses credit
    assert cells["scorer: ignores contradictory metadata"] == "fail"  # it grades the report
    fabricated = report.scores[:, reliability.VARIANTS.index("fabricated")]
    assert np.array_equal(fabricated, report.scores[:, 0])


def test_ground_truth_scorer_passes_the_probe_battery() -> None:
    report = reliability.probe_scorer(scorers.ground_truth_scorer, scorers.probe_tasks())
    assert report.criterion_sensitive.status == "pass"
    assert all(c.status == "pass" for c in report.cells)
    empty, fabricated, dup, contra = (report.scores[0, reliability.VARIANTS.index(v)]
                                      for v in reliability.VARIANTS[1:])
    assert (report.scores[0, 0], empty, fabricated, contra) == (1.0, 0.0, 0.0, 1.0)
    assert dup == pytest.approx(2 / 3)  # precision 1/2, recall 1


def test_validity_card_on_the_example_scorers_licenses_the_papers_claims() -> None:
    shape = reliability.validity_card(scorer=scorers.shape_scorer,
                                      probes=scorers.probe_tasks())
    truth = reliability.validity_card(scorer=scorers.ground_truth_scorer,
                                      probes=scorers.probe_tasks())
    assert shape.licensed_claim == "self-report compliance"
    assert shape.cell("claim: model capability").status == "fail"
    # Criterion-sensitive, but nothing shows who owns the decisions: system performance.
    assert truth.licensed_claim == "system performance"
    assert truth.cell("scorer: criterion-sensitive").status == "pass"
    assert truth.cell("ownership: model owns the claimed decisions").status == "not probed"


def test_battery_variants_are_well_formed_forgeries_of_the_correct_submission() -> None:
    task = scorers.probe_tasks(1, 4)[0]
    v = reliability.probe_variants(task)
    assert v["empty"] is not None and v["empty"].records == ()
    assert v["empty"].metadata["row_count"] == 0  # the self-report stays consistent
    fab = v["fabricated"]
    assert fab is not None and len(fab.records) == 4
    assert not set(fab.ids) & set(task.truth)
    assert [{k: r[k] for k in r if k != "id"} for r in fab.records] == [
        {k: r[k] for k in r if k != "id"} for r in task.correct.records]
    dup = v["duplicate-laden"]
    assert dup is not None and dup.ids == task.correct.ids * 2
    assert dup.metadata["row_count"] == 8
    contra = v["contradictory metadata"]
    assert contra is not None and contra.records == task.correct.records
    assert contra.metadata["row_count"] == 0


def test_contradictory_metadata_is_not_probed_without_a_self_report_to_contradict() -> None:
    task = scorers.probe_tasks(1)[0]
    bare = reliability.ProbeTask("bare", task.correct, task.truth)  # no count_key
    report = reliability.probe_scorer(scorers.ground_truth_scorer, [bare])
    cells = {c.item: c for c in report.cells}
    assert cells["scorer: ignores contradictory metadata"].status == "not probed"
    assert report.criterion_sensitive.status == "pass"
    assert "count_key" in report.errors[0][2]


def test_a_scorer_that_raises_leaves_its_probes_not_probed_never_passed() -> None:
    def fragile(sub: reliability.Submission, truth: Any) -> float:
        if not sub.records:
            raise ZeroDivisionError("no records")
        return scorers.ground_truth_scorer(sub, truth)

    report = reliability.probe_scorer(fragile, scorers.probe_tasks())
    cells = {c.item: c.status for c in report.cells}
    assert cells["scorer: separates empty"] == "not probed"
    assert cells["scorer: separates fabricated"] == "pass"
    assert report.criterion_sensitive.status == "not probed"
    assert any("ZeroDivisionError" in m for _, _, m in report.errors)
    card = reliability.validity_card(scorer=fragile, probes=scorers.probe_tasks())
    assert card.licensed_claim == "none"


def test_margin_demands_a_clear_separation() -> None:
    def timid(sub: reliability.Submission, truth: Any) -> float:
        return 0.99 + 0.01 * scorers.ground_truth_scorer(sub, truth)

    assert reliability.probe_scorer(timid, scorers.probe_tasks()).criterion_sensitive.status \
        == "pass"
    strict = reliability.probe_scorer(timid, scorers.probe_tasks(), margin=0.05)
    assert strict.criterion_sensitive.status == "fail"


# ------------------------------------------------------------------ (b) ownership map


def test_ownership_map_reads_who_owns_each_decision_from_traces(tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=3, with_stop=True)
    path = tmp_path / "mixed.zst"
    with al.record(path, seed=1):
        al.select([0.5, 0.5], name="page", owner="model")
        al.select([0.5, 0.5], name="page", owner="scaffold")
        al.select([1.0], name="retry", owner="scaffold")
    m = reliability.ownership_map([*paths, str(path)])
    assert m["dedup"].owner == "model" and m["dedup"].n_runs == 3
    assert m["page"].owner == "mixed" and (m["page"].n_model, m["page"].n_scaffold) == (1, 1)
    assert m["retry"].owner == "scaffold"
    assert m["stop"].owner == "unrecorded" and m["stop"].kind == "proceed"
    assert m.model_owned == frozenset({"dedup"})


def test_ownership_passes_iff_claimed_decisions_are_model_owned(tmp_path: Path) -> None:
    model = reliability.ownership_map(record_dedup_runs(tmp_path, n_runs=2, prefix="m"))
    scaffold = reliability.ownership_map(
        record_dedup_runs(tmp_path, n_runs=2, owner="scaffold", prefix="s"))
    assert model.check()[0].status == "pass"
    assert model.check(["dedup"])[0].status == "pass"
    assert scaffold.check()[0].status == "fail"
    absent = model.check(["dedup", "retry"])
    assert absent[0].status == "fail"
    assert {c.item: c.status for c in absent}["ownership: retry"] == "fail"


def test_a_decision_without_a_recorded_owner_is_not_probed(tmp_path: Path) -> None:
    m = reliability.ownership_map(record_dedup_runs(tmp_path, n_runs=2, with_stop=True))
    cells = {c.item: c.status for c in m.check()}
    assert cells["ownership: stop"] == "not probed"
    assert cells["ownership: model owns the claimed decisions"] == "not probed"
    assert m.check(["dedup"])[0].status == "pass"


# ---------------------------------------------------------------- (c) non-degeneracy


def test_a_decision_that_never_varies_is_degenerate() -> None:
    # [DMC] §5.2: SKIP chosen 0 of 120 episodes.
    rng = np.random.default_rng(0)
    r = reliability.non_degeneracy(["retry"] * 120, rng.random(120), name="fault")
    assert r.status == "fail" and "Var(A) = 0" in r.cell.detail and math.isnan(r.pvalue)


def test_a_decision_whose_outcome_depends_on_it_is_non_degenerate() -> None:
    rng = np.random.default_rng(1)
    a = rng.choice(["dedup", "keep"], size=60)
    y = np.where(a == "dedup", 1.0, 0.67) + rng.normal(0, 0.05, 60)
    r = reliability.non_degeneracy(list(a), y)
    assert r.status == "pass" and r.pvalue <= 0.05
    assert r.actions == ("dedup", "keep")
    np.testing.assert_allclose(r.means, [y[a == "dedup"].mean(), y[a == "keep"].mean()])


def test_a_varying_decision_with_equal_outcomes_is_degenerate() -> None:
    r = reliability.non_degeneracy(["a", "b"] * 4, [0, 0, 1, 1] * 2)
    assert r.status == "fail" and r.pvalue == 1.0


def test_non_degeneracy_test_holds_its_level_when_outcomes_ignore_the_decision() -> None:
    rng = np.random.default_rng(2)
    reps = 300
    passes = sum(
        reliability.non_degeneracy(list(rng.integers(0, 3, 30)), rng.random(30),
                                   n_permutations=499, seed=i).status == "pass"
        for i in range(reps))
    se = math.sqrt(0.05 * 0.95 / reps)
    assert abs(passes / reps - 0.05) < 3 * se


def test_non_degeneracy_reads_actions_and_outcomes_from_traces(tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=30)
    data = reliability.decision_outcomes(paths, decision="dedup", score="f1")
    assert len(data.actions) == 30 and set(data.actions) == {"dedup", "keep"}
    f1 = dict(zip(data.actions, data.outcomes.tolist(), strict=False))
    assert f1["dedup"] == 1.0 and f1["keep"] < 1.0
    none = reliability.decision_outcomes(paths, decision="other", score="f1")
    assert none.runs_without_decision == 30 and none.actions == ()


# ------------------------------------------------------------ (d) the lattice and the card


@pytest.mark.parametrize(("scorer", "ownership", "nondeg", "replay", "basis", "claim"), [
    ("pass", "pass", "pass", "pass", "outcome", "model capability"),
    ("pass", "fail", "pass", "pass", "outcome", "system performance"),
    ("pass", "pass", "fail", "pass", "outcome", "system performance"),
    ("pass", "pass", "pass", "not probed", "outcome", "system performance"),
    ("pass", "not probed", "pass", "pass", "outcome", "system performance"),
    ("pass", "not probed", "not probed", "not probed", "specification",
     "specification compliance"),
    ("fail", "pass", "pass", "pass", "outcome", "self-report compliance"),
    ("not probed", "pass", "pass", "pass", "outcome", "none"),
])
def test_licensed_claim_follows_the_papers_lattice(scorer: str, ownership: str, nondeg: str,
                                                  replay: str, basis: str,
                                                  claim: str) -> None:
    got, reason = reliability.licensed_claim(
        scorer=scorer, ownership=ownership, nondegeneracy=nondeg,  # type: ignore[arg-type]
        replay=replay, scorer_basis=basis)  # type: ignore[arg-type]
    assert got == claim and reason


def test_full_card_licenses_model_capability_only_when_every_gate_passes(
        tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=40)
    replayed = reliability.Cell("replay", "pass", "40 runs re-executed, every exit matched")
    card = reliability.validity_card(scorer=scorers.ground_truth_scorer,
                                     probes=scorers.probe_tasks(), traces=paths,
                                     decision_scores="f1", replay=replayed)
    assert card.licensed_claim == "model capability"
    assert card.cell("claim: model capability").status == "pass"
    assert card.cell("non-degeneracy: dedup").status == "pass"
    assert card.cell("replay: runs re-execute").status == "pass"
    assert "40 runs re-executed" in card.cell("replay: runs re-execute").detail
    scaffold = record_dedup_runs(tmp_path, n_runs=40, owner="scaffold", prefix="s")
    card = reliability.validity_card(scorer=scorers.ground_truth_scorer,
                                     probes=scorers.probe_tasks(), traces=scaffold,
                                     decision_scores="f1")
    assert card.licensed_claim == "system performance"  # τ-bench's reading
    assert card.cell("claim: model capability").status == "fail"
    assert card.cell("non-degeneracy: tested decisions").status == "not probed"


def test_a_model_owned_but_degenerate_decision_does_not_license_capability(
        tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=20, p_dedup=1.0)  # L1: never deviates
    card = reliability.validity_card(scorer=scorers.ground_truth_scorer,
                                     probes=scorers.probe_tasks(), traces=paths,
                                     decision_scores="f1")
    assert card.cell("ownership: model owns the claimed decisions").status == "pass"
    assert card.cell("non-degeneracy: dedup").status == "fail"
    assert card.licensed_claim == "system performance"


def test_a_trace_that_does_not_verify_fails_the_replay_cell(tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=2)
    al.flush()  # the file's bytes are read below: write and close the runs' files first
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) - 7])  # a cut tail
    cell = reliability.replay_check(paths)
    assert cell.status == "fail" and "1/2" in cell.detail


def test_a_card_with_nothing_probed_passes_nothing() -> None:
    card = reliability.validity_card()
    assert {c.status for c in card.cells} == {"not probed", "fail"}
    assert card.licensed_claim == "none"
    assert card.cell("claim: model capability").status == "fail"
    assert {c.status for c in reliability.validity_card(claim=None).cells} == {"not probed"}


def test_every_cell_is_pass_fail_or_not_probed(tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=10, with_stop=True)
    card = reliability.validity_card(scorer=scorers.shape_scorer,
                                     probes=scorers.probe_tasks(), traces=paths,
                                     decision_scores={"dedup": (["a", "b"] * 5, [1, 0] * 5)})
    assert {c.status for c in card.cells} <= {"pass", "fail", "not probed"}
    assert len({c.item for c in card.cells}) == len(card.cells)


def test_card_renders_as_json_and_markdown(tmp_path: Path) -> None:
    paths = record_dedup_runs(tmp_path, n_runs=20)
    card = reliability.validity_card(scorer=scorers.shape_scorer,
                                     probes=scorers.probe_tasks(), traces=paths,
                                     decision_scores="f1")
    d = json.loads(json.dumps(card.to_dict()))
    assert d["licensed_claim"] == "self-report compliance"
    assert [c["status"] for c in d["cells"]] == [c.status for c in card.cells]
    assert d["probe"]["variants"] == list(reliability.VARIANTS)
    assert d["ownership"]["decisions"][0]["owner"] == "model"
    md = card.to_markdown()
    assert md.startswith("# Validity card")
    assert "**Licensed claim: self-report compliance**" in md
    assert "| scorer: separates fabricated | fail |" in md
    assert "## Scorer probe battery" in md and "## Decision ownership" in md
    assert "## Non-degeneracy" in md and "never read as passing" in md


# ------------------------------------------------------------------------------ bad input


def test_bad_card_inputs_are_rejected_naming_the_parameter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`probes` is required"):
        reliability.validity_card(scorer=scorers.shape_scorer)
    with pytest.raises(ValueError, match="`scorer` is required"):
        reliability.validity_card(probes=scorers.probe_tasks())
    with pytest.raises(ValueError, match="`claim` must be one of"):
        reliability.validity_card(claim="capability")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`scorer_basis` must be"):
        reliability.validity_card(scorer_basis="judge")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`decision_scores`='f1' names a score"):
        reliability.validity_card(decision_scores="f1")
    with pytest.raises(ValueError, match="`traces` must be a trace path"):
        reliability.ownership_map([])


def test_bad_probe_inputs_are_rejected_naming_the_parameter() -> None:
    task = scorers.probe_tasks(1)[0]
    wrong = reliability.ProbeTask("wrong", task.correct, task.truth[:-1])
    with pytest.raises(ValueError, match="`probes`\\[0\\] \\('wrong'\\): the correct "
                                         "submission does not match its truth"):
        reliability.probe_scorer(scorers.ground_truth_scorer, [wrong])
    with pytest.raises(ValueError, match="`probes` must be a non-empty sequence"):
        reliability.probe_scorer(scorers.ground_truth_scorer, [])
    with pytest.raises(ValueError, match="`scorer` must be callable"):
        reliability.probe_scorer("judge.py", [task])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`margin` must be a finite number >= 0"):
        reliability.probe_scorer(scorers.ground_truth_scorer, [task], margin=-1)


def test_bad_non_degeneracy_inputs_are_rejected_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="`outcomes` must hold one value per decision"):
        reliability.non_degeneracy(["a", "b"], [1.0])
    with pytest.raises(ValueError, match="`outcomes` must be finite"):
        reliability.non_degeneracy(["a", "b"], [1.0, float("nan")])
    with pytest.raises(ValueError, match="`decisions` is empty"):
        reliability.non_degeneracy([], [])
    with pytest.raises(ValueError, match="`level` must be in \\(0, 1\\)"):
        reliability.non_degeneracy(["a"], [1.0], level=5)


def test_non_degeneracy_is_not_probed_when_actions_are_not_replicated() -> None:
    """Every run choosing a different action leaves E[Y|A] incomparable: not probed, never
    a silent pass or a verdict from a degenerate permutation test."""
    from agentlog.estimators import reliability

    res = reliability.non_degeneracy(["a", "b", "c", "d", "d"], [0.1, 0.9, 0.4, 0.2, 0.2],
                                     name="doc")
    assert res.cell.status == "not probed"
    assert "only 1 action(s) occur in two or more runs" in res.cell.detail


def test_traces_that_verify_leave_the_replay_gate_not_probed_until_a_replay_ran(
        tmp_path: Path) -> None:
    """Verification alone never licenses "model capability": the gate needs a replay."""
    paths = record_dedup_runs(tmp_path, n_runs=40)
    card = reliability.validity_card(scorer=scorers.ground_truth_scorer,
                                     probes=scorers.probe_tasks(), traces=paths,
                                     decision_scores="f1")
    cell = card.cell("replay: runs re-execute")
    assert cell.status == "not probed"
    assert "all 40 trace(s) verify" in cell.detail and "no run has been re-executed" in \
        cell.detail
    assert card.licensed_claim == "system performance"
    assert "replay not probed" in card.reason
    claim = card.cell("claim: model capability")
    assert claim.status == "fail"
    assert claim.detail == "licensed: system performance; model capability is not licensed"
    failed = reliability.Cell("replay", "fail", "run 3 diverged at window 'dedup'")
    cell = reliability.replay_check(paths, replayed=failed)
    assert cell.status == "fail" and cell.detail.endswith("run 3 diverged at window 'dedup'")


def test_non_degeneracy_tests_only_replicated_actions_and_summarises_them() -> None:
    """Singleton actions are set aside: the verdict is the one the replicated runs give,
    and the cell lists the most frequent actions, not all of them."""
    rng = np.random.default_rng(5)
    a = [str(x) for x in rng.choice(["dedup", "keep"], size=40)]
    y = [1.0 if x == "dedup" else 0.5 for x in a] + rng.normal(0, 0.05, 40)
    singles = [f"once-{i}" for i in range(30)]
    noise = rng.random(30) * 10  # large outcomes on actions seen once each
    mixed = reliability.non_degeneracy(a + singles, np.concatenate([y, noise]), seed=1)
    alone = reliability.non_degeneracy(a, y, seed=1)
    assert mixed.status == alone.status == "pass"
    assert mixed.pvalue == alone.pvalue  # the same permutation test on the same 40 runs
    detail = mixed.cell.detail
    assert "32 actions: 2 seen in two or more runs, 30 seen once" in detail
    assert "… (30 seen once)" in detail and "once-7" not in detail
    assert "over the 40 runs of replicated actions" in detail
    assert len(mixed.to_dict()["actions"]) == 32  # JSON keeps every action
    # when most runs chose an action nobody else chose, the data cannot support a verdict
    sparse = reliability.non_degeneracy(a + [f"once-{i}" for i in range(41)],
                                        np.concatenate([y, rng.random(41)]), seed=1)
    assert sparse.status == "not probed" and math.isnan(sparse.pvalue)
    assert "only 40 of 81 runs chose an action another run also chose" in sparse.cell.detail
    many = reliability.non_degeneracy([f"a{i % 8}" for i in range(80)],
                                      [float(i % 8) for i in range(80)], n_permutations=99)
    assert "… (3 more replicated)" in many.cell.detail
