"""`agentlog estimate reliability`: worst case, CVaR@α and Reliability@τ per group of runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import reliability
from agentlog.examples.deep_research import run_study, task_ids
from agentlog.records import Score
from tests.cli._cli import invoke

# [DMC] §5.1: GPT-4o's per-seed F1 on T3 (dedup), and a steadier model's.
GPT4O_T3 = [0, 0, 1, 0, 0, 0, 0, 1, 1, 1]
HAIKU_T3 = [0.9, 0.95, 0.8, 1.0, 0.85, 0.9, 1.0, 0.95, 0.79, 0.9]


def rel_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("estimate", "reliability", *args, "--json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def bad(*args: str | Path) -> str:
    result = invoke("estimate", "reliability", *args)
    assert result.exit_code == 2, result.output
    return result.stderr


def record_runs(folder: Path, runs: Sequence[tuple[dict[str, Any], float | None]], *,
                name: str = "f1", system: str = "toy", task: str = "T3") -> Path:
    """One trace per run; ``runs[i] = (meta, score)`` (None: the run records no score)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, (meta, value) in enumerate(runs):
        with al.record(folder / f"r{i:03d}.zst", system=meta.pop("system", system), seed=i,
                       task=meta.pop("task", task), meta=meta):
            if value is not None:
                al.score(name, value)
    return folder


@pytest.fixture(scope="module")
def leaderboard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models on T3 (meta "model"), ten seeds each, plus GPT-4o on T4."""
    runs: list[tuple[dict[str, Any], float | None]] = []
    runs += [({"model": "gpt-4o"}, v) for v in GPT4O_T3]
    runs += [({"model": "haiku"}, v) for v in HAIKU_T3]
    runs += [({"model": "gpt-4o", "task": "T4"}, v) for v in (1.0, 0.9, 0.8, 1.0)]
    return record_runs(tmp_path_factory.mktemp("rel") / "board", runs)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example agent: each run scores opened_mean, error and abs_error (channel direct)."""
    out = tmp_path_factory.mktemp("rel") / "study"
    run_study(out, tasks=task_ids(3), rankings=("agent", "reversed"), seeds=(0, 1))
    return out


def test_the_table_shows_mean_ci_worst_cvar_and_reliability_per_group(
    leaderboard: Path,
) -> None:
    result = invoke("estimate", "reliability", leaderboard, "--by", "model,task")
    assert result.exit_code == 0, result.output
    for text in ("Reliability of 'f1' on 24 runs from 24 trace file(s), by model, task "
                 "(model from meta['model']); higher is better",
                 "Reliability beyond the mean ([DMC] §4.4), 3 group(s)",
                 "model", "task", "mean [95% CI]", "worst", "CVaR@0.2", "Reliability@0.9",
                 "gpt-4o", "haiku", "T4", "2,000 draws (seed 0)", "bit-reproducible"):
        assert text in result.stdout, text
    gpt = next(line for line in result.stdout.splitlines() if "gpt-4o" in line and "T3" in line)
    # [DMC] §5.1: mean 0.4, worst 0, CVaR@0.2 0, Reliability@0.9 40%
    assert "0.400 [" in gpt and "0.000" in gpt and "40.0%" in gpt


