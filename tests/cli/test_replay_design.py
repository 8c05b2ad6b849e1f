"""`agentlog replay --design ... --seeds N --mode M --out DIR`: paired interventions."""

from __future__ import annotations

import json
from pathlib import Path

import agentlog as al
from agentlog.examples.deep_research import run_study, task_ids
from agentlog.replay import read_units
from tests.cli._cli import invoke

APP = "agentlog.examples.deep_research"
SCORE = "tests.replay.test_intervene:opened_mean"
DESIGN = ("--design", "selection=agent,uniform", "--design", "stopping=adaptive,fixed:4")


def test_the_design_replay_writes_the_arms_and_resumes(tmp_path: Path) -> None:
    run_study(tmp_path / "src", tasks=task_ids(3), rankings=("agent",), seeds=(0,),
              evaluate=False)
    args = ("replay", tmp_path / "src", "--window", "retrieval", *DESIGN, "--seeds", "2",
            "--mode", "rerun", "--app", APP, "--score", SCORE, "--out", tmp_path / "arms")
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["instances"], out["units"], out["done"], out["mode"]) == (3, 24, 24, "rerun")
    assert [a["name"] for a in out["arms"]] == [
        "selection=agent,stopping=adaptive", "selection=agent,stopping=fixed:4",
        "selection=uniform,stopping=adaptive", "selection=uniform,stopping=fixed:4"]
    units = read_units(tmp_path / "arms" / "units.zst")
    assert len(units) == 24 and {u.provenance["mode"] for u in units.values()} == {"rerun"}
    again = invoke(*args)
    assert again.exit_code == 0 and "0 done, 24 already sealed (skipped)" in again.output
    assert "agentlog estimate effects" in again.output
    fx = invoke("estimate", "effects", tmp_path / "arms", "--resamples", "200", "--json")
    assert fx.exit_code == 0, fx.output
    assert json.loads(fx.stdout)["n_blocks"] == 6


def test_bad_designs_exit_2_with_what_to_do(tmp_path: Path) -> None:
    run_study(tmp_path / "src", tasks=task_ids(1), rankings=("agent",), seeds=(0,),
              evaluate=False)
    base = ("replay", tmp_path / "src", "--window", "retrieval", "--app", APP)
    for extra, message in (
        (("--design", "selection=agent,greedy", "--mode", "rerun", "--out", tmp_path / "o"),
         "unknown selection level 'greedy'"),
        ((*DESIGN, "--mode", "rerun", "--out", tmp_path / "o.zst"),
         "with --design, --out names a folder"),
        ((*DESIGN, "--mode", "rerun", "--score", "nope", "--out", tmp_path / "o"),
         "--score 'nope': expected module:function"),
        ((*DESIGN, "--mode", "rerun", "--score", "tests.replay.test_intervene:missing",
          "--out", tmp_path / "o"), "has no 'missing'"),
    ):
        result = invoke(*base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output and "Traceback" not in result.output, result.output
    no_window = invoke("replay", tmp_path / "src", *DESIGN, "--out", tmp_path / "o")
    assert no_window.exit_code == 2 and "--design needs --window NAME" in no_window.output


def test_the_default_frozen_mode_serves_the_agents_own_arm_and_fails_closed_elsewhere(
    tmp_path: Path,
) -> None:
    run_study(tmp_path / "src", tasks=task_ids(1), rankings=("agent",), seeds=(0,),
              evaluate=False)
    result = invoke("replay", tmp_path / "src", "--window", "retrieval", "--app", APP,
                    "--design", "selection=agent,uniform", "--out", tmp_path / "o", "--json")
    assert result.exit_code == 1, result.output  # failed units: recorded, not a crash
    out = json.loads(result.stdout)
    assert (out["mode"], out["done"], out["failed"]) == ("frozen", 1, 1)
    units = read_units(tmp_path / "o" / "units.zst")
    (failed,) = [u for u in units.values() if u.status == "failed"]
    assert failed.provenance["arm"] == "selection=uniform,stopping=adaptive"


def test_a_design_replay_reads_the_model_cache_given_with_cache(tmp_path: Path) -> None:
    from agentlog.adapters import openai as adapter
    from agentlog.replay import ModelCache
    from tests.adapters._providers import FakeProvider, openai_client
    from tests.replay import test_intervene_modes as modes

    with al.record(tmp_path / "src.zst", seed=5, task="t0", mode="w"):
        modes.tuned([0.2, 0.9])  # the recording asks the model at one temperature
    with ModelCache(tmp_path / "cache.sqlite") as cache:  # the other one, cached elsewhere
        adapter.wrap(openai_client(FakeProvider()), cache=cache).chat.completions.create(
            **{**modes.ASK, "temperature": 0.9}, messages=[{"role": "user", "content": "q"}])
        adapter.wrap(openai_client(FakeProvider()), cache=cache).chat.completions.create(
            **{**modes.ASK, "temperature": 0.2}, messages=[{"role": "user", "content": "q"}])
    modes.SERVER.provider.requests.clear()
    modes.SERVER.down = True  # nothing may run live
    try:
        base = ("replay", tmp_path / "src.zst", "--window", "modes_tuned", "--app",
                modes.APP_HERE, "--design", "selection=agent,uniform", "--seeds", "4", "--json")
        control = invoke(*base, "--out", tmp_path / "plain")
        assert control.exit_code == 1, control.output  # some arm asks what was not recorded
        assert json.loads(control.stdout)["failed"] >= 1
        served = invoke(*base, "--out", tmp_path / "cached", "--cache",
                        tmp_path / "cache.sqlite")
        assert served.exit_code == 0, served.output
        assert json.loads(served.stdout)["failed"] == 0
        assert modes.SERVER.provider.count == 0
        missing = invoke(*base, "--out", tmp_path / "o", "--cache", tmp_path / "none.sqlite")
        assert missing.exit_code == 2 and "no such file" in missing.output
        frozen = invoke(*base, "--out", tmp_path / "o", "--frozen")
        assert frozen.exit_code == 2 and "--mode frozen" in frozen.output
    finally:
        modes.SERVER.down = False
