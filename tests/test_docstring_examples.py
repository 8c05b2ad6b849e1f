"""The runnable examples in the public modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

MODULES = [
    "agentlog", "agentlog._window.decorator", "agentlog._select", "agentlog._recorder",
    "agentlog._verify", "agentlog._reader", "agentlog._frames", "agentlog._digest",
    "agentlog.records",
    "agentlog._encoding", "agentlog._scrub", "agentlog.scrubbing", "agentlog.context",
    "agentlog.testing", "agentlog._writer.shared", "agentlog._llm", "agentlog.adapters",
    "agentlog.adapters._choice", "agentlog.adapters._recording",
    "agentlog._steering", "agentlog.estimators._cess", "agentlog.estimators._audit",
    "agentlog.estimators._tuning", "agentlog.estimators._effects",
    "agentlog.estimators._effects_trace", "agentlog.estimators._shared_noise",
    "agentlog.replay._design",
    "agentlog.estimators.cess", "agentlog.estimators._asv", "agentlog.estimators._asv_trace",
    "agentlog.estimators.asv", "agentlog.estimators._cess_trace",
    "agentlog.estimators._terminal_scores",
    "agentlog.estimators.reliability", "agentlog.estimators.bounds",
    "agentlog.estimators.distance", "agentlog.estimators.attribution",
    "agentlog.replay.interventions", "agentlog.replay._counterfactual",
    "agentlog.examples.deep_research.agent",
    "agentlog._registry", "agentlog.registry", "agentlog.replay._app", "agentlog._channels",
    "agentlog.replay._states", "agentlog.replay._channel_replay",
    "agentlog.examples.deep_research.channels", "agentlog.examples.logprob_scorer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples write relative paths: run in a fresh folder, they leave nothing behind."""
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no runnable example"
    assert result.failed == 0


def test_no_example_writes_to_a_fixed_path_in_the_system_temporary_folder() -> None:
    """A fixed /tmp path collides between users and concurrent runs and is never cleaned."""
    offenders = []
    for name in MODULES:
        module = importlib.import_module(name)
        for test in doctest.DocTestFinder().find(module):
            for example in test.examples:
                if "/tmp/" in example.source or "gettempdir()" in example.source:
                    offenders.append(f"{test.name}: {example.source.strip()}")
    assert offenders == []

