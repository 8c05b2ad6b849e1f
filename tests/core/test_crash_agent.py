"""An agent killed with SIGKILL while recording leaves a trace that reads and verifies.

The reader recovers every window flushed before the kill, and ``verify`` reports the
unfinished run (and a torn tail when the kill landed mid-frame) — never a crash, and never
a problem with a record that was written whole.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import Selection, WindowExit

CHILD = Path(__file__).with_name("_crash_agent.py")
ROOT = Path(__file__).resolve().parents[2]
N_TRIALS = 50
# What an interrupted, otherwise sound trace may be reported for.
INTERRUPTION = {"run-not-ended", "window-not-closed", "truncated"}


def kill_trial(tmp: Path, seed: int) -> tuple[int, Path]:
    """Start an agent, kill it at a seeded random moment; (windows flushed, trace path)."""
    out = tmp / f"agent-{seed}.zst"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(CHILD), str(out), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.strip().isdigit(), proc.stderr.read() if proc.stderr else first
    time.sleep(random.Random(seed).random() * 0.3)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    printed = [int(x) for x in (first + rest).split() if x.isdigit()]
    return printed[-1], out


@pytest.mark.slow  # a soak: processes killed at many moments
def test_sigkill_at_random_moments_keeps_every_flushed_window_and_verify_reports_it(
    tmp_path: Path,
) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda s: kill_trial(tmp_path, s), range(N_TRIALS)))
    truncated = 0
    for flushed, path in results:
        trace = al.read(path)
        exits = [r for r in trace.records if isinstance(r, WindowExit)]
        assert len(exits) >= flushed, f"{path.name}: flushed {flushed}, recovered {len(exits)}"
        assert sum(isinstance(r, Selection) for r in trace.records) >= flushed
        report = al.verify(path)
        kinds = {p.kind for p in report.problems}
        assert "run-not-ended" in kinds, path.name
        assert kinds <= INTERRUPTION, f"{path.name}: {report.problems}"
        assert ("truncated" in kinds) == trace.truncated
        truncated += trace.truncated
        cli = subprocess.run([sys.executable, "-m", "agentlog.cli", "verify", str(path)],
                             capture_output=True, text=True) if flushed % 10 == 0 else None
        if cli is not None:
            assert cli.returncode == 1, cli.stderr
    # The trials stopped the agent at many different points.
    assert len({flushed for flushed, _ in results}) > N_TRIALS // 2
