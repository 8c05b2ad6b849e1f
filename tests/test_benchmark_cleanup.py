"""Every benchmark removes what it writes (issue 16): each writes under
``tests/benchmarks/_tempdir.bench_dir``, which removes its folder on a normal exit, an
exception and SIGTERM (``timeout``). Structural for the scripts (they run for minutes), and
behavioural for ``bench_dir`` itself, in child processes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent / "benchmarks"
# What creates files: a recording, a writer, a cache, a write of bytes or text, a folder.
WRITES = re.compile(r"al\.record\(|TraceWriter\(|ModelCache\(|write_bytes\(|write_text\(|"
                    r"open\([^)]*[\"'][wa]b?[\"']|mkdir\(|bench_dir\(")


def _scripts() -> list[Path]:
    return sorted(BENCH.glob("bench_*.py"))


def test_every_benchmark_that_writes_files_writes_them_under_bench_dir() -> None:
    writers = [p for p in _scripts() if WRITES.search(p.read_text(encoding="utf-8"))]
    assert len(writers) >= 10  # the pattern still finds the benchmarks that write
    for path in writers:
        text = path.read_text(encoding="utf-8")
        # _timing.measured(measure, prefix) runs measure in a bench_dir (checked below).
        assert "bench_dir(" in text or "measured(" in text, (
            f"{path.name} writes files outside bench_dir")
        for call in ("mkdtemp(", "TemporaryDirectory(", "NamedTemporaryFile(", "mkstemp("):
            assert call not in text, f"{path.name} makes its own temporary {call}"
    assert "with bench_dir(prefix)" in (BENCH / "_timing.py").read_text(encoding="utf-8")
    assert not re.search(r"mkdtemp\(|TemporaryDirectory\(",
                         "".join(p.read_text(encoding="utf-8") for p in _scripts()))


CHILD = """
import os, signal, sys
sys.path.insert(0, {bench!r})
from _tempdir import bench_dir
import agentlog as al

how = sys.argv[1]

@al.window("w")
def step(i: int) -> int:
    return i

with bench_dir("agentlog-cleanup-test-") as folder:
    print(folder, flush=True)
    with al.record(os.path.join(folder, "t.zst"), seed=1):
        for i in range(50):
            step(i)
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)  # delivered before the next bytecode
        elif how == "error":
            raise RuntimeError("the benchmark failed")
    open(os.path.join(folder, "other.txt"), "w").close()
"""


@pytest.mark.parametrize(("how", "code"), [("normal", 0), ("error", 1), ("sigterm", 143)])
def test_bench_dir_is_removed_however_the_run_ends(how: str, code: int) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD.format(bench=str(BENCH)), how],
                          capture_output=True, text=True, timeout=120)
    folder = Path(done.stdout.split()[0])
    assert done.returncode == code, done.stderr
    assert folder.name.startswith("agentlog-cleanup-test-")
    assert not folder.exists()
    assert "could not remove" not in done.stderr
    if how == "error":
        assert "RuntimeError: the benchmark failed" in done.stderr