def test_json_rows_are_the_library_summary(leaderboard: Path) -> None:
    out = rel_json(leaderboard, "--by", "model,task", "--alpha", "0.3", "--tau", "0.85",
                   "--resamples", "500", "--seed", "7")
    with pytest.warns(al.DegenerateDataWarning, match=r"fewer than 20 runs in 3 group\(s\)"):
        expected = reliability.summary(
            GPT4O_T3 + HAIKU_T3 + [1.0, 0.9, 0.8, 1.0],
            groups={"model": ["gpt-4o"] * 10 + ["haiku"] * 10 + ["gpt-4o"] * 4,
                    "task": ["T3"] * 20 + ["T4"] * 4},
            alpha=0.3, tau=0.85, n_resamples=500, seed=7).table()
    assert [g["labels"] for g in out["groups"]] == [
        {"model": "gpt-4o", "task": "T3"}, {"model": "gpt-4o", "task": "T4"},
        {"model": "haiku", "task": "T3"}]
    for got, want in zip(out["groups"], expected, strict=True):
        for key in ("n", "mean", "worst", "cvar", "reliability", "ci_low", "ci_high"):
            assert got[key] == want[key], key
    assert (out["score"], out["by"], out["alpha"], out["tau"]) == ("f1", ["model", "task"],
                                                                   0.3, 0.85)
    assert (out["n_resamples"], out["seed"], out["direction"]) == (500, 7, "higher is better")
    assert out["by_sources"] == {"model": ["meta['model']"], "task": ["task"]}
    assert out["counts"] == {"runs": 24, "scored": 24, "without_score": 0, "groups": 3}
    assert out["settings"]["score_source"] == "the one score the runs record"
    assert len(out["settings"]["traces"]) == 24 and out["plot"] is None
    assert out["runs"][0]["labels"] == {"model": "gpt-4o", "task": "T3"}
    assert out["notes"] == [] and out["ci_method"] == "BCa"
    assert len(out["warnings"]) == 1 and "fewer than 20 runs" in out["warnings"][0]


def test_the_same_seed_gives_the_same_intervals_and_another_seed_other_ones(
    leaderboard: Path,
) -> None:
    a = rel_json(leaderboard, "--by", "model", "--seed", "3")
    b = rel_json(leaderboard, "--by", "model", "--seed", "3")
    c = rel_json(leaderboard, "--by", "model", "--seed", "4")
    assert a["groups"] == b["groups"]
    assert [g["ci_low"] for g in a["groups"]] != [g["ci_low"] for g in c["groups"]]


def test_model_reads_meta_model_then_meta_backbone_then_the_system(tmp_path: Path) -> None:
    folder = record_runs(tmp_path / "mixed", [
        ({"model": "m1", "backbone": "ignored"}, 0.5), ({"model": "m1"}, 0.7),
        ({"backbone": "qwen3-8b"}, 0.2), ({"backbone": "qwen3-8b"}, 0.4),
        ({"system": "scripted"}, 0.9), ({"system": "scripted"}, 1.0),
    ])
    out = rel_json(folder, "--by", "model")
    assert {g["labels"]["model"]: g["n"] for g in out["groups"]} == {
        "m1": 2, "qwen3-8b": 2, "scripted": 2}
    assert out["by_sources"]["model"] == ["meta['backbone']", "meta['model']", "system"]
    shown = invoke("estimate", "reliability", folder, "--by", "model")
    assert "(model from meta['backbone'] / meta['model'] / system)" in shown.stdout
    system = rel_json(folder, "--by", "system")
    assert {g["labels"]["system"] for g in system["groups"]} == {"toy", "scripted"}


def test_any_meta_key_groups_and_runs_without_it_fall_under_a_dash(tmp_path: Path) -> None:
    folder = record_runs(tmp_path / "arms", [
        ({"arm": "A"}, 0.5), ({"arm": "A"}, 0.6), ({"arm": "B"}, 0.1), ({}, 0.3), ({}, 0.2)])
    out = rel_json(folder, "--by", "arm")
    assert [(g["labels"]["arm"], g["n"]) for g in out["groups"]] == [("-", 2), ("A", 2),
                                                                    ("B", 1)]
    assert "2 run(s) have no 'arm' in their meta; grouped under '-'" in out["notes"]
    assert any("a single run in 1 group(s), e.g. 'B'" in w for w in out["warnings"])
    shown = invoke("estimate", "reliability", folder, "--by", "arm")
    assert shown.exit_code == 0 and "warning: a single run" in shown.stdout


