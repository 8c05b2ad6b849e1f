"""`agentlog estimate cess`: CESS per condition from traces and tables; bad input exits 2."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import cess
from agentlog.examples.deep_research import make_pool, run_study, task_ids
from tests.cli._cli import invoke

TASKS = task_ids(2)


def write_tables(folder: Path, *, skip: frozenset[str] | set[str] = frozenset(),
                 ) -> tuple[Path, Path]:
    """Outcomes and predictions of the demo pools as CSV tables keyed by (task, id)."""
    y_path, m_path = folder / "outcomes.csv", folder / "predictions.csv"
    with y_path.open("w", newline="") as fy, m_path.open("w", newline="") as fm:
        y, m = csv.writer(fy), csv.writer(fm)
        y.writerow(["task", "candidate_id", "y"])
        m.writerow(["task", "candidate_id", "prediction"])
        for task in TASKS:
            pool = make_pool(task, seed=0)
            for cid, yi, mi in zip(pool.ids, pool.y, pool.prediction, strict=True):
                if cid not in skip:
                    y.writerow([task, cid, repr(yi)])
                m.writerow([task, cid, repr(mi)])
    return y_path, m_path


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("estimate")
    traces = root / "traces"
    run_study(traces, tasks=TASKS, rankings=("agent", "reversed"), seeds=(0, 1))
    y, m = write_tables(root)
    return {"root": root, "traces": traces, "y": y, "m": m}


def cess_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("estimate", "cess", *args, "--json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_the_table_reports_every_estimator_per_condition_and_the_mae_against_theta_star(
    study: dict[str, Path],
) -> None:
    result = invoke("estimate", "cess", study["traces"], "--outcomes", study["y"],
                    "--predictions", study["m"], "--order", "clip-then-shrink")
    assert result.exit_code == 0, result.output
    for text in ("CESS on 8 runs from 8 trace file(s)", "K = 4 (recorded in the runs' meta)",
                 "λ = 0.5", "(eq. 13)", "CESS estimates by condition", "agent", "reversed",
                 "all", "Opened Mean", "OR", "IPW", "DR (raw)", "median ESS",
                 "MAE against the pool target θ*", "not a policy effect"):
        assert text in result.stdout, text
    assert "support interval" not in result.stdout  # every candidate was reachable


def test_json_holds_per_run_and_per_condition_numbers_equal_to_the_library(
    study: dict[str, Path],
) -> None:
    out = cess_json(study["traces"], "--outcomes", study["y"], "--predictions", study["m"])
    data = cess.from_traces(study["traces"], outcomes=cess.load_table(study["y"]),
                            predictions=cess.load_table(study["m"]), budget=4)
    res = data.estimate(lam=0.5)  # the command's defaults are the library's
    assert out["settings"]["budget"] == 4 and out["settings"]["order"] == "shrink-then-clip"
    assert [r["run_id"] for r in out["runs"]] == list(data.run_id)
    np.testing.assert_allclose([r["cess"] for r in out["runs"]], res.estimate, atol=1e-12)
    np.testing.assert_allclose([r["dr_raw"] for r in out["runs"]], res.dr_raw, atol=1e-12)
    np.testing.assert_allclose([r["theta_star"] for r in out["runs"]], data.theta_star)
    conditions = {c["condition"]: c for c in out["conditions"]}
    assert list(conditions) == ["agent", "reversed", "all"]
    assert conditions["agent"]["runs"] == conditions["reversed"]["runs"] == 4
    rows = np.array([c == "agent" for c in data.condition])
    assert conditions["agent"]["mae"]["cess"] == pytest.approx(
        cess.mae(res.estimate[rows], data.theta_star[rows],
                 question=np.array(data.cluster)[rows]), abs=1e-12)
    assert conditions["all"]["cess"] == pytest.approx(float(res.estimate.mean()), abs=1e-12)
    assert out["theta_star_known"] and out["warnings"] == [] and out["plot"] is None
    assert "Theorem 2" in out["note"]


def test_options_reach_the_estimator(study: dict[str, Path]) -> None:
    out = cess_json(study["traces"], "--outcomes", study["y"], "--predictions", study["m"],
                    "--lam", "0", "--order", "shrink-then-clip", "--budget", "2")
    assert out["settings"]["budget_source"] == "--budget" and out["settings"]["budget"] == 2
    assert all(r["cess"] == pytest.approx(r["outcome_regression"]) for r in out["runs"])
    opened = cess_json(study["traces"], "--outcomes", study["y"], "--predictions", study["m"],
                       "--lam", "0", "--anchor", "opened")
    assert all(r["cess"] == pytest.approx(r["opened_mean"]) for r in opened["runs"])


def test_plot_writes_a_png_of_mae_across_budgets(study: dict[str, Path],
                                                  tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "budgets.png"
    out = cess_json(study["traces"], "--outcomes", study["y"], "--predictions", study["m"],
                    "--plot", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curve = out["budget_curve"]
    assert curve["budget"] == [1, 2, 3, 4] and out["plot"] == str(png)
    (everything,) = [c for c in out["conditions"] if c["condition"] == "all"]
    assert curve["cess"][-1] == pytest.approx(everything["mae"]["cess"], abs=1e-12)
    assert curve["opened_mean"][-1] == pytest.approx(everything["mae"]["opened_mean"])
    shown = invoke("estimate", "cess", study["traces"], "--outcomes", study["y"],
                   "--predictions", study["m"], "--plot", png)
    assert shown.exit_code == 0 and "budgets.png (MAE across budgets 1..4)" in shown.stdout


def test_limited_support_shows_the_eq_10_interval_and_the_warning(tmp_path: Path) -> None:
    for seed in range(3):
        with al.record(tmp_path / f"greedy{seed}.zst", seed=seed, task="t",
                       meta={"condition": "greedy"}):
            for _ in range(2):
                al.select([0.5, 0.5, 0.0, 0.0], candidates=["a", "b", "c", "d"], name="doc")
    table = tmp_path / "y.jsonl"
    table.write_text("".join(json.dumps({"candidate_id": c, "y": v}) + "\n"
                             for c, v in zip("abcd", (0.5, 0.1, -0.4, -0.9), strict=True)))
    args: list[str | Path] = ["estimate", "cess", *sorted(tmp_path.glob("*.zst")),
                              "--outcomes", table, "--predictions", table]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    for text in ("support interval", "θ* in interval", "reachable mean θ+",
                 "reach only part of the pool"):
        assert text in result.stdout, text
    out = json.loads(invoke(*args, "--json").stdout)
    (greedy,) = out["conditions"]
    assert greedy["support"]["mean_rho"] == pytest.approx(0.5)
    assert greedy["support"]["covers_theta_star"] == 3  # the sharp interval holds θ*
    assert out["settings"]["stop_stream"] == "stop" and out["runs"][0]["n_pool"] == 2


# -- bad input exits 2 -------------------------------------------------------------------


def bad(*args: str | Path) -> str:
    result = invoke("estimate", "cess", *args)
    assert result.exit_code == 2, result.output
    return result.stderr


def test_missing_or_unreadable_inputs_exit_2_naming_the_file(study: dict[str, Path],
                                                            tmp_path: Path) -> None:
    y, m = study["y"], study["m"]
    assert "none.zst: no such file" in bad(tmp_path / "none.zst", "--outcomes", y,
                                           "--predictions", m)
    (tmp_path / "empty").mkdir()
    assert "holds no *.zst trace files" in bad(tmp_path / "empty", "--outcomes", y,
                                              "--predictions", m)
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace at all")
    assert "not a readable agentlog trace" in bad(junk, "--outcomes", y, "--predictions", m)
    err = bad(study["traces"], "--outcomes", tmp_path / "y.csv", "--predictions", m)
    assert "y.csv: no such file; pass the outcomes table" in err
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("id,y\nd1,0.5\n")
    err = bad(study["traces"], "--outcomes", y, "--predictions", nocol)
    assert "nocol.csv: no 'candidate_id' column" in err and "predictions table" in err


def test_a_selected_candidate_without_an_outcome_exits_2(study: dict[str, Path],
                                                        tmp_path: Path) -> None:
    trace = al.read(sorted(study["traces"].glob("*.zst"))[0])
    first = trace.selections("doc")[0]
    cid = msgspec.msgpack.decode(trace.blob(first.pool))[first.choice]
    y, m = write_tables(tmp_path, skip={cid})
    err = bad(study["traces"], "--outcomes", y, "--predictions", m)
    assert f"round 1: the selected candidate '{cid}' has no outcome" in err
    assert "add a row for it" in err


def test_bad_options_exit_2(study: dict[str, Path]) -> None:
    base = (study["traces"], "--outcomes", study["y"], "--predictions", study["m"])
    assert "--order must be one of" in bad(*base, "--order", "sideways")
    assert "--anchor must be one of" in bad(*base, "--anchor", "truth")
    assert invoke("estimate", "cess", *base, "--lam", "2").exit_code == 2
    assert "unknown stream 'docs'" in bad(*base, "--stream", "docs")
    assert "unknown stop stream 'halt'" in bad(*base, "--stop-stream", "halt")


def test_plot_without_theta_star_exits_2(study: dict[str, Path], tmp_path: Path) -> None:
    pool = make_pool(TASKS[0], seed=0)
    opened = set()
    for path in study["traces"].glob("*.zst"):
        trace = al.read(path)
        for s in trace.selections("doc"):
            opened.add(msgspec.msgpack.decode(trace.blob(s.pool))[s.choice])
    unopened = {c for c in pool.ids if c not in opened}
    assert unopened, "every candidate was opened; the test needs an unopened one"
    y, m = write_tables(tmp_path, skip=unopened)
    png = tmp_path / "x.png"
    err = bad(study["traces"], "--outcomes", y, "--predictions", m, "--plot", png)
    assert "needs θ*, i.e. outcomes for the whole pool" in err and not png.exists()
    shown = invoke("estimate", "cess", study["traces"], "--outcomes", y, "--predictions", m)
    assert shown.exit_code == 0 and "θ* unknown for 4 run(s)" in shown.stdout


def test_plot_without_matplotlib_names_the_pip_line(
    study: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = bad(study["traces"], "--outcomes", study["y"], "--predictions", study["m"],
              "--plot", tmp_path / "x.png")
    assert "pip install 'agentlog[plot]'" in err


def test_estimate_is_a_group_of_estimators() -> None:
    result = invoke("estimate", "--help")
    assert result.exit_code == 0 and "cess" in result.stdout
