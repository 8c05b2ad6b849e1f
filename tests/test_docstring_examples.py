"""The runnable examples in the public modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "agentlog", "agentlog._window", "agentlog._select", "agentlog._recorder",
    "agentlog._verify", "agentlog._encoding", "agentlog.context", "agentlog.testing",
    "agentlog._steering", "agentlog.estimators._cess", "agentlog.estimators._audit",
    "agentlog.estimators._tuning", "agentlog.estimators._effects",
    "agentlog.estimators.cess", "agentlog.estimators._asv", "agentlog.estimators._asv_trace",
    "agentlog.estimators.asv", "agentlog.estimators._cess_trace",
    "agentlog.estimators.reliability", "agentlog.estimators.bounds",
    "agentlog.estimators.distance",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no runnable example"
    assert result.failed == 0
