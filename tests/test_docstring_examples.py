"""The runnable examples in the public modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

MODULES = [
    "agentlog", "agentlog._window", "agentlog._select", "agentlog._recorder",
    "agentlog._verify", "agentlog._reader", "agentlog._digest", "agentlog.records",
    "agentlog._encoding", "agentlog.context", "agentlog.testing",
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


def test_the_readme_recording_example_runs(tmp_path: Path) -> None:
    """The first Python block of README.md records, reads and verifies a run (in a child
    interpreter, as a user would run it)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index("```python\n") + len("```python\n")
    script = tmp_path / "readme_example.py"
    script.write_text(text[start:text.index("```", start)])
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "q-001.zst").exists()
