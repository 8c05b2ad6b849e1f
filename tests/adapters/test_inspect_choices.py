"""Multiple-choice answers of Inspect logs as observed selections, and their paired
counterfactuals (``import inspect --choices``, ``agentlog counterfactual``).

inspect_ai writes a real log: a mockllm model answers each of 400 four-option questions by
sampling a label from a known vector (numpy, seeded), with that vector as its top logprobs.
Imported with ``choices=``, every answer is a posterior selection. Under an intervention
``q`` the counterfactual answers, mixed over the observed ones, follow ``q`` exactly
(posterior noise mixed over the observed choice is the prior's), so their frequencies and
the counterfactual accuracy have closed forms, checked within 3 standard errors.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("inspect_ai")

import agentlog as al
from agentlog.adapters.inspect_ai import import_logs
from agentlog.replay import counterfactual_choices
from agentlog.replay.interventions import Temperature, Uniform
from tests.cli._cli import invoke

ROOT = Path(__file__).resolve().parents[2]
LABELS = ("A", "B", "C", "D")
P = np.array([0.55, 0.25, 0.15, 0.05])
N = 400


def write_log(folder: str) -> None:
    """The eval, in a child interpreter (inspect_ai's process-wide state stays there)."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        Logprob,
        Logprobs,
        ModelOutput,
        ModelUsage,
        TopLogprob,
        get_model,
    )
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    rng = np.random.default_rng(11)
    answers = iter(rng.choice(4, size=N, p=P).tolist())

    def reply(input: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
        label = LABELS[next(answers)]
        out = ModelOutput.from_content("mockllm", label)
        out.choices[0].logprobs = Logprobs(content=[Logprob(
            token=label, logprob=float(np.log(P[LABELS.index(label)])),
            top_logprobs=[TopLogprob(token=f" {lab}", logprob=float(np.log(p)))
                          for lab, p in zip(LABELS, P, strict=True)])])
        out.usage = ModelUsage(input_tokens=3, output_tokens=1, total_tokens=4)
        return out

    task = Task(dataset=[Sample(input=f"Question {i}?", target="A", id=i) for i in range(N)],
                solver=[generate()], scorer=match())
    inspect_eval(task, model=get_model("mockllm/model", custom_outputs=reply),
                 display="none", log_dir=folder, max_samples=1)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("inspect-choices")
    code = ("import sys; from tests.adapters.test_inspect_choices import write_log; "
            "write_log(sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", code, str(d / "logs")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "INSPECT_LOG_LEVEL": "error"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = import_logs([d / "logs"], d / "traces", choices=list(LABELS))
    assert result.choices == N and result.runs == N
    assert not any("without a choice" in n for n in result.notes), result.notes
    return d / "traces"


def test_each_answer_is_a_posterior_selection_at_the_sampled_label(traces: Path) -> None:
    (path,) = traces.glob("*.zst")
    trace = al.read(path)
    sels = trace.selections("answer")
    assert len(sels) == N
    assert al.verify(path).ok  # the posterior draws regenerate
    for sel in sels[:50]:
        assert sel.drawn == "posterior" and sel.observed == sel.choice
        np.testing.assert_allclose(trace.probs(sel), P, rtol=1e-12)
        assert trace.candidates(sel) == list(LABELS)
        assert sel.owner == "model"
    (view,) = [v for v in trace.windows() if v.run == sels[0].run]
    assert sels[0].window == view.window  # inside the sample's window
    observed = np.bincount([s.choice for s in sels], minlength=4) / N
    assert np.all(np.abs(observed - P) <= 3 * np.sqrt(P * (1 - P) / N))


@pytest.mark.parametrize("steer", [Uniform(), Temperature(0.5)], ids=["uniform", "t=0.5"])
def test_counterfactual_answers_follow_the_steered_vector(traces: Path, steer: Any) -> None:
    rows = list(counterfactual_choices(traces, stream="answer", steer=steer))
    assert len(rows) == N
    q = np.asarray(steer.vector("answer", 0, P))
    freq = np.bincount([LABELS.index(r.counterfactual) for r in rows], minlength=4) / N
    assert np.all(np.abs(freq - q) <= 3 * np.sqrt(q * (1 - q) / N) + 1e-12), (freq, q)
    # Paired, not fresh: under a sharper vector (q ∝ p²) the most likely label, once
    # chosen, stays chosen (log p_A + g_A ≥ log p_j + g_j implies the same with 2 log p).
    if isinstance(steer, Temperature):
        assert all(r.counterfactual == "A" for r in rows if r.factual == "A")


def test_the_command_gives_the_paired_accuracy_effect(traces: Path) -> None:
    result = invoke("counterfactual", traces, "--select", "answer", "--steer",
                    "temperature:0.5", "--target", "target", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["selections"] == N and out["drawn"] == {"posterior": N}
    acc = out["accuracy"]
    q_a = P[0] ** 2 / float(np.sum(P ** 2))  # the target is A
    assert abs(acc["factual"] - P[0]) <= 3 * math.sqrt(P[0] * (1 - P[0]) / N)
    assert abs(acc["counterfactual"] - q_a) <= 3 * math.sqrt(q_a * (1 - q_a) / N)
    effect = acc["effect"]
    assert effect["low"] < q_a - P[0] < effect["high"]
    assert effect["estimate"] == pytest.approx(acc["counterfactual"] - acc["factual"])
    text = invoke("counterfactual", traces, "--select", "answer", "--steer", "uniform").output
    assert "choices" in text and "posterior" in text and "changed" in text


@pytest.mark.parametrize(("args", "message"), [
    (("--select", "answer", "--steer", "sideways"), "unknown selection level 'sideways'"),
    (("--select", "answer", "--steer", "agent"), "the agent's own policy"),
    (("--select", "nope", "--steer", "uniform"), "no selection of stream 'nope'"),
    (("--select", "answer", "--steer", "uniform", "--target", "answer"), "has no key"),
])
def test_bad_counterfactual_input_exits_2_with_what_to_do(traces: Path,
                                                          args: tuple[str, ...],
                                                          message: str) -> None:
    result = invoke("counterfactual", traces, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_samples_without_a_usable_choice_are_counted_not_invented(tmp_path: Path,
                                                                  traces: Path) -> None:
    logs = next(traces.parent.glob("logs"))
    result = import_logs([logs], tmp_path / "out", choices=["X", "Y"])
    assert result.choices == 0
    assert any(f"{N} sample(s) without a choice: no output position lists one of the "
               "labels ['X', 'Y']" in n for n in result.notes), result.notes
    with pytest.raises(ValueError, match="at least two distinct"):
        import_logs([logs], tmp_path / "out2", choices=["A"])
