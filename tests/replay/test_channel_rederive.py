"""The validity card's replay gate is probed only when a replay ran and its scores re-derive."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import agentlog as al
from agentlog.estimators import reliability
from agentlog.replay import (
    ExecutionOptions,
    State,
    plan_channel_units,
    rederive_channel_replay,
    replay_channels,
    run_units,
)
from tests.replay.test_channel_replay import _record

APP = __name__
_counter = itertools.count()


@al.scorer("rederive-drifting")
def drifting(state: State, view: str | None, layout: int) -> float:
    """Not a function of the state: a new value every call (a live, unfrozen scorer)."""
    return float(next(_counter))


@al.channel("rederive-drifting", scorer="rederive-drifting")
def drifting_view(state: State) -> None:
    return None


def _replay(src: Path, out: Path, channels: list[str]) -> None:
    replay_channels(src, channels, window="chrep-step", out=out, app=APP,
                    execution=ExecutionOptions(progress=False))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    import tests.replay.test_channel_replay  # noqa: F401 - registers the chrep-* channels

    return _record(tmp_path / "src.zst", [1.0, 2.0, 3.0])


def test_a_complete_replay_whose_scores_re_derive_passes_the_gate(src: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(src, out, ["chrep-direct", "chrep-quote"])
    report = rederive_channel_replay(src, out, app=APP)
    assert (report.window, report.channels) == ("chrep-step", ("chrep-direct", "chrep-quote"))
    assert (report.planned, report.sealed, report.rederived, report.mismatched,
            report.failed, report.missing) == (15, 15, 15, 0, 0, 0)
    cell = reliability.replay_cell(report)
    assert cell.status == "pass"
    assert "all 15 units ran, and their scores, derived again from the sealed states, " \
           "matched" in cell.detail
    card = reliability.validity_card(traces=[src], replay=cell)
    assert card.cell("replay: runs re-execute").status == "pass"
    # Verification alone never probes the gate.
    assert reliability.validity_card(traces=[src]).cell(
        "replay: runs re-execute").status == "not probed"


def test_no_replay_is_not_probed(src: Path, tmp_path: Path) -> None:
    report = rederive_channel_replay(src, tmp_path / "nothing.zst", app=APP)
    assert report.planned == 0
    cell = reliability.replay_cell(report)
    assert cell.status == "not probed" and "holds no channel-replay unit" in cell.detail


def test_a_replay_of_other_traces_is_not_probed(src: Path, tmp_path: Path) -> None:
    other = _record(tmp_path / "other.zst", [7.0])
    out = tmp_path / "out.zst"
    _replay(other, out, ["chrep-direct"])
    cell = reliability.replay_cell(rederive_channel_replay(src, out, app=APP))
    assert cell.status == "not probed"
    assert "no unit of these traces is sealed there (6 needed): run the replay first" \
        in cell.detail


def test_an_unfinished_replay_is_not_probed(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    units = plan_channel_units(src, ["chrep-direct"], window="chrep-step")
    run_units(units[:4], "agentlog.replay:score_channel_unit", out=out,
              app=APP, execution=ExecutionOptions(progress=False))
    report = rederive_channel_replay(src, out, app=APP)
    assert (report.planned, report.sealed, report.missing) == (6, 4, 2)
    cell = reliability.replay_cell(report)
    assert cell.status == "not probed" and "2 of 6 units not replayed yet" in cell.detail


def test_failed_units_fail_the_gate(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(src, out, ["chrep-fragile"])
    report = rederive_channel_replay(src, out, app=APP)
    assert (report.failed, report.sealed) == (1, 2)
    cell = reliability.replay_cell(report)
    assert cell.status == "fail" and "1 of 3 units failed" in cell.detail
    assert "RuntimeError: this scorer cannot read x=3" in cell.detail


def test_scores_that_do_not_re_derive_fail_the_gate(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(src, out, ["rederive-drifting"])
    report = rederive_channel_replay(src, out, app=APP)
    assert (report.sealed, report.mismatched) == (3, 3)
    cell = reliability.replay_cell(report)
    assert cell.status == "fail"
    assert "3 of 3 re-derived units gave other scores" in cell.detail
    assert "stored [" in cell.detail and "derived again [" in cell.detail
    card = reliability.validity_card(traces=[src], replay=cell)
    assert card.cell("replay: runs re-execute").status == "fail"


def test_a_tolerance_admits_small_differences(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(src, out, ["rederive-drifting"])
    report = rederive_channel_replay(src, out, app=APP, tolerance=1e9)
    assert report.mismatched == 0 and reliability.replay_cell(report).status == "pass"


def test_replay_cell_reads_a_plain_report() -> None:
    cell = reliability.replay_cell({"out": "o.zst", "window": "w", "channels": ["a"],
                                    "planned": 2, "sealed": 2, "rederived": 2})
    assert (cell.item, cell.status) == ("replay: runs re-execute", "pass")
