"""Every wait bounded, the queue bounded, a returned window durable, few threads.

Stalled storage is simulated by a ``_writev`` that blocks until the test releases it,
so no assertion depends on how fast this machine is.
"""

from __future__ import annotations

import inspect
import os
import shutil
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest

import agentlog as al
import agentlog._writer.frames as frames_mod
import agentlog._writer.writer as writer_mod
from agentlog._reader import read
from agentlog._writer import TraceWriter
from agentlog._writer import pool as _writer_pool
from agentlog.records import Score, WindowExit
from tests.conftest import of_type


def score(i: int) -> Score:
    return Score(run=0, window=i, name="f1", value=float(i))


# -- item 2: every wait has a bound ------------------------------------------------------------


def test_flush_and_close_have_finite_documented_default_timeouts() -> None:
    assert inspect.signature(al.flush).parameters["timeout"].default == writer_mod.FLUSH_TIMEOUT
    assert inspect.signature(TraceWriter.flush).parameters["timeout"].default == 10.0
    assert inspect.signature(al.record).parameters["close_timeout"].default == 10.0


def test_leaving_a_window_run_on_stalled_storage_returns_after_close_timeout_with_a_warning(
    trace_path: Path, stalled: threading.Event
) -> None:
    closing = r"leaving the run timed out after 0.2 s with \d+ records not yet written"
    with (
        pytest.warns(al.InstrumentationWarning, match=closing),
        al.record(trace_path, close_timeout=0.2, durability="window"),
    ):
        al.score("f1", 1.0)
    stalled.set()  # the storage recovers: the pool finishes the file
    run_writer = _writer_pool.writers()
    for w in run_writer:
        w._done.wait(10)
    assert [r.name for r in of_type(read(trace_path), Score)] == ["f1"]


def test_flush_on_stalled_storage_returns_false_after_its_timeout(
    tmp_path: Path, stalled: threading.Event
) -> None:
    w = TraceWriter(tmp_path / "t.zst", frame_interval=3600)
    w.put(score(1))
    assert w.flush(timeout=0.05) is False
    stalled.set()
    assert w.flush() is True
    w.close()


def test_a_stalled_writer_does_not_stall_the_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real = frames_mod._writev
    stuck_fd: list[int] = []

    def stuck_on_one_file(fd: int, parts: list[bytes]) -> int:
        if fd in stuck_fd:
            release.wait(30)
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", stuck_on_one_file)
    slow = TraceWriter(tmp_path / "slow.zst", frame_interval=3600)
    stuck_fd.append(slow._fd)
    slow.put(score(1))
    assert slow.flush(timeout=0.05) is False  # one pool thread is now stuck in its write
    others = [TraceWriter(tmp_path / f"{i}.zst", frame_interval=3600) for i in range(3)]
    for w in others:
        w.put(score(2))
    assert all(w.flush(timeout=10) for w in others)
    release.set()
    for w in [*others, slow]:
        w.close()
    assert slow.records_written == 1


# -- item 7: durability="window" / "fsync" -----------------------------------------------------


@al.window("step")
def step(i: int) -> int:
    return i


