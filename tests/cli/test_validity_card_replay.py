"""`agentlog validity-card --replay OUT.zst --app MODULE`: the replay gate from the command line.

The gate is probed only when the replay ran and its scores re-derive from the sealed states.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentlog.replay import ExecutionOptions, plan_channel_units, replay_channels, run_units
from tests.cli._cli import invoke
from tests.cli.test_replay_cmd import (  # noqa: F401 - autouse: no app from env/pyproject
    _no_app_from_the_environment,
)
from tests.replay.test_channel_replay import _record

APP = "tests.replay.test_channel_rederive"  # registers chrep-* and rederive-drifting
GATE = "replay: runs re-execute"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    import tests.replay.test_channel_rederive  # noqa: F401 - registers the channels

    return _record(tmp_path / "src.zst", [1.0, 2.0, 3.0])


def _replay(src: Path, out: Path, channels: list[str]) -> Path:
    replay_channels(src, channels, window="chrep-step", out=out, app=APP,
                    execution=ExecutionOptions(progress=False))
    return out


def _card(*args: str | Path, code: int) -> dict[str, Any]:
    result = invoke("validity-card", *args, "--json")
    assert result.exit_code == code, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _gate(out: dict[str, Any]) -> dict[str, Any]:
    cell: dict[str, Any] = next(c for c in out["cells"] if c["item"] == GATE)
    return cell


def test_a_replay_whose_scores_re_derive_probes_and_passes_the_gate(src: Path,
                                                                   tmp_path: Path) -> None:
    out = _replay(src, tmp_path / "out.zst", ["chrep-direct", "chrep-quote"])
    card = _card(src, "--replay", out, "--app", APP, code=0)
    gate = _gate(card)
    assert gate["status"] == "pass"
    assert "all 15 units ran, and their scores, derived again from the sealed states, " \
           "matched (15 units)" in gate["detail"]
    assert card["replay"]["planned"] == card["replay"]["rederived"] == 15
    assert card["settings"]["replay"] == str(out) and card["settings"]["app"] == APP
    # Without --replay the same traces leave the gate not probed.
    assert _gate(_card(src, code=0))["status"] == "not probed"
    shown = invoke("validity-card", src, "--replay", out, "--app", APP)
    assert shown.exit_code == 0 and "The replay gate is not probed" not in shown.stdout


def test_scores_that_do_not_re_derive_fail_the_gate_and_exit_1(src: Path,
                                                               tmp_path: Path) -> None:
    out = _replay(src, tmp_path / "out.zst", ["rederive-drifting"])
    card = _card(src, "--replay", out, "--app", APP, code=1)
    assert _gate(card)["status"] == "fail" and GATE in card["failed_cells"]
    assert "3 of 3 re-derived units gave other scores" in _gate(card)["detail"]


def test_a_failed_unit_fails_the_gate(src: Path, tmp_path: Path) -> None:
    out = _replay(src, tmp_path / "out.zst", ["chrep-fragile"])
    gate = _gate(_card(src, "--replay", out, "--app", APP, code=1))
    assert gate["status"] == "fail" and "1 of 3 units failed" in gate["detail"]


def test_an_unfinished_replay_is_not_probed_and_says_so(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    units = plan_channel_units(src, ["chrep-direct"], window="chrep-step")
    run_units(list(units)[:4], "agentlog.replay:score_channel_unit", out=out,
              app=APP, execution=ExecutionOptions(progress=False))
    gate = _gate(_card(src, "--replay", out, "--app", APP, code=0))
    assert gate["status"] == "not probed" and "2 of 6 units not replayed yet" in gate["detail"]
    shown = invoke("validity-card", src, "--replay", out, "--app", APP)
    assert "does not cover these traces yet" in shown.stdout


def test_bad_replay_options_exit_2_saying_what_to_do(src: Path, tmp_path: Path) -> None:
    def bad(*args: str | Path) -> str:
        result = invoke("validity-card", src, *args)
        assert result.exit_code == 2, result.output
        return " ".join(result.stderr.split())

    assert "--replay nothing.zst: no such file; pass the --out trace of `agentlog replay" \
        in bad("--replay", "nothing.zst", "--app", APP)
    assert "--app, --window only apply with --replay OUT.zst" in bad("--app", APP,
                                                                      "--window", "w")
    out = _replay(src, tmp_path / "out.zst", ["chrep-direct"])
    assert "--app" in bad("--replay", out)  # no app named anywhere: the flag to pass
    assert "no_such_module_xyz" in bad("--replay", out, "--app", "no_such_module_xyz")
    assert "--cache c.sqlite: no such file" in bad("--replay", out, "--app", APP, "--cache",
                                                   "c.sqlite")
