"""SIGTERM at random moments never hangs the recording program nor loses a returned window.

With ``durability="window"`` not even SIGKILL loses a window that has returned.

A handful of trials per durability here (each bounded by a timeout); the many-trial
study is ``tests/benchmarks/bench_sigterm.py``.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from types import ModuleType

import pytest


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_agentlog_sigterm_child", Path(__file__).with_name("_sigterm_child.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


child = _load()


@pytest.mark.parametrize("durability", ["frame", "window"])
def test_a_sigterm_inside_the_main_threads_event_set_does_not_deadlock(
    tmp_path: Path, durability: str
) -> None:
    t = child.trial(tmp_path, durability, seed=1, in_event_set=True)
    assert not t.hung
    assert t.returncode == -signal.SIGTERM  # terminated as it would have been without us
    assert t.lost == 0


@pytest.mark.slow  # a soak: processes killed at many moments
@pytest.mark.parametrize("durability", ["frame", "window", "fsync"])
def test_sigterm_at_random_moments_never_hangs_and_loses_no_returned_window(
    tmp_path: Path, durability: str
) -> None:
    trials = [child.trial(tmp_path, durability, seed=s) for s in range(2)]
    assert [t.hung for t in trials] == [False, False]
    assert {t.returncode for t in trials} == {-signal.SIGTERM}
    assert [t.lost for t in trials] == [0, 0]


@pytest.mark.slow  # a soak: processes killed at many moments
@pytest.mark.parametrize("durability", ["window", "fsync"])
def test_with_durability_window_sigkill_loses_no_window_that_had_returned(
    tmp_path: Path, durability: str
) -> None:
    trials = [child.trial(tmp_path, durability, seed=s, sig=signal.SIGKILL) for s in range(2)]
    assert {t.returncode for t in trials} == {-signal.SIGKILL}
    assert [t.lost for t in trials] == [0, 0]
