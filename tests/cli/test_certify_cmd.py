"""`agentlog certify`: the certified leaderboard of a set of traces under a plan ([LBC])."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from typer.testing import Result

import agentlog as al
from agentlog.cli._certify_cmd import plot_rank_intervals, render_board
from agentlog.estimators import certify
from agentlog.examples.deep_research import Policy, run_study, task_ids
from tests.cli._cli import invoke as cli_invoke
from tests.conftest import DemoRun

PLAN = Path(__file__).resolve().parents[2] / "examples" / "plans" / "deep_research.toml"
SYSTEMS = {
    "reference": Policy(),
    "explorer": Policy(temperature=30.0, floor=0.5),
    "greedy": Policy(temperature=1.0, floor=0.02),
    "privileged": Policy(oracle_hint=True),
    "other-backbone": Policy(temperature=2.0, backbone="olmo-2-7b"),
}


def invoke(*args: str | Path) -> Result:
    return cli_invoke(*args, columns=240)  # the board's rows are wide


def bad(*args: str | Path) -> str:
    """Run a command that must exit 2; its error message (stderr)."""
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    return " ".join(result.stderr.split())  # rich may wrap long messages


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("leaderboard")
    run_study(out, tasks=task_ids(10), rankings=("agent",), seeds=(0, 1), systems=SYSTEMS,
              evaluate=False)
    return out


@pytest.fixture(scope="module")
def two_systems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two fair systems far apart: the one pair is certified, both ranks are pinned."""
    out = tmp_path_factory.mktemp("pair")
    run_study(out, tasks=task_ids(12), rankings=("agent",), seeds=(0, 1, 2),
              systems={"explorer": SYSTEMS["explorer"], "greedy": SYSTEMS["greedy"]},
              evaluate=False)
    return out


def library_board(traces: Path, plan_path: Path = PLAN) -> Any:
    plan = certify.Plan.from_toml(plan_path)
    data = certify.from_traces(traces, plan=plan)
    return certify.certify(data, plan=plan,
                           admissibility=certify.admissibility(data.entries, plan=plan))


def plan_text(old: str = "", new: str = "") -> str:
    text = PLAN.read_text(encoding="utf-8")
    assert old in text
    return text.replace(old, new)


