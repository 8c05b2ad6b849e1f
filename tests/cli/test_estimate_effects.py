"""`agentlog estimate effects`: the paired 2×2's policy effects from arm traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.estimators import cess
from tests.cli._cli import invoke
from tests.estimators.test_effects_trace import write_arms


def effects_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("estimate", "effects", *args, "--json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_the_command_prints_what_effects_from_traces_returns(tmp_path: Path) -> None:
    write_arms(tmp_path / "arms.zst", tasks=6, replicates=2)
    out = effects_json(tmp_path, "--resamples", "300", "--seed", "2")
    # one task of six carries the whole stopping effect: the skewness warning says so
    with pytest.warns(al.DegenerateDataWarning, match="per-task effects are skewed"):
        res = cess.effects_from_traces(tmp_path, outcome="opened_mean", n_resamples=300,
                                       seed=2)
    assert out["effects"] == json.loads(json.dumps(res.to_dict()["effects"]))
    assert out["n_blocks"] == 12 and out["n_clusters"] == 6
    assert out["settings"]["outcome"] == "opened_mean"
    assert [w[:31] for w in out["warnings"]] == ["the per-task effects are skewed"]
    text = invoke("estimate", "effects", tmp_path, "--resamples", "300").output
    for needle in ("policy effects on opened_mean", "selection agent vs uniform",
                   "stopping adaptive vs fixed:2", "Δsel", "Δstop", "Δint", "ICC(1,k)",
                   "Theorem 2"):
        assert needle in text, needle


def test_bad_input_exits_2_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    with al.record(tmp_path / "src.zst", seed=1, task="q0"):
        al.score("opened_mean", 0.2)
    result = invoke("estimate", "effects", tmp_path)
    assert result.exit_code == 2
    assert "no arm runs in" in result.output and "Traceback" not in result.output
    result = invoke("estimate", "effects", tmp_path / "missing")
    assert result.exit_code == 2 and "Traceback" not in result.output
    result = invoke("estimate", "effects", tmp_path, "--levels", "selection=uniform")
    assert result.exit_code == 2 and "expected FACTOR=LEVEL0,LEVEL1" in result.output
    (tmp_path / "junk.zst").write_bytes(b"not a trace")
    result = invoke("estimate", "effects", tmp_path / "junk.zst")
    assert result.exit_code == 2 and "not a readable agentlog trace" in result.output


@pytest.mark.parametrize("flag", ["--drop-incomplete"])
def test_an_incomplete_block_is_an_error_unless_dropped(tmp_path: Path, flag: str) -> None:
    write_arms(tmp_path / "arms.zst", tasks=3, replicates=1)
    meta = {"agentlog.replay": {"factors": {"selection": "agent", "stopping": "adaptive"},
                                "replicate": 0, "source_run": "src-q9", "window": 0}}
    with al.record(tmp_path / "arms.zst", mode="a", system="sim", seed=1, task="q9",
                   meta=meta):
        al.score("opened_mean", 0.3)
    result = invoke("estimate", "effects", tmp_path)
    assert result.exit_code == 2 and "lacks arm(s)" in result.output
    out = effects_json(tmp_path, flag, "--resamples", "100")
    assert out["n_blocks"] == 3 and "left out" in out["warnings"][0]