def test_lower_is_better_reports_the_largest_errors_in_the_scores_units(study: Path) -> None:
    out = rel_json(study, "--by", "ranking", "--score", "abs_error", "--lower-is-better",
                   "--tau", "0.5", "--resamples", "300")
    assert out["direction"] == "lower is better"
    by_ranking: dict[str, list[float]] = {}
    for trace in (al.read(p) for p in sorted(study.glob("*.zst"))):
        (run,) = trace.runs
        assert run.start is not None
        by_ranking.setdefault(run.start.meta["ranking"], []).append(
            trace.scores("abs_error")[-1].value)
    for g in out["groups"]:
        x = np.sort(by_ranking[g["labels"]["ranking"]])[::-1]  # worst (largest) first
        assert g["n"] == 6
        assert g["mean"] == pytest.approx(x.mean(), abs=1e-12)
        assert g["worst"] == x[0]
        # α·n = 1.2: the largest error plus 0.2 of the next one, over 1.2
        assert g["cvar"] == pytest.approx((x[0] + 0.2 * x[1]) / 1.2, abs=1e-12)
        assert g["reliability"] == pytest.approx(np.mean(x <= 0.5))
        assert g["ci_low"] <= g["mean"] <= g["ci_high"]
    shown = invoke("estimate", "reliability", study, "--by", "ranking", "--score",
                   "abs_error", "--lower-is-better", "--tau", "0.5", "--resamples", "300")
    for text in ("lower is better", "worst (max)", "share ≤ 0.5",
                 "the mean of the largest 0.2·n scores"):
        assert text in shown.stdout, text


def test_transition_scores_are_not_run_outcomes(study: Path) -> None:
    """The evaluator's channel margins (tied to a transition) are left to estimate asv."""
    err = bad(study, "--by", "ranking")
    assert "the runs record several scores (abs_error, error, opened_mean); pass --score" in err
    assert "margin" not in err


def test_runs_without_the_score_are_left_out_or_scored_with_missing_as(tmp_path: Path) -> None:
    folder = record_runs(tmp_path / "crash", [({}, 1.0), ({}, 0.8), ({}, None)])
    out = rel_json(folder)
    assert out["counts"] == {"runs": 3, "scored": 2, "without_score": 1, "groups": 1}
    assert "1 of 3 run(s) record no 'f1' score and are left out" in out["notes"][0]
    assert out["groups"][0]["worst"] == 0.8
    filled = rel_json(folder, "--missing-as", "0")
    assert filled["groups"][0]["worst"] == 0.0 and filled["groups"][0]["n"] == 3
    assert filled["missing_as"] == 0.0 and "scored as 0 (--missing-as)" in filled["notes"][0]
    assert [r["scored"] for r in filled["runs"]] == [True, True, False]


def test_a_run_that_scores_twice_is_scored_by_its_last_record(tmp_path: Path) -> None:
    with al.record(tmp_path / "twice.zst", seed=0):
        al.score("f1", 0.1)
        al.score("f1", 0.9)
    with al.record(tmp_path / "once.zst", seed=1):
        al.score("f1", 0.5)
    out = rel_json(tmp_path)
    assert sorted(r["value"] for r in out["runs"]) == [0.5, 0.9]
    assert "1 run(s) record 'f1' more than once" in out["notes"][0]