def write_plan(tmp_path: Path, text: str, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the board


def test_the_table_shows_scores_ranks_decisions_the_ladder_and_hashes(study: Path) -> None:
    result = invoke("certify", study, "--plan", PLAN)
    assert result.exit_code == 0, result.output
    out = result.stdout
    board = library_board(study)
    for text in ("Certified leaderboard 'deep-research variants' ([LBC] §3.4): 5 systems "
                 "ranked on abs_error (lower is better), 10 task clusters, Bonferroni over 10 "
                 "pairs at δ′ = 0.05 (CR2 variance, Bell–McCaffrey df); admissibility from the "
                 "sealed entries of window "
                 "`retrieval`",
                 "composite ↑", "abs_error ↓ (target)", "olmo-2-7b", "scripted",
                 "certified: explorer ≻ greedy", "refused", "∞",
                 "refused privileged vs reference: the plan declares one shared entry, but the "
                 "entries' `pool` bytes differ on 10 of 10 common tasks",
                 "refused other-backbone vs reference: backbone change:",
                 "eq. 3 has no finite radius",
                 "Conventional ladder beside the certificate ([LBC] Table 2)",
                 "R0", "R5", "+ nuisance radius", "Calibration (Appendix F.5, 2,000 sign-flip "
                 "draws, seed 0)", f"plan sha256 {board.plan_hash}",
                 f"scores sha256 {board.scores_hash}",
                 "inputs: 100 trace file(s) (sha256 of each in --json)"):
        assert text in out, text
    # One row per system, best first, with its certified interval.
    rows = [m.groups() for m in re.finditer(r"^│ (\d+)–(\d+) +│ ([\w-]+) +│", out, re.M)]
    assert rows == [(str(board.rank(s)[0]), str(board.rank(s)[1]), s) for s in board.systems]
    counts = board.counts()
    assert (f"{counts['certified']} certified" in out
            and f"{counts['refused']} refused of 10 pairs" in out)


def test_json_is_the_librarys_board_and_says_what_was_hashed(study: Path) -> None:
    result = invoke("certify", study, "--plan", PLAN, "--json")
    assert result.exit_code == 0, result.output
    expected = json.loads(json.dumps(library_board(study).to_dict(), allow_nan=False))
    out = json.loads(result.stdout)
    assert out.pop("inputs") == {"traces": [str(study)], "executor": "local",
                                 "hashed": "each trace file as this command read it"}
    assert out == expected


def test_a_pinned_rank_is_marked_in_the_table_and_the_json(two_systems: Path) -> None:
    out = json.loads(invoke("certify", two_systems, "--plan", PLAN, "--json").stdout)
    assert [(s["system"], s["rank"], s["pinned"]) for s in out["systems"]] == [
        ("explorer", [1, 1], True), ("greedy", [2, 2], True)]
    text = invoke("certify", two_systems, "--plan", PLAN).stdout
    assert "│ 1 ●  │ explorer" in text and "│ 2 ●  │ greedy" in text


def test_plot_writes_the_rank_intervals_as_a_png(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "ranks.png"
    result = invoke("certify", study, "--plan", PLAN, "--plot", png)
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Wrote " in result.stdout and "Figure 1" in result.stdout


def test_the_plot_draws_a_marker_for_a_pinned_rank(two_systems: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "pinned.png"
    plot_rank_intervals(library_board(two_systems).to_dict(), png)
    assert png.stat().st_size > 1000


def test_the_window_option_takes_the_comparison_window(study: Path) -> None:
    """`--window retrieval` is the plan's own window: the same board."""
    a = json.loads(invoke("certify", study, "--plan", PLAN, "--json").stdout)
    b = json.loads(invoke("certify", study, "--plan", PLAN, "--window", "retrieval",
                          "--json").stdout)
    assert a == b


def test_a_plan_without_a_window_decides_from_its_declarations(study: Path,
                                                                  tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text('window = "retrieval"\n', ""))
    out = json.loads(invoke("certify", study, "--plan", plan, "--json").stdout)
    assert out["admissibility"]["source"] == "declared"
    assert {p["status"] for p in out["admissibility"]["pairs"]} == {"declared"}
    text = invoke("certify", study, "--plan", plan).stdout
    assert "admissibility from the plan's declarations (no entries)" in text


def test_render_board_draws_a_board_dict_without_backbones(two_systems: Path) -> None:
    console = Console(record=True, width=200)
    render_board(library_board(two_systems).to_dict(), console)
    text = console.export_text()
    assert "backbone" not in text.split("Pairs")[0] and "certified: explorer ≻ greedy" in text


def test_the_pinned_legend_appears_only_when_a_rank_is_pinned(study: Path,
                                                              two_systems: Path) -> None:
    unpinned = invoke("certify", study, "--plan", PLAN).stdout
    assert not any(s["pinned"] for s in library_board(study).to_dict()["systems"])
    assert "pinned" not in unpinned
    assert "(rank: certified interval)" in unpinned
    pinned = invoke("certify", two_systems, "--plan", PLAN).stdout
    assert "(rank: certified interval; ● pinned)" in pinned


def test_the_board_says_which_sampling_variance_it_used_and_each_pairs_df(
        study: Path, tmp_path: Path) -> None:
    out = json.loads(invoke("certify", study, "--plan", PLAN, "--json").stdout)
    assert out["sampling"] == "cr2-bm" and out["plan"]["sampling"] == "cr2-bm"
    assert all(p["sampling"] == "cr2-bm" and p["df"] > 0 for p in out["pairs"]
               if p["decision"] != "refused")
    text = invoke("certify", study, "--plan", PLAN).stdout
    assert re.search(r"┃ +q ┃ +df ┃ +ε̂_out ┃", text), text
    assert "(CR2 variance, Bell–McCaffrey df; df = its degrees of freedom" in " ".join(
        text.split())
    cr1 = write_plan(tmp_path, plan_text('sampling = "cr2-bm"', 'sampling = "cr1"'))
    out1 = json.loads(invoke("certify", study, "--plan", cr1, "--json").stdout)
    assert out1["sampling"] == "cr1" and out1["plan_hash"] != out["plan_hash"]
    assert {p["df"] for p in out1["pairs"] if p["df"] is not None} == {9.0}  # G − 1
    assert "(CR1 variance, t(G−1) as in [LBC] §6.1)" in invoke(
        "certify", study, "--plan", cr1).stdout


def test_a_pair_one_cluster_dominates_is_labelled_on_the_board() -> None:
    rng = np.random.default_rng(1)
    clusters = [0] * 40 + list(range(1, 21))  # one cluster holds two thirds of 60 tasks
    task = rng.normal(0, 1, 60)
    scores = {s: task + rng.normal(0, 1, 60) for s in "abc"}
    plan = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.05\n'
                                  "[conditions]\nshared_entry = true\n"
                                  "[calibration]\nn_resamples = 100\n")
    board = certify.certify(scores, clusters=clusters, plan=plan).to_dict()
    console = Console(record=True, width=240)
    render_board(board, console)
    text = " ".join(console.export_text().split())
    assert "undecided (sampling; one cluster dominates)" in text
    assert ("undecided (sampling; one cluster dominates) a vs b: sampling-limited because one "
            "cluster dominates: cluster '0' holds 40 of 60 tasks") in text
    assert "warning: 3 pair(s) have fewer than 3 effective degrees of freedom" in text
    many = {s: task + rng.normal(0, 1, 60) for s in "abcdef"}  # 15 pairs, all dominated
    console = Console(record=True, width=240)
    render_board(certify.certify(many, clusters=clusters, plan=plan).to_dict(), console)
    text = " ".join(console.export_text().split())
    assert text.count("sampling-limited because one cluster dominates: cluster '0'") == 3
    assert ("… and 12 more sampling-limited pair(s) with a dominant cluster or zero variance "
            "(reasons in --json)") in text


# ----------------------------------------------------------------------------- bad input


def test_a_missing_plan_exits_2_saying_what_a_plan_is(study: Path, tmp_path: Path) -> None:
    assert "--plan is required: a certification plan (TOML) declares the readouts" in bad(
        "certify", study)
    err = bad("certify", study, "--plan", tmp_path / "none.toml")
    assert "none.toml: no such plan file" in err and "deep_research.toml" in err
    assert "is a folder" in bad("certify", study, "--plan", tmp_path)


def test_a_plan_missing_a_tolerance_exits_2_naming_the_readout(study: Path,
                                                               tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text("tolerance = 0.05", ""))
    err = bad("certify", study, "--plan", plan)
    assert f"{plan}: not a usable certification plan: the plan names readout(s) `abs_error` " \
           "without a `tolerance` (ε_fair, [LBC] Def. 1); add e.g. [readouts.abs_error] " \
           "tolerance = 0.05 before any score is read" in err


def test_a_malformed_plan_exits_2_naming_the_file_and_the_field(study: Path,
                                                                tmp_path: Path) -> None:
    plan = write_plan(tmp_path, "estimand = \n", "broken.toml")
    assert "broken.toml: not a usable certification plan: the plan is not valid TOML" in bad(
        "certify", study, "--plan", plan)
    plan = write_plan(tmp_path, "[readouts.f1]\ntolerance = 0.05\n", "no_estimand.toml")
    assert "no_estimand.toml: not a usable certification plan: `estimand`: required, but the " \
           "plan does not set it" in bad("certify", study, "--plan", plan)
    plan = write_plan(tmp_path, plan_text("delta = 0.05 ", "delta = 2 "), "delta.toml")
    assert "`delta`: Input should be less than 1" in bad("certify", study, "--plan", plan)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "binary.toml: is not a text (UTF-8 TOML) file" in bad("certify", study, "--plan",
                                                                  binary)


def test_unreadable_traces_exit_2_naming_the_file(tmp_path: Path) -> None:
    assert "none.zst: no such file" in bad("certify", tmp_path / "none.zst", "--plan", PLAN)
    (tmp_path / "empty").mkdir()
    assert "empty: folder holds no *.zst trace files" in bad("certify", tmp_path / "empty",
                                                             "--plan", PLAN)
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace at all")
    assert "not a readable agentlog trace" in bad("certify", junk, "--plan", PLAN)


def test_no_run_matching_the_plans_select_exits_2(study: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text('select = { ranking = "agent" }',
                                          'select = { ranking = "uniform" }'))
    assert "no run matching select = {'ranking': 'uniform'} in 100 trace file(s)" in bad(
        "certify", study, "--plan", plan)


def test_a_readout_the_runs_do_not_record_exits_2(study: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text("[readouts.abs_error]", "[readouts.f1]\ntolerance = "
                                          "0.05\n[readouts.abs_error]"))
    err = bad("certify", study, "--plan", plan)
    assert "ended normally but has no score for readout(s) ['f1']" in err and ".zst: run " in err


def test_a_window_no_run_enters_exits_2_listing_the_windows(study: Path) -> None:
    err = bad("certify", study, "--plan", PLAN, "--window", "planning")
    assert "no run enters window `planning` (--window) in 100 trace file(s); windows " \
           "present: retrieval, score, synthesis" in err


def test_one_system_exits_2(tmp_path: Path) -> None:
    run_study(tmp_path, tasks=task_ids(2), rankings=("agent",), seeds=(0,), evaluate=False)
    assert "hold runs of one system ('deep-research') matching the plan's select = " \
           "{'ranking': 'agent'}; a leaderboard compares at least two" in bad(
               "certify", tmp_path, "--plan", PLAN)


def record(path: Path, system: str, task: str, cluster: str, value: float) -> None:
    with al.record(path, system=system, seed=0, task=task,
                   meta={"ranking": "agent", "cluster": cluster}):
        al.score("abs_error", value, channel="direct")


def test_a_task_in_two_clusters_exits_2(tmp_path: Path) -> None:
    """A task has one cluster: the clusters must partition the tasks."""
    record(tmp_path / "a.zst", "a", "t0", "field-1", 0.1)
    record(tmp_path / "b.zst", "b", "t0", "field-2", 0.2)
    plan = write_plan(tmp_path, plan_text('window = "retrieval"\n', ""))
    assert "task 't0' is in cluster" in bad("certify", tmp_path, "--plan", plan)


def test_a_family_naming_an_unknown_system_exits_2(study: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text('family = "all"', 'family = [["reference", "zzz"]]'))
    assert "`family` names system 'zzz', which has no scores" in bad("certify", study,
                                                                     "--plan", plan)


def test_an_unwritable_plot_exits_2(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    err = bad("certify", study, "--plan", PLAN, "--plot", tmp_path / "no" / "such" / "r.png")
    assert "r.png: cannot write the plot" in err


# ----------------------------------------------------------------------------- a Parquet dataset


@pytest.fixture(scope="module")
def demo_dataset(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default demo's variants exported as a Parquet dataset (sources named absolute,
    as the traces are when certified)."""
    pytest.importorskip("pyarrow")
    from agentlog.dataset import to_parquet

    out = tmp_path_factory.mktemp("parquet") / "variants"
    to_parquet(demo_run.out / "variants", out)
    return out


def test_a_parquet_dataset_certifies_to_the_board_of_its_traces(
        demo_run: DemoRun, demo_dataset: Path) -> None:
    """The demo's variants, as traces and as the dataset exported from them: the same board;
    only `inputs` differs, and says which files the hashes are of."""
    plan = demo_run.out / "plan.toml"
    traces = invoke("certify", demo_run.out / "variants", "--plan", plan, "--json")
    dataset = invoke("certify", demo_dataset, "--plan", plan, "--json")
    assert traces.exit_code == 0, traces.output
    assert dataset.exit_code == 0, dataset.output
    a, b = json.loads(traces.stdout), json.loads(dataset.stdout)
    assert a.pop("inputs") == {"traces": [str(demo_run.out / "variants")], "executor": "local",
                               "hashed": "each trace file as this command read it"}
    assert b.pop("inputs") == {
        "dataset": str(demo_dataset), "executor": "local",
        "hashed": "each trace file as the export recorded it in runs.source_sha256; the "
                  "comparison window's entries were read from those files, each checked "
                  "against it first"}
    assert a == b and a["admissibility"]["source"] == "entries"
    assert len(a["input_hashes"]) == 360 and a["counts"]["certified"] > 0
    text = invoke("certify", demo_dataset, "--plan", plan).stdout
    assert (f"inputs: 360 trace file(s) exported into the Parquet dataset {demo_dataset} "
            "(sha256 of each trace file as the export recorded it") in " ".join(text.split())


def _small_dataset(demo_run: DemoRun, tmp_path: Path) -> tuple[Path, Path]:
    """A dataset exported from a copy of some of the demo's variants: (its traces, it)."""
    from agentlog.dataset import to_parquet

    traces = tmp_path / "traces"
    traces.mkdir()
    for path in sorted((demo_run.out / "variants").glob("*_s0.zst")):
        (traces / path.name).write_bytes(path.read_bytes())
    to_parquet(traces, tmp_path / "ds")
    return traces, tmp_path / "ds"


def test_a_dataset_whose_traces_are_gone_needs_them_or_a_plan_without_a_window(
        demo_run: DemoRun, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    traces, ds = _small_dataset(demo_run, tmp_path)
    gone = sorted(traces.glob("*.zst"))[0]
    gone.unlink()
    plan = demo_run.out / "plan.toml"
    assert ("the comparison window `retrieval` (the plan's `window`) decides admissibility "
            f"from each run's sealed entry, which the dataset {ds} does not hold; they are "
            "read from the 120 trace file(s) it was exported from, but 1 of them are gone "
            f"(e.g. {gone}, named as the export was given it, relative to where it ran); pass "
            "those traces instead of the dataset (agentlog certify TRACES --plan ...), or a "
            "plan without a comparison window") in bad("certify", ds, "--plan", plan)
    no_window = write_plan(tmp_path, "".join(
        line for line in plan.read_text().splitlines(keepends=True)
        if not line.startswith("window = ")))
    result = invoke("certify", ds, "--plan", no_window, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["admissibility"]["source"] == "declared"
    assert out["inputs"]["hashed"] == "each trace file as the export recorded it in " \
                                      "runs.source_sha256"


def test_a_dataset_whose_traces_changed_since_the_export_exits_2(
        demo_run: DemoRun, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    traces, ds = _small_dataset(demo_run, tmp_path)
    changed = sorted(traces.glob("*.zst"))[3]
    changed.write_bytes(changed.read_bytes() + b"\0")
    err = bad("certify", ds, "--plan", demo_run.out / "plan.toml", "--window", "retrieval")
    assert ("the comparison window `retrieval` (--window) decides admissibility" in err
            and f"but 1 of them changed since the export (their SHA-256 differs from the one "
                f"it recorded, e.g. {changed}); export them again into a fresh folder, or pass "
                "those traces instead of the dataset" in err)
