"""`agentlog validity-card`: what recorded runs license; exit 1 on a failing cell, 2 bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

import agentlog as al
from agentlog.estimators import reliability
from agentlog.examples import scorers
from tests.cli._cli import invoke as cli_invoke

SHAPE = "agentlog.examples.scorers:shape_scorer"
GROUND_TRUTH = "agentlog.examples.scorers:ground_truth_scorer"


def invoke(*args: str | Path) -> Result:
    return cli_invoke("validity-card", *args)


def card_json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = invoke(*args, "--json")
    assert result.exit_code == code, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def bad(*args: str | Path) -> str:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    return result.stderr


def few_probes() -> list[reliability.ProbeTask]:
    """A user's own probe tasks (``--probes tests.cli.test_validity_card:few_probes``)."""
    return scorers.probe_tasks(2, 5, seed=3)


def not_probes() -> list[str]:
    return ["T1"]


def record_dedup_runs(folder: Path, *, n_runs: int = 30, owner: str = "model",
                      p_dedup: float = 0.5) -> Path:
    """A toy extraction agent: each seed decides to deduplicate or not (stream "dedup"),
    then scores its submission by ground-truth F1 (Score "f1") and its row count."""
    task = scorers.probe_tasks(1, 10)[0]
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(n_runs):
        with al.record(folder / f"run{seed:03d}.zst", system="toy", seed=seed,
                       task=task.name):
            choice = al.select([p_dedup, 1 - p_dedup], candidates=["dedup", "keep"],
                               name="dedup", owner=owner)  # type: ignore[arg-type]
            rows = list(task.correct.records)
            if choice == 1:
                rows += rows[:5]
            al.proceed(0.9, name="stop")
            al.score("f1", reliability.record_f1(rows, task.truth).f1)
            al.score("rows", float(len(rows)))
    return folder


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_dedup_runs(tmp_path_factory.mktemp("card") / "model")


@pytest.fixture(scope="module")
def scaffold_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_dedup_runs(tmp_path_factory.mktemp("card") / "scaffold", owner="scaffold")


def test_the_shape_scorer_is_flagged_not_criterion_sensitive_and_exits_1(
    model_runs: Path,
) -> None:
    result = invoke(model_runs, "--scorer", SHAPE)
    assert result.exit_code == 1, result.output
    for text in ("Validity card", "Licensed claim: self-report compliance",
                 "scorer: criterion-sensitive", "not criterion-sensitive",
                 "'T1': correct 1.000 vs fabricated 1.000", "Scorer probe battery",
                 "Decision ownership", "never read as passing",
                 "4 cell(s) fail: scorer: criterion-sensitive, scorer: separates fabricated, "
                 "scorer: separates duplicate-laden, scorer: ignores contradictory metadata "
                 "(exit 1)"):
        assert text in result.stdout, text


def test_the_ground_truth_scorer_passes_but_capability_waits_for_a_replay(
    model_runs: Path,
) -> None:
    out = card_json(model_runs, "--scorer", GROUND_TRUTH, "--decision", "dedup", "--score",
                    "f1", "--claim", "system performance")
    assert out["licensed_claim"] == "system performance"
    assert out["failed_cells"] == [] and out["exit_code"] == 0
    cells = {c["item"]: c["status"] for c in out["cells"]}
    assert cells["scorer: criterion-sensitive"] == "pass"
    assert cells["ownership: dedup"] == cells["non-degeneracy: dedup"] == "pass"
    # every trace verifies, but no replay has been run: the capability gate is open
    assert cells["replay: runs re-execute"] == "not probed"
    assert cells["claim: system performance"] == "pass"
    assert "ownership: stop" not in cells  # only the claimed decision is audited
    expected = reliability.validity_card(
        scorer=scorers.ground_truth_scorer, probes=scorers.probe_tasks(),
        traces=sorted(model_runs.glob("*.zst")), decision_scores="f1",
        claimed_decisions=["dedup"], claim="system performance")
    ref = json.loads(json.dumps(expected.to_dict()))
    for key in ("licensed_claim", "reason", "cells", "probe", "nondegeneracy"):
        assert out[key] == ref[key], key
    assert out["settings"] == {
        "traces": [str(p) for p in sorted(model_runs.glob("*.zst"))], "scorer": GROUND_TRUTH,
        "probes": "agentlog.examples.scorers:probe_tasks", "decisions": ["dedup"],
        "score": "f1", "claim": "system performance", "scorer_basis": "outcome", "seed": 0,
        "replay": None, "app": None}
    assert out["replay"] is None
    shown = invoke(model_runs, "--scorer", GROUND_TRUTH, "--decision", "dedup", "--score", "f1")
    assert shown.exit_code == 0 and "no cell fails (exit 0)" in shown.stdout


