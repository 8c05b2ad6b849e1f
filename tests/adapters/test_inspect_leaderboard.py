"""A leaderboard evaluated with Inspect AI and certified by agentlog, end to end: the
example's logs written by ``inspect_ai.eval`` itself (mockllm models), imported, then
``agentlog certify`` under the example plan. The models' accuracies are known by
construction, so the board's scores are checked exactly, and the pair whose gap is far
beyond its sampling error is certified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from agentlog.examples import inspect_leaderboard as example
from tests.cli._cli import invoke

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "examples" / "plans" / "inspect_arith.toml"


def _accuracy(model: str) -> float:
    """The share of the example's samples the model answers right (its construction)."""
    pairs = [(i, (i * 13) % 17) for i in range(example.N_SAMPLES)]
    right = sum(example._key(a, b) >= example.WRONG_BELOW[model] for a, b in pairs)
    return right / len(pairs)


@pytest.mark.slow
def test_a_leaderboard_evaluated_with_inspect_is_certified(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    done = subprocess.run(  # inspect_ai's eval in its own process, as a user runs it
        [sys.executable, "-m", "agentlog.examples.inspect_leaderboard", str(logs)], cwd=ROOT,
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "INSPECT_LOG_LEVEL": "error"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(logs.glob("*.eval"))) == len(example.WRONG_BELOW)
    imported = invoke("import", "inspect", logs, "--out", tmp_path / "traces")
    assert imported.exit_code == 0, imported.output
    result = invoke("certify", tmp_path / "traces", "--plan", PLAN, "--json")
    assert result.exit_code == 0, result.output
    board = json.loads(result.output)
    scores = {s["system"]: s for s in board["systems"]}
    for model in example.WRONG_BELOW:
        got = scores[f"arith/{model}"]
        assert got["n_tasks"] == example.N_SAMPLES
        assert got["scores"]["match"] == pytest.approx(_accuracy(model), abs=1e-12)
    pairs = {frozenset((p["a"], p["b"])): p for p in board["pairs"]}
    strong_weak = pairs[frozenset({"arith/mockllm/strong", "arith/mockllm/weak"})]
    assert strong_weak["decision"] == "certified"
    assert strong_weak["better"] == "arith/mockllm/strong"
    # Every model entered each sample with the same input and target: no pair is refused.
    assert all(p["decision"] != "refused" for p in pairs.values()) and len(pairs) == 3
