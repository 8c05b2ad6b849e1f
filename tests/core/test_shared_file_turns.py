"""Processes that append runs to one trace file take turns instead of refusing each other.

A process keeps the file of its last ``durability="frame"`` run open and locked for its
next run. A process that waits for the lock says so; the holder gives way at its next
run, or at the writer pool's next scan when idle, and the waiter's open reads only the
runs appended since this process last closed the file.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog import _trace_file
from agentlog._records import RunEnd, RunStart, Score
from tests.conftest import of_type

# Each worker records RUNS back-to-back runs of ~10 ms to one file: longer in all than the
# 2 s a waiter waits for the lock.
_WORKER = textwrap.dedent("""
    import sys, time
    import agentlog as al
    path, worker, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for r in range(runs):
        with al.record(path, seed=1000 * worker + r, task=f"w{worker}", mode="a"):
            al.score("s", float(r))
            time.sleep(0.01)
    assert al.flush(timeout=30)
""")
RUNS = 250


def _record_in_a_child(path: Path, runs: int) -> None:
    child = subprocess.run([sys.executable, "-c", _WORKER, str(path), "1", str(runs)],
                           cwd=os.getcwd(), capture_output=True, timeout=60, check=False)
    assert child.returncode == 0, child.stderr.decode()[-2000:]


def test_three_processes_recording_back_to_back_to_one_file_all_land(tmp_path: Path) -> None:
    """Before, a process recording run after run held the file for as long as it kept
    going, and the others were refused after their 2 s wait (4 of 900 runs were lost in
    3 x 300 runs); now every run of every worker is in the file, and it verifies."""
    path = tmp_path / "shared.zst"
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(path), str(w), str(RUNS)],
                                cwd=os.getcwd(), stderr=subprocess.PIPE)
               for w in range(3)]
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()[-2000:]
    trace = al.read(path)
    assert len(of_type(trace, RunEnd)) == 3 * RUNS and not trace.truncated
    starts = of_type(trace, RunStart)
    assert sorted(s.run for s in starts) == list(range(3 * RUNS))  # one index per run
    assert sorted({s.task for s in starts}) == ["w0", "w1", "w2"]
    # They took turns: the runs of the workers interleave, not one worker's block per file.
    tasks = [s.task for s in starts]
    assert sum(a != b for a, b in itertools.pairwise(tasks)) > 3
    assert al.verify(path).ok


def test_an_idle_kept_file_is_released_to_a_waiter_within_the_pools_scan(
        tmp_path: Path) -> None:
    path = tmp_path / "idle.zst"
    with al.record(path, seed=1, mode="a"):
        al.score("parent", 1.0)
    started = time.monotonic()
    _record_in_a_child(path, runs=1)
    assert time.monotonic() - started < 30  # bounded (a timing bound only against a hang)
    assert [s.name for s in of_type(al.read(path), Score)] == ["parent", "s"]


def test_waited_for_sees_a_waiter_in_another_process_only(tmp_path: Path) -> None:
    path = tmp_path / "lock.zst"
    path.write_bytes(b"")
    fd = os.open(path, os.O_WRONLY)
    try:
        assert not _trace_file.waited_for(fd)
        _trace_file._announce_wait(fd)  # this process's own announcement never counts
        assert not _trace_file.waited_for(fd)
        holder = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent("""
                import fcntl, os, sys, time
                fd = os.open(sys.argv[1], os.O_WRONLY)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 1 << 62)
                print("ready", flush=True)
                sys.stdin.readline()
            """), str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
            assert _trace_file.waited_for(fd)
        finally:
            holder.communicate(b"\n", timeout=30)
        assert not _trace_file.waited_for(fd)
    finally:
        os.close(fd)


def test_an_append_by_another_process_is_read_from_where_this_one_left_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "grown.zst"
    with al.record(path, seed=1, mode="a"):
        al.score("mine", 1.0)
    assert al.flush()
    _record_in_a_child(path, runs=2)
    starts: list[int] = []
    read_frames = _trace_file._read_frames

    def spy(rfd: int, path: str, size: int, offset: int, *rest: Any) -> Any:
        starts.append(offset)
        return read_frames(rfd, path, size, offset, *rest)

    monkeypatch.setattr(_trace_file, "_read_frames", spy)
    with al.record(path, seed=9, mode="a"):
        al.score("mine again", 2.0)
    assert al.flush()
    assert len(starts) == 1 and starts[0] > _trace_file.FILE_HEADER_SIZE
    trace = al.read(path)
    assert [s.run for s in of_type(trace, RunStart)] == [0, 1, 2, 3]
    assert al.verify(path).ok


def _hex_text(length: int) -> str:
    """``length`` characters that do not compress away: a trace's size grows with them."""
    digits = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(length // 64 + 1))
    return digits[:length]


def test_a_file_rewritten_to_end_just_past_this_processs_end_is_checked_whole(
        tmp_path: Path) -> None:
    """The bytes past this process's old end are not a torn frame of its own when the file
    was rewritten meanwhile: only the whole-file check may cut a file, and this one is a
    valid trace, so nothing of it is cut."""
    path = tmp_path / "rewritten.zst"
    with al.record(path, seed=1, mode="a"):
        al.score(_hex_text(300), 1.0)  # a long run: the other trace starts out smaller
    assert al.flush()
    end = path.stat().st_size
    other = tmp_path / "other.zst"
    # Another trace whose size lands just past `end`: it grows by a few bytes per character
    # of its second score's name (mostly under 8, its timestamps' varints up to 16), so a
    # sweep over the lengths lands in the 15-byte window unless one step jumps it; a few
    # sweeps, each with other timestamps, make that miss practically impossible.
    landed = None
    for sweep in range(5):
        for length in range(1, 1200):
            with al.record(other, seed=2 + sweep, mode="w"):
                al.score("theirs", 1.0)
                al.score(_hex_text(length), 2.0)
            assert al.flush()
            if 0 < other.stat().st_size - end < _trace_file.FRAME_HEADER_SIZE:
                landed = length
                break
        if landed is not None:
            break
    if landed is None:
        pytest.fail("no trace size landed just past the first one's end")
    path.write_bytes(other.read_bytes())  # the same file (inode), rewritten by "someone"
    with al.record(path, seed=3, mode="a"):
        al.score("mine again", 3.0)
    assert al.flush()
    names = [s.name for s in of_type(al.read(path), Score)]
    assert names == ["theirs", _hex_text(landed), "mine again"]
    assert al.verify(path).ok
