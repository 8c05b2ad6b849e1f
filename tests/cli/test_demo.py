"""`agentlog demo`: records the bundled agent offline and reports on it.

The default demo is recorded once per session (``demo_run``, tests/conftest.py) and read
by every test that checks it; the other tests run small demos of their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import agentlog as al
from agentlog.cli import _demo, main
from agentlog.cli._demo import render_demo, run_demo
from agentlog.records import Score
from tests.cli._cli import invoke
from tests.conftest import DemoRun

PLAN = Path(__file__).resolve().parents[2] / "examples" / "plans" / "deep_research.toml"


def test_the_cli_package_exports_app_and_main() -> None:
    import agentlog.cli

    assert agentlog.cli.__all__ == ["app", "main"] and callable(main)


def test_demo_json_summarises_files_verification_and_bias_per_ranking(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = invoke("demo", "--out", out, "--tasks", "2", "--seeds", "2", "--json")
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert summary["design"] == {"tasks": 2, "seeds": 2, "rankings": ["agent", "reversed"]}
    totals = summary["totals"]
    assert totals["files"] == totals["runs"] == totals["verified_ok"] == 8
    assert totals["windows"] == 3 * 8 and totals["with_problems"] == 0
    assert sorted(p.name for p in out.glob("*.zst")) == sorted(
        Path(f["path"]).name for f in summary["files"])
    rows = {r["ranking"]: r for r in summary["rankings"]}
    assert set(rows) == {"agent", "reversed"}
    assert rows["agent"]["trajectories"] == rows["reversed"]["trajectories"] == 4
    assert rows["agent"]["theta_star"] == rows["reversed"]["theta_star"]  # the same pools
    assert rows["agent"]["mae"] >= 0 and rows["agent"]["opened_mean"] > rows["reversed"][
        "opened_mean"]
    assert summary["next"][1].startswith("agentlog verify")
    c = summary["cess"]
    assert (c["lam"], c["order"], c["budget"], c["runs"]) == (0.5, "clip-then-shrink", 4, 8)
    assert c["rankings"] == ["agent", "reversed"] and set(c["mae"]) == {"agent", "reversed"}
    assert set(c["mae"]["agent"]) == set(c["sensitivity"]) == {"opened_mean", "dr_raw", "cess"}
    assert "Theorem 2" in c["note"]
    a = summary["asv"]
    assert (a["channels"], a["window"], a["score"]) == (["direct", "quote"], "retrieval",
                                                        "margin")
    assert a["n_transitions"] == a["n_trajectories"] == 8 and a["n_resamples"] == 2000
    assert a["layouts"] == {"direct": 4, "quote": 4}
    assert set(a["statistics"]) == {"mean_interaction", "mean_gain0", "mean_gain1",
                                    "mean_sign_disagreement"}
    low, high = a["statistics"]["mean_interaction"]["interval"]
    assert low <= a["statistics"]["mean_interaction"]["value"] <= high
    assert a["calibration"]["sign_disagreement"] == "invariant"
    # The study's traces lie at the top of --out, the certified variants below it.
    assert summary["next"][2] == (f"agentlog estimate cess {out}/*.zst --outcomes "
                                  f"{out}/outcomes.csv --predictions {out}/predictions.csv "
                                  "--order clip-then-shrink")
    assert summary["next"][3] == (f"agentlog replay {out}/*.zst --channel direct --channel "
                                  "quote --window retrieval --app "
                                  "agentlog.examples.deep_research --out asv.zst")
    assert summary["next"][4] == "agentlog estimate asv asv.zst --channels direct,quote"
    # The ASV face comes from replay: the study itself holds no channel score.
    replayed = out / "replay" / "asv.zst"
    assert a["replay"]["out"] == str(replayed) and al.verify(replayed).ok
    assert (a["replay"]["total"], a["replay"]["done"], a["replay"]["failed"]) == (64, 64, 0)
    assert not any(isinstance(r, Score) and r.transition is not None
                   for p in out.glob("*.zst") for r in al.read(p).records)
    r = summary["reliability"]
    assert (r["score"], r["by"], r["direction"], r["alpha"], r["tau"], r["n_resamples"]) == (
        "abs_error", ["ranking"], "lower is better", 0.2, 0.25, 2000)
    assert [g["labels"] for g in r["groups"]] == [{"ranking": "agent"}, {"ranking": "reversed"}]
    for g in r["groups"]:
        assert g["n"] == 4 and g["ci_low"] <= g["mean"] <= g["ci_high"]
        assert g["mean"] <= g["cvar"] <= g["worst"]  # errors: the tail is the large end
        assert g["mean"] == pytest.approx(rows[g["labels"]["ranking"]]["mae"], abs=1e-12)
    assert r["counts"] == {"runs": 8, "scored": 8, "without_score": 0, "groups": 2}
    assert summary["next"][5] == (f"agentlog estimate reliability {out}/*.zst --by ranking "
                                  "--score abs_error --lower-is-better --tau 0.25")
    plot = " --plot ranks.png" if _demo.can_plot() else ""  # only with the plot extra
    assert summary["next"][6] == (f"agentlog certify {out / 'variants'} --plan "
                                  f"{out / 'plan.toml'}{plot}")
    c = summary["certify"]
    assert c["design"] == {"tasks": 2, "seeds": 2, "ranking": "agent"}
    assert c["n_traces"] == 6 * 2 * 2 == len(list((out / "variants").glob("*.zst")))
    assert (out / "plan.toml").read_bytes() == PLAN.read_bytes()
    assert c["plan"]["hash"] == c["board"]["plan_hash"]
    # Two questions are fewer than the plan's 10: no admissible pair is decided.
    assert c["board"]["counts"]["certified"] == 0
    assert c["board"]["counts"]["not-enough-common-tasks"] > 0


def test_demo_prints_the_tables_and_the_next_commands(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = invoke("demo", "--out", out, "--tasks", "1", "--seeds", "1")
    assert result.exit_code == 0, result.output
    for text in ("Traces", "2 ok", "Opened Mean vs the pool target", "agent", "reversed",
                 "selection bias", "Opened Mean vs CESS against θ*", "MAE · agent",
                 "MAE · reversed", "ranking sensitivity S (agent vs reversed)", "raw DR",
                 "λ = 0.5", "eq. 13", "clip (Π) the raw correction", "not a policy effect",
                 "ASV (Agent Step Value) of the retrieval step, direct vs quote ([ASV]): "
                 "2 transitions", "mean Ω = G^quote − G^direct (the interaction",
                 "mean gains: direct", "sign disagreement:",
                 "calibration ([ASV] Remark 2, calibration invariance): gain signs and sign "
                 "disagreement survive",
                 "2,000 draws in the demo",
                 "Reliability beyond the mean ([DMC]): each run's error |Opened Mean − "
                 "θ*| per ranking, lower is better", "agent     1 runs: mean ",
                 "reversed  1 runs: mean ", "worst ", "CVaR@0.2 ", "within 0.25 of θ*: ",
                 "bootstrap CI of the mean, 2,000 draws (seed 0)",
                 "warning: a single run in 2 group(s)",
                 "Certified leaderboard of 6 search-policy variants ([LBC])",
                 "1 questions x 1 seeds, ranking agent, 6 traces in",
                 "not decided: 10 pair(s) with fewer than 10 common questions; run the demo "
                 "with --tasks 20", "agentlog inspect", "agentlog verify",
                 "agentlog estimate asv", "agentlog estimate reliability", "agentlog certify"):
        assert text in result.stdout


def test_the_default_demo_records_its_whole_design_and_every_trace_verifies(
    demo_run: DemoRun,
) -> None:
    summary = demo_run.summary
    assert summary["totals"]["files"] == 20 * 2 * 3 and summary["totals"]["with_problems"] == 0
    assert all(al.verify(demo_run.folder / f["path"]).ok for f in summary["files"])
    assert summary["asv"]["n_transitions"] == 120
    assert [g["n"] for g in summary["reliability"]["groups"]] == [60, 60]
    assert summary["reliability"]["warnings"] == []
    assert summary["certify"]["n_traces"] == 6 * 20 * 3
    variants = sorted((demo_run.out / "variants").glob("*.zst"))
    assert len(variants) == 6 * 20 * 3 and all(al.verify(p).ok for p in variants)


def test_the_default_demo_certifies_the_fair_variants_and_refuses_the_unfair_ones(
    demo_run: DemoRun,
) -> None:
    """[LBC] on the demo's variants: the privileged entry and the other backbone are
    refused against everyone, the exact cells are decided by the sampling radius alone."""
    summary = demo_run.summary
    board = summary["certify"]["board"]
    assert board["target"] == "abs_error" and board["family_size"] == 15
    assert summary["certify"]["backbones"]["olmo"] == ["olmo-2-7b"]
    # By raw score the privileged variant is first; its interval spans every position.
    first = board["systems"][0]
    assert first["system"] == "oracle-hint" and first["rank"] == [1, 6]
    for p in board["pairs"]:
        unfair = {"oracle-hint", "olmo"} & {p["a"], p["b"]}
        if "olmo" in unfair:
            assert p["decision"] == "refused" and "backbone change" in p["reason"]
        elif unfair:
            assert p["decision"] == "refused" and "`pool` bytes differ on 20 of 20" in p["reason"]
        else:
            assert p["eps_out"] == 0.0 and p["r"] == 0.0
            assert p["decision"] == ("certified" if abs(p["delta"]) > p["q"]
                                     else "undecided-sampling")
    assert board["counts"] == {"certified": 5, "undecided-sampling": 1,
                               "undecided-attribution": 0, "refused": 9,
                               "not-enough-common-tasks": 0}
    console = Console(record=True, width=200)
    render_demo(summary, console)
    text = console.export_text()
    for line in ("  1–6  oracle-hint    0.137  privileged entry",
                 "certified               explorer ≻ greedy",
                 "undecided (sampling)    deep-research vs patient",
                 "refused before any score was read: 9 of 15 pairs",
                 "every pair with olmo: backbone change:",
                 "every pair with oracle-hint: the plan declares one shared entry",
                 "R0 15/15", "R5 5/6",
                 "A sorted table would put oracle-hint first; the certificate refuses every "
                 "comparison with it and leaves it anywhere in 1–6.",
                 "ε̂_out = 0 and r = 0, so certification rests on the sampling radius q alone"):
        assert line in text, line


def test_the_default_demo_shows_a_tail_the_mean_hides(demo_run: DemoRun) -> None:
    """[DMC]'s point on the demo's seeded study: the ranking with the lower mean error
    has the worse tail."""
    summary = demo_run.summary
    agent, reversed_ = summary["reliability"]["groups"]
    assert reversed_["mean"] < agent["mean"] and reversed_["cvar"] > agent["cvar"]
    console = Console(record=True, width=200)
    render_demo(summary, console)
    assert ("The mean and the tail disagree: reversed has the lower mean error, agent the "
            "lower CVaR@0.2") in console.export_text()


def test_the_default_demo_shows_cess_closer_to_theta_star_and_steadier_across_rankings(
    demo_run: DemoRun,
) -> None:
    """What the demo is for: on its seeded study CESS beats the Opened Mean on both counts."""
    c = demo_run.summary["cess"]
    for ranking in ("agent", "reversed"):
        assert c["mae"][ranking]["cess"] < c["mae"][ranking]["opened_mean"]
    s = c["sensitivity"]
    assert s["cess"] < s["dr_raw"] < s["opened_mean"]


def test_the_demo_with_one_ranking_has_no_sensitivity(tmp_path: Path) -> None:
    summary = run_demo(tmp_path / "demo", tasks=1, seeds=1, rankings=("agent",))
    assert summary["cess"]["sensitivity"] is None and list(summary["cess"]["mae"]) == ["agent"]
    console = Console(record=True, width=200)
    render_demo(summary, console)
    text = console.export_text()
    assert "MAE · agent" in text and "ranking sensitivity" not in text
    assert summary["asv"]["n_trajectories"] == 1
    assert "warning: one trajectory only" in text  # the bootstrap has no spread


def test_render_demo_draws_every_section_of_a_summary(tmp_path: Path) -> None:
    summary = run_demo(tmp_path / "demo", tasks=1, seeds=1)
    console = Console(record=True, width=200)
    render_demo(summary, console)
    text = console.export_text()
    assert "Recorded the bundled deep-research agent" in text and "MAE" in text


def test_demo_into_a_path_that_is_a_file_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("not a folder")
    result = invoke("demo", "--out", target)
    assert result.exit_code == 2
    assert "taken: exists and is not a folder" in result.stderr and "--out" in result.stderr


def test_demo_rejects_a_non_positive_count() -> None:
    assert invoke("demo", "--tasks", "0").exit_code == 2


def test_python_dash_m_agentlog_cli_runs_the_same_app(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "verify", tmp_path / "none.zst"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "none.zst: no such file" in done.stdout


def test_the_demo_says_what_each_term_means_where_it_first_uses_it(tmp_path: Path) -> None:
    result = invoke("demo", "--out", tmp_path / "demo", "--tasks", "10", "--seeds", "1")
    assert result.exit_code == 0, result.output
    text = result.stdout
    for term, meaning in (
        ("θ*", "θ* (the pool target): the mean evidence score over the question's whole "
               "candidate pool"),
        ("raw DR", "raw DR: the doubly robust estimate"),
        ("CESS", "CESS (Causal Evidence Selection Correction)"),
        ("ASV", "ASV (Agent Step Value)"),
        ("Ω", "(the interaction: how much the step's gain G changes"),
        ("Remark 2", "Remark 2, calibration invariance"),
        ("CVaR", "CVaR@0.2 (conditional value at risk) = the mean of the worst 20% of runs"),
        ("ε̂_out", "ε̂_out (estimated difference of the conditions outside the window)"),
        ("R0", "R0 a sorted table, R1 a paired t-test"),
        ("CR2", "CR2 (bias-reduced) cluster-robust standard errors"),
    ):
        assert meaning in text, term
        # explained where it is first used: in that line, or under the table it heads
        assert text.index(meaning) - text.index(term) < 1_200, term


def test_the_demo_writes_the_pool_tables_its_cess_suggestion_reads(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    summary = run_demo(out, tasks=2, seeds=1)
    assert summary["tables"] == {"outcomes": str(out / "outcomes.csv"),
                                 "predictions": str(out / "predictions.csv")}
    header = (out / "outcomes.csv").read_text().splitlines()[0]
    assert header == "task,candidate_id,y"
    (suggestion,) = [c for c in summary["next"] if c.startswith("agentlog estimate cess")]
    args = suggestion.split()[1:]
    traces = sorted(str(p) for p in out.glob("*.zst"))
    study = [a for a in args if a.endswith("*.zst")]
    assert len(study) == 1
    args = [a for a in args if not a.endswith("*.zst")]
    result = invoke(*args[:2], *traces, *args[2:], "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["runs"]) == 2 * 2  # 2 questions x 2 rankings


def test_the_demo_suggests_plot_only_when_matplotlib_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_demo, "can_plot", lambda: False)
    summary = run_demo(tmp_path / "demo", tasks=1, seeds=1)
    assert not any("--plot" in c for c in summary["next"])
    monkeypatch.setattr(_demo, "can_plot", lambda: True)
    summary = run_demo(tmp_path / "demo2", tasks=1, seeds=1)
    assert any(c.endswith("--plot ranks.png") for c in summary["next"])


def test_demo_into_an_unwritable_folder_exits_2_with_one_message(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for out in (blocker / "demo", Path("/proc/agentlog-forbidden")):
        if out.is_relative_to("/proc") and not Path("/proc").is_dir():
            continue
        result = invoke("demo", "--out", out)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert f"{out}: cannot write the demo traces there" in lines[0]
        assert "pass --out with a folder you can create and write to" in lines[0]
        assert "Warning" not in result.output and "no such file" not in result.output
