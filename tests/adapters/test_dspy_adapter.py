"""``agentlog.adapters.dspy``: a DSPy program driven by DSPy's own ``DummyLM``, recorded
with the callback: a window per module call holding its LM call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

dspy = pytest.importorskip("dspy")

from dspy.utils import DummyLM  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters.dspy import RecordingCallback  # noqa: E402


def _ask(lm: Any, callback: Any) -> str:
    with dspy.context(lm=lm, callbacks=[callback]):
        return str(dspy.Predict("question -> answer")(question="A or B?").answer)


def test_a_module_call_is_a_window_holding_its_lm_call(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        assert _ask(DummyLM([{"answer": "B"}]), RecordingCallback()) == "B"
    trace = al.read(path)
    (window,) = trace.windows("dspy.module.Predict")
    assert window.entry_value() == {"question": "A or B?"}
    assert window.exit_value() == {"answer": "B"}
    assert window.exit is not None and window.exit.llm_calls == 1
    (call,) = trace.llm_calls()
    assert call.provider.startswith("dspy.") and call.status == 0 and call.window == 0
    assert al.verify(path).ok


def test_the_same_program_seals_the_same_module_window(tmp_path: Path) -> None:
    for name in ("a.zst", "b.zst"):
        with al.record(tmp_path / name, seed=1, mode="w"):
            _ask(DummyLM([{"answer": "B"}]), RecordingCallback())
    a, b = (al.read(tmp_path / n).windows("dspy.module.Predict")[0] for n in ("a.zst", "b.zst"))
    assert (a.enter.entry_hash, a.exit.exit_hash) == (b.enter.entry_hash, b.exit.exit_hash)


def test_a_module_that_raises_is_a_failed_window(tmp_path: Path) -> None:
    class Broken(dspy.Module):
        def forward(self, question: str) -> Any:
            raise ValueError("no answer")

    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"), pytest.raises(ValueError, match="no answer"), \
            dspy.context(lm=DummyLM([]), callbacks=[RecordingCallback()]):
        Broken()(question="?")
    (window,) = al.read(path).windows("dspy.module.Broken")
    assert window.exit is not None and window.exit.status == 1