def test_markdown_is_the_cards_markdown(model_runs: Path) -> None:
    result = invoke(model_runs, "--scorer", SHAPE, "--markdown")
    assert result.exit_code == 1
    card = reliability.validity_card(scorer=scorers.shape_scorer,
                                     probes=scorers.probe_tasks(),
                                     traces=sorted(model_runs.glob("*.zst")), claim=None)
    assert result.stdout == card.to_markdown()
    assert result.stdout.startswith("# Validity card")
    assert "| scorer: separates fabricated | fail |" in result.stdout


def test_without_a_scorer_nothing_is_licensed_and_the_card_says_what_to_pass(
    model_runs: Path,
) -> None:
    result = invoke(model_runs)
    assert result.exit_code == 0, result.output  # nothing fails: not probed is not a fail
    assert "Licensed claim: none" in result.stdout
    assert "pass --scorer module:function" in result.stdout
    assert "pass --decision NAME (and --score NAME)" in result.stdout
    out = card_json(model_runs)
    cells = {c["item"]: c["status"] for c in out["cells"]}
    assert cells["ownership: stop"] == "not probed"  # proceed records carry no owner
    assert cells["claim: asserted claim licensed"] == "not probed"
    assert out["probe"] is None and out["settings"]["probes"] is None


def test_a_scaffold_owned_decision_fails_ownership(scaffold_runs: Path) -> None:
    out = card_json(scaffold_runs, "--scorer", GROUND_TRUTH, "--decision", "dedup",
                    "--score", "f1", code=1)
    assert out["licensed_claim"] == "system performance"
    assert "ownership: dedup" in out["failed_cells"] and out["exit_code"] == 1


def test_an_asserted_claim_that_is_not_licensed_fails(model_runs: Path) -> None:
    out = card_json(model_runs, "--scorer", SHAPE, "--claim", "model capability", code=1)
    assert "claim: model capability" in out["failed_cells"]
    ok = card_json(model_runs, "--scorer", SHAPE, "--claim", "self-report compliance",
                   code=1)  # the scorer cells still fail
    assert "claim: self-report compliance" not in ok["failed_cells"]


def test_a_degenerate_decision_fails_non_degeneracy(tmp_path: Path) -> None:
    runs = record_dedup_runs(tmp_path / "l1", n_runs=12, p_dedup=1.0)
    out = card_json(runs, "--decision", "dedup", "--score", "f1", code=1)
    assert out["failed_cells"] == ["non-degeneracy: dedup", "non-degeneracy: tested decisions"]


def test_score_alone_tests_every_model_owned_decision(model_runs: Path) -> None:
    out = card_json(model_runs, "--score", "f1")
    assert [r["decision"] for r in out["nondegeneracy"]] == ["dedup"]
    assert out["settings"]["decisions"] is None


def test_specification_basis_and_user_probes(model_runs: Path) -> None:
    out = card_json(model_runs, "--scorer", GROUND_TRUTH, "--probes",
                    "tests.cli.test_validity_card:few_probes", "--scorer-basis",
                    "specification")
    assert out["licensed_claim"] == "specification compliance"
    assert out["probe"]["tasks"] == ["T1", "T2"]


