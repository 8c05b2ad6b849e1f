"""A killed writer leaves a readable trace holding at least everything it flushed."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agentlog._writer
from agentlog._reader import read
from tests.conftest import blocked_signals

CHILD = Path(__file__).with_name("_crash_child.py")
# The directory that holds the agentlog package these tests import.
PACKAGE_ROOT = Path(agentlog._writer.__file__).parents[2]
N_TRIALS = 56
PARALLEL = 8


def _load_child() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_agentlog_crash_child", CHILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


child = _load_child()


def _spawn(out: Path, mode: str, seed: int = 0) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])]
    )
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(out), mode, str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _expected(n: int) -> list[Any]:
    return [child.record(i) for i in range(n)]


def _kill_trial(tmp: Path, seed: int) -> tuple[int, int, bool, list[Any]]:
    """One child killed at a seeded random moment: (last flushed, recovered, truncated, recs)."""
    rng = random.Random(seed)
    out = tmp / f"crash-{seed}.zst"
    proc = _spawn(out, "kill", seed)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the child is writing once it has flushed once
    assert first.strip().isdigit(), proc.stderr.read() if proc.stderr else first
    time.sleep(rng.random() * 0.25)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    printed = [int(line) for line in (first + rest).split("\n") if line.strip().isdigit()]
    trace = read(out)
    return printed[-1], trace.records_recovered, trace.truncated, trace.records


@pytest.mark.slow  # a soak: processes killed at many moments
def test_sigkill_at_random_moments_loses_nothing_flushed_and_corrupts_nothing(
    tmp_path: Path,
) -> None:
    """56 children killed mid-write: each trace reads without error, holds every record
    the child had flushed, and is an exact prefix of the sequence the child wrote."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda s: _kill_trial(tmp_path, s), range(N_TRIALS)))
    longest = max(r[1] for r in results)
    expected = _expected(longest)
    for seed, (flushed, recovered, _truncated, records) in enumerate(results):
        assert recovered >= flushed, f"seed {seed}: flushed {flushed}, recovered {recovered}"
        assert records == expected[:recovered], f"seed {seed}: not a prefix"
    # The kills landed at different points, and some tore a frame mid-write.
    assert len({r[1] for r in results}) > N_TRIALS // 2
    assert any(r[1] > r[0] for r in results)


def test_sigterm_flushes_every_enqueued_record_then_terminates(tmp_path: Path) -> None:
    out = tmp_path / "term.zst"
    proc = _spawn(out, "term")
    assert proc.stdout is not None
    assert int(proc.stdout.readline()) == child.N_TERM
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM
    trace = read(out)
    assert not trace.truncated
    assert trace.records == _expected(child.N_TERM)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_pool_threads_block_sigterm_and_sigint_so_the_main_thread_gets_them(
        tmp_path: Path) -> None:
    """A process-directed SIGTERM that the kernel hands to a pool thread runs its Python
    handler only when the main thread next runs bytecode: a main thread asleep in
    ``time.sleep(60)`` would flush and terminate a minute late. Pool threads block it."""
    w = agentlog._writer.TraceWriter(str(tmp_path / "mask.zst"))
    try:
        pool = [t for t in threading.enumerate() if t.name.startswith("agentlog-writer-")]
        assert pool
        for t in pool:
            blocked = blocked_signals(t)
            assert {signal.SIGTERM, signal.SIGINT, signal.SIGHUP} <= blocked, (t.name, blocked)
            # synchronous faults stay deliverable
            assert not {signal.SIGSEGV, signal.SIGFPE} & blocked, (t.name, blocked)
        assert signal.SIGTERM not in blocked_signals(threading.main_thread())
    finally:
        w.close()


def test_sigterm_handler_chains_to_the_previous_python_handler(tmp_path: Path) -> None:
    out = tmp_path / "term-chain.zst"
    proc = _spawn(out, "term-chain")
    assert proc.stdout is not None
    assert int(proc.stdout.readline()) == child.N_TERM
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=30)
    assert "chained" in rest, err
    assert proc.returncode == 7
    trace = read(out)
    assert not trace.truncated
    assert trace.records == _expected(child.N_TERM)


def test_interpreter_exit_closes_a_writer_nobody_closed(tmp_path: Path) -> None:
    out = tmp_path / "exit.zst"
    proc = _spawn(out, "exit")
    stdout, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert int(stdout) == child.N_TERM
    trace = read(out)
    assert not trace.truncated
    assert trace.records == _expected(child.N_TERM)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_drops_records_instead_of_writing_into_the_parents_file(
    tmp_path: Path,
) -> None:
    from agentlog._writer import TraceWriter
    from agentlog.records import Score

    out = tmp_path / "fork.zst"
    w = TraceWriter(out, frame_interval=3600)
    w.put(Score(run=0, window=-1, name="parent", value=1.0))
    with warnings.catch_warnings():  # 3.12+ warns that forking a threaded process is risky
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            w.put(Score(run=0, window=-1, name="child", value=2.0))
            w.flush()
            w.close()
            code = 0 if w.dropped == 1 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    w.close()
    assert [r.name for r in read(out).records] == ["parent"]
