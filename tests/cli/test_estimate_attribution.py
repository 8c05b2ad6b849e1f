"""`agentlog replay --alter … --out DIR` and `agentlog estimate attribution DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlog.estimators import attribution
from agentlog.examples.deep_research import run_study, task_ids
from tests.cli._cli import invoke

APP = "agentlog.examples.deep_research"
SCORE = "agentlog.examples.deep_research:retrieval_outcome"
ALTER = ("--alter", "doc@0", "--alter", "doc@1=uniform", "--alter", "stop@0")


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("attribution-cli")
    run_study(d / "src", tasks=task_ids(4), rankings=("agent",), seeds=(0,), evaluate=False)
    result = invoke("replay", d / "src", "--window", "retrieval", *ALTER, "--shapley",
                    "exact", "--seeds", "2", "--mode", "branch", "--app", APP, "--score",
                    SCORE, "--out", d / "arms", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["instances"], out["units"], out["done"]) == (4, 4 * 8 * 2, 64)
    assert out["arms"][0]["factors"] == {"alter": ""}
    assert {a["factors"]["alter"] for a in out["arms"]} >= {
        "doc@0", "doc@1=uniform", "stop@0", "doc@0+doc@1=uniform+stop@0"}
    return d / "arms"


def test_the_command_prints_what_from_traces_returns(arms: Path) -> None:
    result = invoke("estimate", "attribution", arms, "--outcome", "opened_mean", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    res = attribution.from_traces(arms, outcome="opened_mean")
    assert out["players"] == json.loads(json.dumps(res.to_dict()["players"]))
    assert out["shapley_method"] == "exact" and out["n_blocks"] == 8
    assert set(out["players"]) == {"doc@0", "doc@1=uniform", "stop@0"}
    total = sum(p["shapley"]["estimate"] for p in out["players"].values())
    assert total == pytest.approx(out["total"]["estimate"], abs=1e-12)
    text = invoke("estimate", "attribution", arms, "--outcome", "opened_mean").output
    for needle in ("attribution of opened_mean", "doc@1=uniform", "Shapley", "total",
                   "SE (unpaired)"):
        assert needle in text, needle


def test_players_group_decisions_and_permutations_must_match_the_arms(arms: Path) -> None:
    result = invoke("estimate", "attribution", arms, "--outcome", "opened_mean",
                    "--player", "picks=doc@0,doc@1=uniform", "--player", "stop=stop@0",
                    "--json")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["players"]) == {"picks", "stop"}
    # Exact arms hold every coalition, so any permutations find theirs.
    ok = invoke("estimate", "attribution", arms, "--outcome", "opened_mean", "--shapley",
                "6", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["shapley_method"] == "permutations:6"


@pytest.mark.parametrize(("args", "message"), [
    (("--outcome", "nope"), "no score 'nope'"),
    (("--shapley", "3x"), "expected exact, auto, none or a number"),
    (("--player", "x"), "expected NAME=DECISION,DECISION"),
])
def test_bad_estimate_input_exits_2_with_what_to_do(arms: Path, args: tuple[str, ...],
                                                    message: str) -> None:
    result = invoke("estimate", "attribution", arms, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (("--alter", "doc"), "expected STREAM@K"),
    (("--alter", "doc@0", "--design", "selection=agent,uniform"), "two kinds of study"),
    (("--shapley", "exact"), "--shapley needs the decisions"),
    (("--alter", "doc@0", "--shapley", "lots"), "--shapley 'lots'"),
])
def test_bad_alter_replays_exit_2_before_anything_runs(tmp_path: Path,
                                                       args: tuple[str, ...],
                                                       message: str) -> None:
    result = invoke("replay", tmp_path, "--window", "retrieval", "--app", APP, *args,
                    "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