def test_scorer_must_be_an_importable_module_function(model_runs: Path,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for spec in ("shape_scorer", "agentlog.examples.scorers", "__import__('os').system:x",
                 "agentlog.examples.scorers:shape_scorer()", ".scorers:shape_scorer",
                 "a b:c", "agentlog.examples.scorers:"):
        assert f"--scorer must be module:function, with an importable module, e.g. " \
               f"agentlog.examples.scorers:shape_scorer; found {spec!r}" in bad(
                   model_runs, "--scorer", spec), spec
    err = bad(model_runs, "--scorer", "no_such_module_xyz:score")
    assert "--scorer no_such_module_xyz:score: cannot import 'no_such_module_xyz'" in err
    assert "installed, or on PYTHONPATH" in err
    assert "agentlog.examples.scorers has no attribute 'nope'" in bad(
        model_runs, "--scorer", "agentlog.examples.scorers:nope")
    assert "scorers:METADATA_FIELDS: tuple is not callable" in bad(
        model_runs, "--scorer", "agentlog.examples.scorers:METADATA_FIELDS")
    (tmp_path / "broken_scorer_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "importing 'broken_scorer_mod' raised RuntimeError: boom at import" in bad(
        model_runs, "--scorer", "broken_scorer_mod:score")


def test_bad_probes_exit_2_naming_the_option(model_runs: Path) -> None:
    err = bad(model_runs, "--scorer", SHAPE, "--probes", SHAPE)
    assert f"--probes {SHAPE}: calling it raised TypeError" in err
    err = bad(model_runs, "--scorer", SHAPE, "--probes",
              "tests.cli.test_validity_card:not_probes")
    assert "`probes`[0] must be a ProbeTask; found str (--probes " in err


def test_decisions_and_scores_must_exist_in_the_traces(model_runs: Path) -> None:
    err = bad(model_runs, "--decision", "retry")
    assert "--decision retry: no such decision stream in 30 trace file(s); decisions " \
           "recorded: dedup (select), stop (proceed)" in err
    err = bad(model_runs, "--decision", "dedup")
    assert "the runs record several scores (f1, rows); pass --score" in err
    assert "scores present: f1, rows" in bad(model_runs, "--score", "accuracy")


def test_bad_options_and_files_exit_2(model_runs: Path, tmp_path: Path) -> None:
    assert "--json and --markdown both given" in bad(model_runs, "--json", "--markdown")
    assert "--claim must be one of model capability, system performance" in bad(
        model_runs, "--claim", "capability")
    assert "--scorer-basis must be one of outcome, specification" in bad(
        model_runs, "--scorer-basis", "judge")
    assert "none.zst: no such file" in bad(tmp_path / "none.zst")
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace")
    assert "not a readable agentlog trace" in bad(junk)


def test_the_cli_lists_validity_card() -> None:
    result = cli_invoke("--help")
    assert result.exit_code == 0 and "validity-card" in result.stdout


def test_on_the_demo_the_doc_decision_is_summarised_and_its_claim_sentence_is_whole(
    tmp_path: Path,
) -> None:
    """The demo's "doc" decision is a tuple of opened documents per run, nearly all seen
    once: the cell shows the top actions and the count seen once, never ~120 entries."""
    from agentlog.cli._demo import run_demo

    out = tmp_path / "demo"
    run_demo(out, tasks=4, seeds=3)
    study = sorted(out.glob("*.zst"))
    card = card_json(*study, "--decision", "doc", "--score", "abs_error", "--claim",
                     "model capability", code=1)
    cells = {c["item"]: c for c in card["cells"]}
    doc = cells["non-degeneracy: doc"]
    assert doc["status"] == "not probed"  # most runs' actions are unique: no verdict
    assert "seen once" in doc["detail"] and len(doc["detail"]) < 400, doc["detail"]
    assert "runs chose an action another run also chose" in doc["detail"]
    markdown = invoke(*study, "--decision", "doc", "--score", "abs_error", "--markdown")
    (row,) = [line for line in markdown.stdout.splitlines()
              if line.startswith("| doc |") and "seen once" in line]  # the E[Y|A] row
    assert row.count("(n=") <= 5, row
    assert cells["claim: model capability"]["detail"].endswith(
        "; model capability is not licensed")
    shown = invoke(*study, "--decision", "doc", "--score", "abs_error")
    assert "The replay gate is not probed" in shown.stdout
