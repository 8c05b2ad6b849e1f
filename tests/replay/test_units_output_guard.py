"""A replay writes its units only into an output it wrote: never into a recorded trace.

``agentlog replay … --out runs/greedy_q1.zst`` appended replay units to the agent's own
trace; ``certify`` then failed on a run "with no task" and ``estimate reliability``
advised ``--missing-as 0``. The engine now refuses such an output before it runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al
from agentlog.replay import ExecutionOptions, Unit, read_units, run_units

JOB = "tests.replay._unit_jobs:score_states"
OTHER = "tests.replay._unit_jobs:ascore_states"


def _units(n: int = 3) -> list[Unit]:
    return [Unit(f"u{i}", {"x": i}) for i in range(n)]


@al.window("answer")
def answer(q: str) -> str:
    return q.upper()


def test_a_recorded_trace_as_the_output_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "greedy_q1.zst"
    with al.record(out, system="greedy", seed=1, task="q1", mode="w"):
        answer("q")
    al.flush()
    before = out.read_bytes()
    with pytest.raises(ValueError, match=r"already holds run \w+ of system 'greedy', task "
                                         r"'q1', which is not a replay unit.*another output"):
        run_units(_units(), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert out.read_bytes() == before and al.verify(out).ok


def test_units_of_another_replay_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "units.zst"
    assert run_units(_units(), JOB, out=out, execution=ExecutionOptions(progress=False)).done == 3
    with pytest.raises(ValueError, match=r"units of another kind of replay .*score_states"):
        run_units(_units(), OTHER, out=out, execution=ExecutionOptions(progress=False))
    # the same replay again resumes as before: everything is sealed
    again = run_units(_units(), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (again.done, again.skipped) == (0, 3) and len(read_units(out)) == 3


def test_the_cli_refuses_a_recorded_trace_as_the_output(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentlog.cli import app

    src = tmp_path / "runs.zst"
    with al.record(src, system="s", seed=1, task="t", mode="w"):
        answer("q")
    out = tmp_path / "greedy_q1.zst"
    with al.record(out, system="greedy", seed=1, task="q1", mode="w"):
        answer("q")
    al.flush()
    before = out.read_bytes()
    result = CliRunner().invoke(app, [
        "replay", str(src), "--channel", "quote", "--window", "answer", "--app",
        "agentlog.examples.deep_research", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "not a replay unit" in result.output and "Traceback" not in result.output
    assert out.read_bytes() == before
