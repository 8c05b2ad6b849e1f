"""The demo's paired 2×2: policy effects beside CESS, from the arm traces it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog import DegenerateDataWarning
from agentlog.cli._demo import run_demo
from agentlog.cli._demo_paired import PAIRED_RESAMPLES
from agentlog.estimators import cess
from tests.cli._cli import invoke


def test_the_paired_section_reports_the_effects_of_its_arm_traces(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    summary = run_demo(out, tasks=6, seeds=1)
    c = summary["paired"]
    assert c["tasks"] == 6 and c["seeds"] == 2 and c["mode"] == "rerun"
    assert c["units"] == 6 * 4 * 2 and c["n_blocks"] == 12
    # six questions: the stopping effect is skewed across them, and the estimator says so
    with pytest.warns(DegenerateDataWarning, match="per-task effects are skewed"):
        fx = cess.effects_from_traces(out / "paired", outcome="opened_mean",
                                      n_resamples=PAIRED_RESAMPLES)
    assert c["effects"] == fx.to_dict()["effects"]
    # θ_ab of the table are the arms' Opened Means (questions weigh equally)
    means = fx.arm_means()
    for code, arm in c["arms"].items():
        assert arm["opened_mean"] == pytest.approx(means[code], abs=1e-12)
        assert arm["runs"] == 12
    # [SSC] Theorem 2 on the demo: the Opened Mean moves with the selection policy, CESS
    # hardly does (every arm is corrected toward the same θ*)
    assert c["effects"]["selection"]["low"] > 0
    assert abs(c["cess_contrasts"]["selection"]) < abs(c["effects"]["selection"]["estimate"]) / 4
    assert "Theorem 2" in c["note"]
    assert [w[:31] for w in c["warnings"]] == ["the per-task effects are skewed"]


def test_the_demo_prints_the_paired_tables(tmp_path: Path) -> None:
    result = invoke("demo", "--out", tmp_path / "demo", "--tasks", "2", "--seeds", "1")
    assert result.exit_code == 0, result.output
    for text in ("Paired 2×2 on 2 questions × 2 seeds", "agent × adaptive", "uniform × fixed:4",
                 "Policy effects on the Opened Mean", "CESS contrast", "Δsel", "Δint",
                 "Theorem 2", "agentlog estimate effects"):
        assert text in result.output, text
