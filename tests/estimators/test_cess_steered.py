"""``cess.from_traces`` on steered records: the weights of the draw that was actually made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import agentlog as al
from agentlog.estimators import cess
from agentlog.reentry import Steer, steering

IDS = ["a", "b", "c", "d", "e"]
Y = {"a": 0.9, "b": -0.4, "c": 0.1, "d": 0.5, "e": -0.8}
M = dict.fromkeys(IDS, 0.0)
AGENT = np.array([0.6, 0.2, 0.1, 0.05, 0.05])  # the agent's own (skewed) vector
AGENT_CONTINUE = 0.3


class UniformKeep(Steer):
    """Uniform selection and a continue probability of 0.8 (probabilities, not forcing)."""

    name = "uniform-keep"

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64]:
        return np.full(len(probs), 1.0 / len(probs))

    def proceed(self, stream: str, step: int, p: float) -> float:
        return 0.8


class ForceFirst(Steer):
    name = "force-first"

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> int:
        return 0


class ForceGo(Steer):
    name = "force-go"

    def proceed(self, stream: str, step: int, p: float) -> bool:
        return True


def agent(rounds: int = 3) -> None:
    for t in range(rounds):
        if t and not al.proceed(AGENT_CONTINUE, name="stop"):
            return
        al.select(AGENT, candidates=IDS, name="doc")


def record(path: Path, steer: Steer | None, seeds: range) -> Path:
    for seed in seeds:
        with al.record(path, seed=seed, task="t", mode="a"), steering(steer):
            agent()
    return path


def test_a_uniform_steer_is_weighted_by_the_uniform_vector_not_the_agents(
        tmp_path: Path) -> None:
    """Closed form: p_t = 1/N and s_t = 0.8^(t-1), so each weight 1/(N p_t s_t) is
    0.8^-(t-1) and the IPW term of a run is (1/K) Σ_t Y_t 0.8^-(t-1)."""
    path = record(tmp_path / "u.zst", UniformKeep(), range(40))
    data = cess.from_traces(path, outcomes=Y, predictions=M, budget=3)
    reached = ~np.isnan(data.p)
    assert np.all(data.p[reached] == 0.2)
    assert np.all(data.s[:, 0] == 1.0)
    np.testing.assert_allclose(data.s[:, 1][reached[:, 1]], 0.8)
    np.testing.assert_allclose(data.s[:, 2][reached[:, 2]], 0.64)
    trace = al.read(path)
    assert all(sel.steer == "uniform-keep" and np.array_equal(trace.policy_probs(sel), AGENT)
               for sel in trace.selections("doc"))
    result = data.estimate()
    y = np.where(reached, data.y, 0.0)
    w = np.where(reached, 1.0 / (5 * data.p * data.s), 0.0)
    np.testing.assert_allclose(result.ipw, (w * y).sum(axis=1) / 3)
    np.testing.assert_allclose(w[reached], (1 / 0.8) ** np.nonzero(reached)[1])


def test_the_steered_ipw_is_unbiased_for_the_pool_mean(tmp_path: Path) -> None:
    """Seeded: under the steered design the IPW term has mean θ* = mean(Y); the agent's
    own vector would give Σ_i p_agent(i) Y_i / (N · 1/N) ≠ θ*. Tolerance: 3 standard
    errors of the mean over the runs."""
    path = record(tmp_path / "u.zst", UniformKeep(), range(300))
    ipw = cess.from_traces(path, outcomes=Y, predictions=M, budget=3).estimate().ipw
    theta = float(np.mean(list(Y.values())))
    se = float(np.std(ipw, ddof=1) / np.sqrt(len(ipw)))
    assert abs(float(np.mean(ipw)) - theta) < 3 * se
    wrong = float(AGENT @ np.array([Y[i] for i in IDS])) * 5 * 0.2  # agent-weighted mean
    assert abs(wrong - theta) > 6 * se  # the test can tell the two weightings apart


def test_a_forced_choice_has_no_weight_and_is_refused(tmp_path: Path) -> None:
    path = record(tmp_path / "f.zst", ForceFirst(), range(2))
    with pytest.raises(ValueError, match=r"round 1: the choice \(stream 'doc' step 0\) was "
                                         r"forced by steer 'force-first': an index, not a "
                                         r"draw from a logged vector, so it has no "
                                         r"inverse-probability weight"):
        cess.from_traces(path, outcomes=Y, predictions=M, budget=3)


def test_a_forced_stop_decision_has_no_survival_weight_and_is_refused(tmp_path: Path) -> None:
    path = record(tmp_path / "g.zst", ForceGo(), range(2))
    with pytest.raises(ValueError, match=r"before round 2: the stop decision \(stream 'stop' "
                                         r"step 0\) was forced by steer 'force-go'.*p=1 or 0"):
        cess.from_traces(path, outcomes=Y, predictions=M, budget=3)
    # without a stop stream the decisions are not weighted, so nothing is refused
    data = cess.from_traces(path, outcomes=Y, predictions=M, budget=3, stop_stream=None)
    assert np.all(data.s[~np.isnan(data.s)] == 1.0)
