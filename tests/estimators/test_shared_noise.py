"""certify, policy effects and CESS warn when runs of different tasks drew the same noise.

Traces recorded with noise generator /2 (or /1) under one seed share their stop uniforms
and Gumbel draws across tasks; /3 (new runs) folds the task into the noise, so the same
recordings made today raise nothing (pytest turns any warning into an error).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.estimators import certify, cess

V2 = "fmix64-gumbel/2"
V3 = "fmix64-gumbel/3"  # what new runs record
SHARED = (r"3 tasks share seed 7 under noise generator 'fmix64-gumbel/2' \(q0, q1, q2\): "
          r"their random draws .* are identical, so the tasks are not the independent "
          r"samples the intervals assume\. Re-record with this agentlog, which folds the "
          r"task into the noise .* or give each task its own seed")
IDS = ["a", "b", "c", "d"]
Y = {"a": 0.9, "b": 0.4, "c": -0.3, "d": 0.1}
M = {"a": 0.6, "b": 0.2, "c": -0.1, "d": 0.0}
GENERATORS = [pytest.param(V2, id="v2"), pytest.param(V3, id="v3")]


def shared(generator: str) -> contextlib.AbstractContextManager[Any]:
    """``pytest.warns`` the shared-noise warning under /2; under /3 nothing to catch (any
    warning would fail the test)."""
    if generator == V2:
        return pytest.warns(al.SharedNoiseWarning, match=SHARED)
    return contextlib.nullcontext()


@pytest.mark.parametrize("generator", GENERATORS)
def test_cess_from_trace_warns_when_tasks_share_one_seed_under_generator_2(
        tmp_path: Path, generator: str) -> None:
    for t in range(3):
        for system in ("x", "y"):  # two systems on one task share its noise: that is pairing
            with al.record(tmp_path / f"q{t}-{system}.zst", system=system, seed=7,
                           task=f"q{t}", generator=generator):
                al.select([0.4, 0.3, 0.2, 0.1], candidates=IDS, name="doc")
                if al.proceed(0.7, name="stop"):
                    al.select([0.25] * 4, candidates=IDS, name="doc")
    with shared(generator):
        data = cess.from_traces(tmp_path, outcomes=Y, predictions=M, budget=2)
    assert len(data) == 6


@pytest.mark.parametrize("generator", GENERATORS)
def test_effects_from_traces_warns_when_tasks_share_one_seed_under_generator_2(
        tmp_path: Path, generator: str) -> None:
    path = tmp_path / "arms.zst"
    for t, base in enumerate((0.1, 0.3, 0.2)):
        for sel, a in (("agent", 0.2), ("uniform", 0.0)):
            for stop, b in (("adaptive", 0.1), ("fixed:2", 0.0)):
                meta = {"agentlog.replay": {"factors": {"selection": sel, "stopping": stop},
                                            "replicate": 0}}
                with al.record(path, mode="a", seed=7, task=f"q{t}", meta=meta,
                               generator=generator):
                    al.score("opened_mean", base + a + b)
    with shared(generator):
        fx = cess.effects_from_traces(path, outcome="opened_mean", n_resamples=200)
    assert round(fx.selection, 9) == 0.2


@pytest.mark.parametrize("generator", GENERATORS)
def test_certify_from_traces_warns_when_tasks_share_one_seed_under_generator_2(
        tmp_path: Path, generator: str) -> None:
    plan = certify.Plan.from_toml('estimand = "whole-agent contrast"\n'
                                  "[readouts.f1]\ntolerance = 0.05\n")
    for t in range(3):
        for system, value in (("a", 0.8), ("b", 0.5)):
            with al.record(tmp_path / f"{system}-q{t}.zst", system=system, seed=7,
                           task=f"q{t}", generator=generator):
                al.score("f1", value)
    with shared(generator):
        data = certify.from_traces(tmp_path, plan=plan)
    assert data.tasks == ("q0", "q1", "q2") and data.n_runs == 6


def test_tasks_with_seeds_of_their_own_share_nothing_under_generator_2(tmp_path: Path) -> None:
    plan = certify.Plan.from_toml('estimand = "whole-agent contrast"\n'
                                  "[readouts.f1]\ntolerance = 0.05\n")
    for t in range(3):
        for system in ("a", "b"):
            with al.record(tmp_path / f"{system}-q{t}.zst", system=system, seed=t,
                           task=f"q{t}", generator=V2):
                al.score("f1", 0.5)
    assert certify.from_traces(tmp_path, plan=plan).n_runs == 6  # no warning
