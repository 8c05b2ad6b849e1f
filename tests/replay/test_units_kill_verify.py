"""After SIGKILL or SIGTERM of a replay, the resume leaves an output that verifies.

A killed replay used to leave its output failing ``agentlog verify`` for good: the last
run of each batch stayed open until the next batch (so any kill left a run without
``RunEnd``), a kill could tear the last frame, and the resume appended after both. Now
the runs are written one after another in frames of their own, and the resume sets
aside what a crash cut short before it appends (``set_aside_cut_runs``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import RunEnd, iter_runs
from agentlog.replay import ExecutionOptions, UnitScore, read_units, run_units
from tests.replay._replay_child import units
from tests.replay.test_units_kill import N, _child, _scores, _wait_for_units

JOB = "tests.replay._unit_jobs:slow_score"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Any, ...]]]:
    out = tmp_path_factory.mktemp("ref") / "ref.zst"
    run_units(units(N, 0.0), JOB, out=out, execution=ExecutionOptions(progress=False))
    return _scores(out)


@pytest.mark.slow  # a soak: processes killed at many moments
@pytest.mark.parametrize(("sig", "trial"), [(s, t) for s in ("SIGKILL", "SIGTERM")
                                             for t in range(3)])
def test_a_replay_killed_at_a_random_moment_resumes_into_an_output_that_verifies(
        tmp_path: Path, reference: dict[str, list[tuple[Any, ...]]], sig: str,
        trial: int) -> None:
    out = tmp_path / "out.zst"
    rng = random.Random(f"{sig}/{trial}")
    child = _child(out, 0.04, concurrency=4)  # 60 units of 40 ms: about 0.6 s of work
    _wait_for_units(out, child, 1)
    time.sleep(rng.uniform(0.0, 0.3))  # where the signal lands varies
    child.send_signal(getattr(signal, sig))
    child.communicate(timeout=60)
    assert child.returncode == -getattr(signal, sig)  # killed mid-way, not after the end
    assert len(read_units(out)) < N
    summary = run_units(units(N, 0.0), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert summary.failed == 0 and summary.done + summary.skipped == N
    report = al.verify(out)
    assert report.ok, report.problems
    assert _scores(out) == reference
    assert all(item.run.end is not None for item in iter_runs(out))


def _cut_unit_run(out: Path, key: str) -> None:
    """A child that writes one unit's run and dies before its RunEnd, then a torn frame."""
    code = (
        "import os, agentlog as al\n"
        f"rec = al.record({str(out)!r}, mode='a', system='agentlog.replay', meta={{"
        f"'agentlog.replay': {{'unit': {key!r}, 'status': 'ok', 'attempts': 1, "
        f"'job': {JOB!r}}}}})\n"
        "rec.__enter__()\n"
        "al.score('sq', 1.0)\n"
        "al.flush()\n"
        "os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    frames = al.iter_frames(out)
    last = [f.offset for f in frames][-1]
    data = out.read_bytes()
    with open(out, "ab") as f:  # half of a frame: what a kill inside a write leaves
        f.write(data[last:last + (frames.end_offset - last) // 2])


def square(unit: Any, ctx: Any) -> list[UnitScore]:
    return [UnitScore("sq", float(unit.payload["x"]) ** 2)]


def test_the_resume_sets_aside_a_cut_run_and_a_torn_frame_keeping_every_sealed_byte(
        tmp_path: Path) -> None:
    from agentlog.replay import Unit

    out = tmp_path / "out.zst"
    work = [Unit(f"u{i}", {"x": i}) for i in range(4)]
    run_units(work[:2], square, out=out, app=None, execution=ExecutionOptions(progress=False))
    al.flush()
    sealed = out.read_bytes()
    _cut_unit_run(out, "u2")
    assert not al.verify(out).ok  # a run without RunEnd, a torn tail
    summary = run_units(work, square, out=out, app=None, execution=ExecutionOptions(progress=False))
    assert (summary.skipped, summary.done) == (2, 2)
    assert out.read_bytes().startswith(sealed)  # the sealed runs' bytes, untouched
    report = al.verify(out)
    assert report.ok, report.problems
    got = read_units(out)
    assert sorted(got) == ["u0", "u1", "u2", "u3"]
    assert [u.scores[0].value for _, u in sorted(got.items())] == [0.0, 1.0, 4.0, 9.0]
    ends = [r for r in al.read(out).records if type(r) is RunEnd]
    assert len(ends) == 4


def test_a_cut_run_sharing_frames_with_a_sealed_one_is_left_in_place_with_a_warning(
        tmp_path: Path) -> None:
    """Two runs open at once (how batches were written before): no byte a sealed run's
    digest covers is changed, so the cut one stays and verify keeps reporting it."""
    out = tmp_path / "out.zst"
    meta = ("{'agentlog.replay': {'unit': %r, 'status': 'ok', 'attempts': 1, 'job': "
            + repr(JOB) + "}}")
    code = (
        "import os, contextvars, agentlog as al\n"
        f"a = al.record({str(out)!r}, system='agentlog.replay', meta={meta % 'u0'})\n"
        f"b = al.record({str(out)!r}, system='agentlog.replay', meta={meta % 'u1'})\n"
        "ca, cb = contextvars.copy_context(), contextvars.copy_context()\n"
        "ca.run(a.__enter__); cb.run(b.__enter__)\n"
        "ca.run(al.score, 'sq', 0.0); cb.run(al.score, 'sq', 1.0)\n"
        "ca.run(a.__exit__, None, None, None)\n"
        "al.settle(" + repr(str(out)) + ")\n"
        "os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    before = out.read_bytes()
    from agentlog.replay._unit_output import set_aside_cut_runs

    with pytest.warns(al.InstrumentationWarning, match=r"share frames with other runs"):
        assert set_aside_cut_runs(out) == 0
    assert out.read_bytes() == before
    assert sorted(read_units(out)) == ["u0"]