def test_with_durability_window_a_returned_window_is_already_on_disk(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = frames_mod._writev
    gate = threading.Semaphore(0)

    def late(fd: int, parts: list[bytes]) -> int:
        gate.acquire(timeout=0.05)  # every write arrives late (the window must wait)
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", late)
    with al.record(trace_path, durability="window", frame_interval=3600):
        for i in range(3):
            step(i)
            # Read from disk while the run is still open, without any flush.
            exits = [r for r in of_type(read(trace_path), WindowExit) if r.name == "step"]
            assert len(exits) == i + 1


def test_durability_fsync_syncs_the_file_before_each_window_returns(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    with al.record(trace_path, durability="fsync", frame_interval=3600):
        step(0)
        after_one = len(synced)
        step(1)
        assert len(synced) == after_one + 1 >= 1


def test_durability_window_on_stalled_storage_waits_once_then_lets_windows_return(
    trace_path: Path, stalled: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_mod, "WINDOW_TIMEOUT", 0.05)
    late = r"window's frame was not written within window_timeout=0.05 s"
    with (
        pytest.warns(al.InstrumentationWarning, match=late),
        al.record(trace_path, durability="window", close_timeout=0.1),
    ):
        for i in range(50):  # all 50 return although none can be written
            step(i)
    stalled.set()


# -- item 8: the file is deleted under the run ---------------------------------------------------


def test_a_trace_whose_directory_is_deleted_mid_run_warns_at_the_next_frame(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "runs"
    with (
        pytest.warns(al.InstrumentationWarning, match=r"deleted while recording"),
        al.record(folder / "t.zst", durability="window"),
    ):
        step(0)
        shutil.rmtree(folder)
        step(1)  # its frame goes to an unlinked file: found here
        step(2)


# -- item 11: a bounded queue ------------------------------------------------------------------


def big(i: int) -> Score:
    return Score(run=0, window=i, name="x" * 1000, value=float(i))


@pytest.mark.parametrize("on_full", ["drop", "block"])
def test_the_queue_stays_bounded_in_bytes_while_the_writer_cannot_keep_up(
    tmp_path: Path, stalled: threading.Event, on_full: str
) -> None:
    cap = 1 << 20
    w = TraceWriter(tmp_path / "t.zst", max_queue_bytes=cap, on_full=on_full,  # type: ignore[arg-type]
                    full_timeout=0.05, frame_interval=3600)
    peak = 0
    n = 20_000  # ~20 MB of records against a 1 MiB queue
    for i in range(n):
        w.put(big(i))
        peak = max(peak, w.pending)
    # Each record encodes to ~1 KB: the queue never held more than about 2 MiB of them,
    # and what was not dropped was queued (or in the one batch stuck in the write).
    assert peak * 1000 <= 2 * cap
    assert n - w.dropped <= 2 * peak
    stalled.set()
    with pytest.warns(al.InstrumentationWarning, match=r"queue (is|stayed) full"):
        w.close()
    assert w.records_written + w.dropped == n
    assert read(tmp_path / "t.zst").records_recovered == w.records_written


def test_record_validates_its_queue_options(trace_path: Path) -> None:
    with (
        pytest.raises(ValueError, match=r"`on_full` must be 'block' or 'drop'; found 'spill'"),
        al.record(trace_path, on_full="spill"),  # type: ignore[arg-type]
    ):
        pass


# -- item 13: a small pool of writer threads ------------------------------------------------------


def writer_threads() -> int:
    return sum(t.name.startswith("agentlog-writer") for t in threading.enumerate())


def test_a_thousand_open_runs_on_a_thousand_files_share_a_few_writer_threads(
    tmp_path: Path,
) -> None:
    before = threading.active_count()
    with ExitStack() as stack:
        for i in range(1000):
            stack.enter_context(al.record(tmp_path / f"{i}.zst", task=str(i)))
            al.score("f1", float(i))
        assert writer_threads() <= _writer_pool.POOL_SIZE
        assert threading.active_count() <= before + _writer_pool.POOL_SIZE
    for i in (0, 499, 999):
        trace = read(tmp_path / f"{i}.zst")
        assert [s.value for s in of_type(trace, Score)] == [float(i)]


def test_producers_wait_for_the_first_size_measurement_at_most_once(
    tmp_path: Path, stalled: threading.Event
) -> None:
    w = TraceWriter(tmp_path / "t.zst", full_timeout=0.05, frame_interval=3600)
    w.put({"not": "a record"})  # type: ignore[arg-type]  # cannot be measured
    for i in range(1000):  # the first put past 128 queued waits 0.05 s, no other put does
        w.put(score(i))
    assert w._learned
    stalled.set()
    with pytest.warns(al.InstrumentationWarning, match="not trace records"):
        w.close()
    assert w.records_written == 1000
