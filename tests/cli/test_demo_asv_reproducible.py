"""Re-recording the demo gives the same ASV intervals: blocks are keyed by what was recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli._cli import invoke


def demo(out: Path, *extra: str) -> tuple[dict[str, Any], list[str]]:
    """The demo's JSON summary and the ASV lines of its printed report."""
    as_json = invoke("demo", "--out", out / "json", "--tasks", "3", "--seeds", "2", "--json",
                     *extra)
    assert as_json.exit_code == 0, as_json.output
    printed = invoke("demo", "--out", out / "text", "--tasks", "3", "--seeds", "2", *extra)
    assert printed.exit_code == 0, printed.output
    lines = printed.stdout.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("ASV (Agent Step Value) of the"))
    return json.loads(as_json.stdout), lines[start:start + 4]


@pytest.mark.slow  # four demo runs
def test_two_demo_recordings_print_identical_asv_intervals(tmp_path: Path) -> None:
    """Two recordings differ in their random run ids (the old block key) and clocks; the
    ASV statistics, intervals and inputs hash must not."""
    a, a_lines = demo(tmp_path / "A")
    b, b_lines = demo(tmp_path / "B")
    run_ids = {(f["path"], f.get("run_id")) for f in a["files"]}
    assert len(run_ids) == len(a["files"])
    assert a["asv"]["statistics"] == b["asv"]["statistics"]
    assert a["asv"]["n_trajectories"] == b["asv"]["n_trajectories"] == 12
    assert any("mean Ω" in line for line in a_lines)
    assert a_lines == b_lines
