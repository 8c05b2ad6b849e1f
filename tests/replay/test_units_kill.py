"""Kill safety: Ctrl-C leaves a valid trace, SIGKILL leaves one whose sealed units a re-run
skips, and after either a re-run yields exactly the scores of an uninterrupted run."""

from __future__ import annotations

import json
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
from agentlog.replay import ExecutionOptions, read_units, run_units
from tests.replay._replay_child import units

ROOT = Path(__file__).resolve().parents[2]
N = 60


def _child(out: Path, sleep: float, concurrency: int = 4) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.replay._replay_child", str(out), str(N), str(sleep),
         str(concurrency)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _wait_for_units(out: Path, child: subprocess.Popen[str], at_least: int) -> None:
    """Until ``at_least`` units are sealed in ``out`` (bounded: 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if out.exists():
            try:
                if len(read_units(out)) >= at_least:
                    return
            except al.TraceFormatError:
                pass  # a frame being written: look again
        time.sleep(0.02)
    raise AssertionError(f"the child sealed fewer than {at_least} units (rc {child.poll()})")


def _scores(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {k: [(s.name, s.value, s.channel, s.layout, s.wave, s.transition, s.state_hash)
                for s in u.scores] for k, u in read_units(out).items() if u.status == "ok"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Any, ...]]]:
    out = tmp_path_factory.mktemp("ref") / "ref.zst"
    run_units(units(N, 0.0), "tests.replay._unit_jobs:slow_score", out=out,
              execution=ExecutionOptions(progress=False))
    return _scores(out)


def _finish(out: Path) -> dict[str, Any]:
    child = _child(out, 0.0)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    return dict(json.loads(stdout.strip().splitlines()[-1]))


def test_ctrl_c_leaves_a_valid_trace_and_a_rerun_completes_it_exactly(
        tmp_path: Path, reference: dict[str, list[tuple[Any, ...]]]) -> None:
    out = tmp_path / "out.zst"
    child = _child(out, 0.02)
    _wait_for_units(out, child, 5)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert json.loads(stdout.strip().splitlines()[-1]) == {"interrupted": True}
    report = al.verify(out)
    assert report.ok, report.problems
    sealed = len(read_units(out))
    assert 5 <= sealed < N
    summary = _finish(out)
    assert (summary["skipped"], summary["done"], summary["failed"]) == (sealed, N - sealed, 0)
    assert _scores(out) == reference
    assert al.verify(out).ok


@pytest.mark.slow  # a soak: processes killed at many moments
@pytest.mark.parametrize("trial", range(3))
def test_sigkill_at_a_random_moment_then_a_rerun_gives_exactly_the_uninterrupted_scores(
        tmp_path: Path, reference: dict[str, list[tuple[Any, ...]]], trial: int) -> None:
    out = tmp_path / "out.zst"
    rng = random.Random(1000 + trial)
    child = _child(out, 0.01)
    _wait_for_units(out, child, 1)
    time.sleep(rng.uniform(0.0, 0.3))  # where the kill lands varies; the claim holds anywhere
    child.kill()
    child.communicate(timeout=30)
    summary = _finish(out)
    assert summary["done"] + summary["skipped"] == N and summary["failed"] == 0
    assert _scores(out) == reference
    again = _finish(out)
    assert (again["done"], again["skipped"]) == (0, N)
