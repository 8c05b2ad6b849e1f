"""Leaving ``record()``: what the caller waits for, per durability mode.

With the default ``durability="frame"`` leaving the block only enqueues the run's last
records and keeps the file's writer open for the next run; barriers (``al.settle`` in
every reader, ``al.flush()``, the next ``record()`` of the file, exit) write them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

import agentlog as al
import agentlog._writer.frames as frames_mod
from agentlog._writer import TraceWriter
from agentlog._writer import shared as _shared_writers
from agentlog.records import RunEnd, RunStart, Score
from agentlog.replay.lowlevel import trace_file_hash
from estimators._admissibility import _file_sha256
from tests.conftest import of_type

# No frame falls due on its own while a test looks: only the barriers write.
NEVER = 3600.0


def _end_runs(path: Path) -> list[RunEnd]:
    return of_type(al.read(path), RunEnd)


# -- (a) the caller does not wait for the writer --------------------------------------------


def test_leaving_a_frame_run_does_not_wait_for_the_writer(
    tmp_path: Path, stalled: threading.Event
) -> None:
    path = tmp_path / "t.zst"
    # A waiting close would block here for close_timeout (30 s) and warn; the frame
    # mode only enqueues the RunEnd, so the block returns while the write is stuck.
    with al.record(path, close_timeout=30.0):
        al.score("f1", 1.0)
    assert not stalled.is_set()
    stalled.set()  # the storage recovers; the read below waits for the writer
    trace = al.read(path)
    assert [r.name for r in of_type(trace, Score)] == ["f1"]
    assert len(of_type(trace, RunEnd)) == 1 and not trace.truncated


def test_flush_outside_a_run_waits_for_the_queued_close(
    tmp_path: Path, stalled: threading.Event
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path):
        al.score("f1", 1.0)
    assert al.flush(timeout=0.2) is False  # the last frame is stuck in the stalled write
    stalled.set()
    assert al.flush(timeout=10) is True
    assert len(_end_runs(path)) == 1


# -- (d) readers in this process see the run at once ----------------------------------------


def test_a_reader_right_after_the_block_sees_the_whole_run(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, frame_interval=NEVER):  # nothing is written unless a reader asks
        al.score("f1", 1.0)
    trace = al.read(path)
    assert [r.name for r in of_type(trace, Score)] == ["f1"]
    assert len(of_type(trace, RunEnd)) == 1 and not trace.truncated
    report = al.verify(path)
    assert report.ok, report


def test_file_hashes_right_after_the_block_hash_the_whole_run(tmp_path: Path) -> None:
    paths = [tmp_path / "a.zst", tmp_path / "b.zst"]
    for path in paths:
        with al.record(path, frame_interval=NEVER):
            al.score("f1", 1.0)
    replay_hash = trace_file_hash(paths[0])
    estimator_hash = _file_sha256(str(paths[1]))
    assert al.flush(timeout=10)
    assert replay_hash == hashlib.sha256(paths[0].read_bytes()).hexdigest()
    assert estimator_hash == hashlib.sha256(paths[1].read_bytes()).hexdigest()


def test_settle_is_true_for_files_no_writer_holds(tmp_path: Path) -> None:
    assert al.settle(tmp_path / "missing.zst") is True
    other = tmp_path / "other.bin"
    other.write_bytes(b"x")
    assert al.settle(other) is True


def test_settle_times_out_on_a_stalled_writer_and_says_so(
    tmp_path: Path, stalled: threading.Event
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path):
        al.score("f1", 1.0)
    assert al.settle(path, timeout=0.1) is False
    stalled.set()
    assert al.settle(path, timeout=10) is True


# -- the next run of the file reuses the writer -------------------------------------------


def test_the_next_run_of_a_file_takes_over_its_writer_and_both_runs_are_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, frame_interval=NEVER) as first:
        al.score("a", 1.0)
    with al.record(path, seed=2, mode="a", frame_interval=NEVER) as second:
        al.score("b", 2.0)
    assert second.writer is first.writer  # not opened, locked and checked again
    trace = al.read(path)
    assert [r.name for r in of_type(trace, Score)] == ["a", "b"]
    assert [(r.run, r.seed) for r in of_type(trace, RunStart)] == [(0, 1), (1, 2)]
    assert len(of_type(trace, RunEnd)) == 2


def test_mode_w_replaces_a_file_whose_writer_was_kept_open(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1) as first:
        al.score("a", 1.0)
    with al.record(path, seed=2, mode="w") as second:
        al.score("b", 2.0)
    assert second.writer is not first.writer and first.writer._done.is_set()
    trace = al.read(path)
    assert [r.name for r in of_type(trace, Score)] == ["b"]
    assert [r.run for r in of_type(trace, RunStart)] == [0]


def test_other_options_open_the_file_again(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1) as first:
        pass
    with al.record(path, seed=2, mode="a", frame_interval=0.5) as second:
        pass
    assert second.writer is not first.writer
    assert len(_end_runs(path)) == 2


def test_a_file_changed_by_someone_else_is_checked_again_before_appending(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1) as first:
        for i in range(200):
            al.score("s", float(i))
    assert al.settle(path)  # written; the writer stays open for the next run
    data = path.read_bytes()
    # Another program cuts into the last frame. 20 bytes: a frame is at least its 24-byte
    # header and a zstd frame, so the cut always tears it (40 could remove a small last
    # frame whole, leaving a clean file and no warning: a flake seen once in a full run).
    path.write_bytes(data[: len(data) - 20])
    with (
        pytest.warns(al.InstrumentationWarning, match="ends with a frame torn by a crash"),
        al.record(path, seed=2, mode="a") as second,
    ):
        al.score("b", 2.0)
    assert second.writer is not first.writer
    trace = al.read(path)
    assert not trace.truncated
    assert [r.seed for r in of_type(trace, RunStart)] == [1, 2]
    assert of_type(trace, Score)[-1].name == "b"


def test_a_cut_file_is_checked_again_while_a_pool_thread_finishes_its_last_write(
    tmp_path: Path,
) -> None:
    # The flake CI met: settle() returns when the flush marker is released, which happens
    # while the pool thread still holds the writer; a run opened in that moment must still
    # see that someone else cut the file. The pool thread's hold is played by this thread.
    path = tmp_path / "t.zst"
    with al.record(path, seed=1) as first:
        for i in range(200):
            al.score("s", float(i))
    assert al.settle(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    first.writer._busy.acquire()
    threading.Timer(0.05, first.writer._busy.release).start()
    with (
        pytest.warns(al.InstrumentationWarning, match="ends with a frame torn by a crash"),
        al.record(path, seed=2, mode="a") as second,
    ):
        al.score("b", 2.0)
    assert second.writer is not first.writer
    assert [r.seed for r in of_type(al.read(path), RunStart)] == [1, 2]


def test_a_window_run_after_a_frame_run_is_written_when_its_block_returns(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, frame_interval=NEVER):
        al.score("a", 1.0)
    with al.record(path, seed=2, mode="a", durability="window") as run:
        al.score("b", 2.0)
    assert not run.writer.closed and run.writer.pending == 0  # kept, with nothing queued
    assert len(_end_runs(path)) == 2  # read before any flush


def test_a_run_end_counts_only_the_drops_of_its_own_run(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1) as run:
        run.writer.put(object())  # type: ignore[arg-type]  # not a record: dropped
        with pytest.warns(al.InstrumentationWarning, match="not trace records"):
            assert al.flush(timeout=10)
    with al.record(path, seed=2, mode="a"):
        al.score("b", 2.0)
    assert [r.dropped for r in _end_runs(path)] == [1, 0]


def test_a_writer_opened_directly_takes_over_a_file_kept_open_for_a_next_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, frame_interval=NEVER) as run:
        al.score("a", 1.0)
    with TraceWriter(path, mode="w") as direct:  # not refused as "locked"
        direct.put(Score(run=0, window=-1, name="direct", value=2.0))
    assert run.writer._done.is_set()
    assert [r.name for r in al.read(path).records] == ["direct"]


def test_a_file_locked_by_another_open_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with TraceWriter(path), pytest.raises(al.TracePathError,
                                                     match="another process is writing it"):
        TraceWriter(path, mode="a")


# -- closing the kept writers ---------------------------------------------------------------


def _locked_by_someone(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_flush_outside_a_run_closes_the_kept_file_and_releases_its_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, frame_interval=NEVER) as run:
        pass
    assert _locked_by_someone(path)  # kept open for the next run
    assert al.flush(timeout=10)
    assert run.writer._done.is_set() and not _locked_by_someone(path)
    assert len(_end_runs(path)) == 1


def test_a_write_failing_after_the_block_is_warned_at_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int, parts: list[bytes]) -> int:
        raise OSError(28, "No space left on device")

    with al.record(tmp_path / "t.zst", frame_interval=NEVER) as run:
        al.score("a", 1.0)
        monkeypatch.setattr(frames_mod, "_writev", disk_full)  # nothing written yet
    run.writer._begin_close()  # as when evicted (MAX_KEPT): the pool closes it, no caller
    assert run.writer._done.wait(10)
    monkeypatch.undo()
    with (
        pytest.warns(al.InstrumentationWarning, match="No space left on device"),
        al.record(tmp_path / "other.zst"),
    ):
        pass
    assert run.writer.dropped >= 1


def test_at_most_max_kept_files_stay_open(tmp_path: Path) -> None:
    runs = []
    for i in range(3 * _shared_writers.MAX_KEPT):
        with al.record(tmp_path / f"t{i}.zst", frame_interval=NEVER) as run:
            al.score("s", float(i))
        runs.append(run)
    kept = [w for w, refs in _shared_writers._shared.values() if refs == 0 and not w.closed]
    assert len(kept) <= _shared_writers.MAX_KEPT
    assert al.flush(timeout=10)
    assert all(run.writer._done.is_set() for run in runs)
    assert not _shared_writers._shared or all(
        w._done.is_set() for w, _ in _shared_writers._shared.values())
    for i in range(3 * _shared_writers.MAX_KEPT):
        assert [r.value for r in of_type(al.read(tmp_path / f"t{i}.zst"), Score)] == [i]


def test_a_kept_file_deleted_after_its_run_does_not_warn(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, frame_interval=NEVER):
        al.score("a", 1.0)
    path.unlink()  # the user throws the trace away before its last frame is written
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert al.flush(timeout=10)
    with al.record(path, seed=2):  # a new file at the same path
        al.score("b", 2.0)
    assert [r.name for r in of_type(al.read(path), Score)] == ["b"]


# -- (b), (c): other processes ---------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_may_record_to_a_file_its_parent_kept_open(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, frame_interval=NEVER):
        al.score("parent", 1.0)
    with warnings.catch_warnings():  # 3.12+ warns that forking a threaded process is risky
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            with al.record(path, seed=2, mode="a"):
                al.score("child", 2.0)
            code = 0 if al.flush(timeout=10) else 4
        except BaseException:
            code = 5
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [r.name for r in of_type(al.read(path), Score)] == ["parent", "child"]

_CHILD = textwrap.dedent("""
    import os, sys
    import agentlog as al
    path = sys.argv[1]
    for seed in range(3):
        with al.record(path, seed=seed, mode="a", durability=sys.argv[2],
                       frame_interval=3600):
            for i in range(50):
                al.score("s", float(i))
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), 9)
""")


def _child(path: Path, durability: str, end: str) -> int:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), durability, end], timeout=60,
        cwd=os.getcwd(), check=False,
    ).returncode


def test_a_child_that_leaves_record_and_exits_normally_has_every_run_on_disk(
    tmp_path: Path,
) -> None:
    path = tmp_path / "child.zst"
    assert _child(path, "frame", "exit") == 0
    trace = al.read(path)
    assert len(of_type(trace, RunEnd)) == 3 and not trace.truncated
    assert len(of_type(trace, Score)) == 150


def test_a_window_run_is_on_disk_when_the_block_returns_even_under_sigkill(
    tmp_path: Path,
) -> None:
    path = tmp_path / "killed.zst"
    assert _child(path, "window", "kill") == -signal.SIGKILL
    trace = al.read(path)
    assert len(of_type(trace, RunEnd)) == 3 and not trace.truncated
    assert len(of_type(trace, Score)) == 150
