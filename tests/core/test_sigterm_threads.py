"""SIGTERM under threaded load ends the program promptly and loses no returned window.

With 16 threads recording, the one pool thread kept servicing the writer (the producers
kept it wanted) and never looked at the signal: the handler waited its whole
``SIGNAL_FLUSH_TIMEOUT`` (median 5.1 s, at most 6.6 s) while the threads went on
returning windows, and the process then ended with those windows still queued (up to
37,000 of 340,000 returned windows lost with the default durability). Now the handler
holds the recording threads back at their next record and the pool thread writes what
was queued before the signal is acknowledged. A few seeded trials per durability; the
many-trial study is ``tests/benchmarks/bench_sigterm.py --threads 16``.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from types import ModuleType

import pytest


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_agentlog_sigterm_threads_child", Path(__file__).with_name("_sigterm_threads_child.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


child = _load()


@pytest.mark.slow  # a soak: processes killed at many moments
@pytest.mark.parametrize("durability", ["frame", "window"])
def test_sigterm_with_sixteen_threads_recording_ends_before_the_flush_bound_losing_nothing(
        tmp_path: Path, durability: str) -> None:
    for seed in range(2):
        # The handler may wait ten minutes for the pool thread here, far past the trial's
        # 30 s hang guard: a handler left waiting for its bound (as it was, on every trial,
        # when the pool thread never looked at the signal) is a hung trial, not a slow one.
        t = child.trial(tmp_path, durability, seed, threads=16, flush_bound=600.0)
        assert not t.hung
        assert t.returncode == -signal.SIGTERM
        assert t.returned > 100, f"trial {seed}: only {t.returned} windows returned"
        assert t.lost == 0, f"trial {seed}: {t.lost} of {t.returned} returned windows lost"
