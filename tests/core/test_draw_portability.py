"""A trace recorded on one CPU verifies and replays on another.

numpy's ``log`` dispatches by CPU (AVX-512, AVX2, baseline SSE), and the variants round the
last bits of a Gumbel draw differently. The child process records with every dispatch
target above numpy's baseline turned off (``NPY_DISABLE_CPU_FEATURES``): the draws it
stores are what an older or different CPU computes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy._core import _multiarray_umath as umath

import agentlog as al
from agentlog.reentry import (
    DRAW_TOLERANCE,
    choice_agrees,
    first_draw_disagreement,
    gumbel_draws,
    steering,
)
from agentlog.replay import reenter_arguments, resume_streams, window_function
from agentlog.replay.interventions import ForceRecorded
from agentlog.replay.lowlevel import stream_offsets

from . import _portable_agent as agent

ROOT = Path(__file__).resolve().parents[2]
# The dispatch targets this machine's numpy would use above its baseline.
TARGETS = [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]


@pytest.fixture(scope="module")
def baseline_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("portable") / "baseline.zst"
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(TARGETS),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    # Imported, not run as __main__: the window's function id names its module.
    subprocess.run([sys.executable, "-c", "import sys; from tests.core._portable_agent import "
                    "record; record(sys.argv[1])", str(path)],
                   cwd=ROOT, env=env, check=True, timeout=120)
    return path


def bitwise_differences(trace: al.Trace) -> int:
    return sum(int((trace.draws(s) != gumbel_draws(agent.POOL, agent.SEED, "doc", s.step)).sum())
               for s in trace.selections("doc"))


def test_a_trace_from_a_cpu_without_this_ones_simd_verifies_here(baseline_trace: Path) -> None:
    trace = al.read(baseline_trace)
    assert len(trace.selections("doc")) == agent.STEPS
    if umath.__cpu_features__.get("AVX512F"):
        # Measured on this machine's AVX-512 numpy: about 0.4 % of draws differ in their
        # last bits, so the trace really is one this CPU would not have written.
        assert bitwise_differences(trace) > 0
    report = al.verify(baseline_trace)
    assert report.ok, report.problems


def test_force_recorded_replays_it_here_without_a_divergence(baseline_trace: Path,
                                                             tmp_path: Path) -> None:
    source = al.read(baseline_trace)
    (view,) = source.windows("rank")
    args, kwargs = reenter_arguments(view)
    steer = ForceRecorded(view)
    out = tmp_path / "replayed.zst"
    with al.record(out, seed=agent.SEED, mode="w"), resume_streams(stream_offsets(view)), \
            steering(steer):
        picks = window_function(view)(*args, **kwargs)
    assert steer.unreplayed() == []
    assert picks == [s.choice for s in source.selections("doc")]
    assert al.verify(out).ok


def test_the_tolerance_is_a_few_bits_not_a_loophole() -> None:
    g = gumbel_draws(agent.POOL, 3, "doc", 0)
    assert first_draw_disagreement(g, g.copy()) is None
    # A few units in the last place, as another CPU's log gives, agree ...
    assert first_draw_disagreement(g, np.nextafter(np.nextafter(g, np.inf), np.inf)) is None
    # ... an edit far below anything a reader would notice does not, nor another step's draw.
    edited = g.copy()
    edited[7] += 1e-12 * (1 + abs(g[7]))
    assert first_draw_disagreement(g, edited) == 7
    assert first_draw_disagreement(g, gumbel_draws(agent.POOL, 3, "doc", 1)) == 0
    nan = g.copy()
    nan[2] = np.nan
    assert first_draw_disagreement(g, nan) == 2
    assert DRAW_TOLERANCE < 1e-13


def test_a_choice_agrees_only_within_the_rounding_of_a_tie() -> None:
    log_p = np.log(np.array([0.5, 0.25, 0.25]))
    draws = np.array([0.0, 0.6931471805599453, -1.0])  # candidates 0 and 1 tie at log 0.5
    assert choice_agrees(log_p, draws, 0) and choice_agrees(log_p, draws, 1)
    assert not choice_agrees(log_p, draws, 2)
    assert not choice_agrees(log_p, draws + np.array([0.0, 1e-9, 0.0]), 0)
    assert not choice_agrees(np.array([np.log(0.5), np.log(0.5), -np.inf]), np.zeros(3), 2)
