"""One writing process per trace file: a second process is refused at once, with the fix.

Before, processes appending to one file took turns (announcing that they waited, the
holder giving way at its next run or at the writer pool's next scan), over five modules.
Now a process holds a file it writes until ``al.flush()`` outside a run or exit; another
process gets a ``TracePathError`` naming the fix (one file per process in a folder, which
every reader takes as one trace set). Threads and tasks of one process share a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import RunStart, Score
from tests.conftest import of_type

_CHILD = textwrap.dedent("""
    import sys
    import agentlog as al
    try:
        with al.record(sys.argv[1], seed=int(sys.argv[2]), task="child", mode="a"):
            al.score("child", 1.0)
    except al.TracePathError as exc:
        print("refused:", exc)
        sys.exit(3)
    assert al.flush(timeout=30)
""")


def _child(path: Path, seed: int = 7) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, str(path), str(seed)],
                          cwd=os.getcwd(), capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.timeout(120)
def test_a_second_process_is_refused_while_this_one_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "held.zst"
    with al.record(path, seed=1, mode="a"):
        al.score("mine", 1.0)
    # The run has ended; this process still holds the file (kept for its next run).
    child = _child(path)
    assert child.returncode == 3, child.stderr[-2000:]
    assert "another process is writing it" in child.stdout
    assert "its own file in one folder" in child.stdout
    with al.record(path, seed=2, mode="a"):  # this process goes on writing it
        al.score("mine", 2.0)
    assert al.flush(timeout=30)  # ...and lets go of it
    child = _child(path)
    assert child.returncode == 0, child.stdout + child.stderr[-2000:]
    trace = al.read(path)
    assert [s.name for s in of_type(trace, Score)] == ["mine", "mine", "child"]
    assert al.verify(path).ok


@pytest.mark.timeout(120)
def test_after_another_process_appended_the_file_is_checked_and_indexes_go_on(
        tmp_path: Path) -> None:
    path = tmp_path / "grown.zst"
    with al.record(path, seed=1, mode="a"):
        al.score("mine", 1.0)
    assert al.flush()
    assert _child(path).returncode == 0
    assert _child(path, seed=8).returncode == 0
    with al.record(path, seed=9, mode="a"):
        al.score("mine again", 2.0)
    assert al.flush()
    assert [s.run for s in of_type(al.read(path), RunStart)] == [0, 1, 2, 3]
    assert al.verify(path).ok


@pytest.mark.timeout(120)
def test_processes_recording_at_once_write_one_file_each_into_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    worker = textwrap.dedent("""
        import os, sys
        import agentlog as al
        for r in range(20):
            with al.record(f"{sys.argv[1]}/{os.getpid()}.zst", seed=r, task=sys.argv[2],
                           mode="a"):
                al.score("s", float(r))
        assert al.flush(timeout=30)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", worker, str(folder), f"w{w}"],
                              cwd=os.getcwd(), stderr=subprocess.PIPE) for w in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
    files = sorted(folder.glob("*.zst"))
    assert len(files) == 3 and all(al.verify(f).ok for f in files)
    tasks = sorted(s.task for f in files for s in of_type(al.read(f), RunStart))
    assert tasks == sorted(f"w{w}" for w in range(3) for _ in range(20))