def test_plot_writes_a_box_plot_png(leaderboard: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "box.png"
    out = rel_json(leaderboard, "--by", "model,task", "--resamples", "200", "--plot", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out["plot"] == str(png)
    shown = invoke("estimate", "reliability", leaderboard, "--by", "model", "--resamples",
                   "200", "--plot", png)
    assert shown.exit_code == 0
    assert "box.png (box per group: IQR, whiskers min–max, mean, worst case and CVaR@0.2 " \
           "ticks)" in shown.stdout


def test_plot_of_an_error_score_and_a_single_group(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "err.png"
    rel_json(study, "--score", "abs_error", "--lower-is-better", "--resamples", "100",
             "--plot", png)
    assert png.stat().st_size > 1000


def test_plot_without_matplotlib_names_the_pip_line(
    leaderboard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = bad(leaderboard, "--plot", tmp_path / "x.png")
    assert "pip install 'agentlog[plot]'" in err and not (tmp_path / "x.png").exists()


def test_missing_or_unreadable_traces_exit_2_naming_the_file(tmp_path: Path) -> None:
    assert "none.zst: no such file" in bad(tmp_path / "none.zst")
    (tmp_path / "empty").mkdir()
    assert "holds no *.zst trace files" in bad(tmp_path / "empty")
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace at all")
    assert "not a readable agentlog trace" in bad(junk)


def test_unknown_score_and_unknown_by_key_exit_2_listing_what_exists(study: Path) -> None:
    err = bad(study, "--score", "f1")
    assert "no run records a score named 'f1' in 12 trace file(s); scores present: " \
           "abs_error, error, opened_mean" in err
    err = bad(study, "--score", "abs_error", "--by", "ranking,backend")
    assert "--by backend: no run records such a key; use system, task, seed, model or a " \
           "meta key of the runs: backbone, budget, cluster, n_candidates, policy, pool_seed, " \
           "ranking, replicate, target, theta_star" in err


def test_runs_without_scores_exit_2(tmp_path: Path) -> None:
    folder = record_runs(tmp_path / "none", [({}, None), ({}, None)])
    assert "no run-level or window-level Score records in 2 trace file(s)" in bad(folder)
    pytest.importorskip("pyarrow")
    from agentlog.dataset import to_parquet

    to_parquet(folder, tmp_path / "ds")  # a dataset is named as the dataset it is
    assert (f"no run-level or window-level Score records in the dataset {tmp_path / 'ds'};"
            in bad(tmp_path / "ds"))
    assert f"no run records a score named 'f1' in the dataset {tmp_path / 'ds'}" in bad(
        tmp_path / "ds", "--score", "f1")


def test_bad_options_exit_2_naming_the_option(leaderboard: Path) -> None:
    for alpha in ("0", "1.5", "-0.1", "nan"):
        assert "--alpha must be in (0, 1] (the tail fraction of CVaR@α" in bad(
            leaderboard, "--alpha", alpha)
    assert "--tau must be a finite number" in bad(leaderboard, "--tau", "inf")
    assert "--missing-as must be a finite number" in bad(leaderboard, "--missing-as", "nan")
    for by in ("model,,task", "model,model", ""):
        assert "--by must name distinct grouping keys" in bad(leaderboard, "--by", by)
    assert invoke("estimate", "reliability", leaderboard, "--resamples", "1").exit_code == 2
    assert invoke("estimate", "reliability", leaderboard, "--seed", "-1").exit_code == 2


def test_an_unwritable_plot_exits_2(leaderboard: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    err = bad(leaderboard, "--plot", tmp_path / "no" / "x.png")
    assert "x.png: cannot write the plot" in err


def test_a_non_finite_score_exits_2_naming_the_file(tmp_path: Path) -> None:
    # al.score refuses NaN now; a trace from an older agentlog or another writer may hold one
    with al.record(tmp_path / "nan.zst", seed=1) as run:
        run.writer.put(Score(run=run.index, window=-1, name="f1", value=float("nan")))
    err = bad(tmp_path / "nan.zst")
    assert "nan.zst: run 0 records f1 = nan; scores must be finite" in err


def test_estimate_lists_reliability() -> None:
    result = invoke("estimate", "--help")
    assert result.exit_code == 0 and "reliability" in result.stdout


def test_ci_method_reaches_the_estimator_and_an_unknown_one_exits_2(leaderboard: Path) -> None:
    pct = rel_json(leaderboard, "--by", "model", "--ci-method", "percentile", "--resamples",
                   "300")
    with pytest.warns(al.DegenerateDataWarning, match="fewer than 20 runs"):
        expected = reliability.summary(
            [*GPT4O_T3, 1.0, 0.9, 0.8, 1.0, *HAIKU_T3],
            groups=["gpt-4o"] * 14 + ["haiku"] * 10, n_resamples=300,
            method="percentile").table()
    assert pct["ci_method"] == "percentile"
    for got, want in zip(pct["groups"], expected, strict=True):
        assert (got["ci_low"], got["ci_high"]) == (want["ci_low"], want["ci_high"])
    shown = invoke("estimate", "reliability", leaderboard, "--by", "model", "--ci-method",
                   "percentile")
    assert "Intervals: percentile bootstrap of the mean" in shown.stdout
    err = bad(leaderboard, "--ci-method", "studentized")
    assert "`method` must be one of 'percentile', 'basic', 'BCa'" in err
    assert "found 'studentized'" in err
