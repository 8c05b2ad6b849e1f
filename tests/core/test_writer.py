"""TraceWriter: frame cutting, flush semantics, sharing, and never breaking the host."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog._writer.frames as frames_mod
import agentlog._writer.writer as writer_mod
from agentlog._errors import InstrumentationWarning, TracePathError
from agentlog._reader import iter_frames, read
from agentlog._trace_format import FILE_HEADER
from agentlog._writer import TraceWriter
from agentlog._writer.shared import flush_all, release_writer, shared_writer
from agentlog.records import Blob, Score, Selection


def score(i: int, name: str = "f1") -> Score:
    return Score(run=0, window=i, name=name, value=float(i))


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.002)
    return cond()


def frame_sizes(path: Path) -> list[int]:
    return [len(f.records) for f in iter_frames(path)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "t.zst"


@pytest.fixture
def idle(path: Path) -> Iterator[TraceWriter]:
    """A writer that cuts frames only when asked (huge interval and count)."""
    w = TraceWriter(path, frame_records=10**6, frame_interval=3600)
    yield w
    w.close()


# -- writing and frame cutting ------------------------------------------------------------


def test_records_put_are_read_back_in_order_after_close(path: Path) -> None:
    w = TraceWriter(path)
    for i in range(10_000):
        w.put(score(i))
    w.close()
    assert read(path).records == [score(i) for i in range(10_000)]
    assert (w.records_written, w.dropped) == (10_000, 0)
    assert w.bytes_written == path.stat().st_size


def test_a_new_writer_creates_the_file_with_only_the_header(idle: TraceWriter, path: Path) -> None:
    assert path.read_bytes() == FILE_HEADER  # a zstd skippable frame holding b"AGNTLOG\x02"
    assert FILE_HEADER[8:] == b"AGNTLOG\x02" and idle.bytes_written == 16


def test_an_existing_file_is_refused_by_default_and_left_untouched(path: Path) -> None:
    path.write_bytes(b"old content that is not a trace")
    with pytest.raises(TracePathError, match=r"already holds 31 bytes .*pass mode='a'"):
        TraceWriter(path)
    assert path.read_bytes() == b"old content that is not a trace"


def test_mode_w_replaces_an_existing_file(path: Path) -> None:
    path.write_bytes(b"old content that is not a trace")
    with TraceWriter(path, mode="w") as w:
        w.put(score(1))
    assert read(path).records == [score(1)]


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "deep" / "t.zst"
    with TraceWriter(path) as w:
        w.put(score(1))
    assert read(path).records == [score(1)]


def test_a_frame_is_cut_every_frame_records_records_without_flush(path: Path) -> None:
    w = TraceWriter(path, frame_records=10, frame_interval=3600)
    for i in range(25):
        w.put(score(i))
    assert wait_until(lambda: w.records_written == 20)
    time.sleep(0.05)
    assert w.records_written == 20  # the last 5 wait for the next cut
    w.close()
    assert frame_sizes(path) == [10, 10, 5]


def test_no_frame_holds_more_than_frame_records_records(path: Path) -> None:
    w = TraceWriter(path, frame_records=7, frame_interval=3600)
    for i in range(1000):
        w.put(score(i))
    w.close()
    sizes = frame_sizes(path)
    assert max(sizes) <= 7 and sum(sizes) == 1000


def test_a_frame_is_cut_after_frame_interval_seconds_without_flush(path: Path) -> None:
    w = TraceWriter(path, frame_records=10**6, frame_interval=0.02)
    w.put(score(1))
    w.put(score(2))
    assert wait_until(lambda: w.records_written == 2, timeout=2)
    assert read(path).records == [score(1), score(2)]  # readable while the writer is open
    w.close()


def test_flush_writes_everything_enqueued_before_it_as_a_frame(
    idle: TraceWriter, path: Path
) -> None:
    idle.put(score(1))
    idle.put(score(2))
    assert idle.flush() is True
    assert idle.records_written == 2 and idle.frames_written == 1
    trace = read(path)
    assert trace.records == [score(1), score(2)] and not trace.truncated
    idle.put(score(3))
    idle.flush()
    assert frame_sizes(path) == [2, 1]


def test_flush_with_nothing_queued_returns_true_and_writes_no_frame(idle: TraceWriter) -> None:
    assert idle.flush(timeout=5) is True
    assert idle.frames_written == 0


def test_cut_frame_writes_a_frame_without_waiting(idle: TraceWriter, path: Path) -> None:
    idle.put(score(1))
    idle.cut_frame()
    assert wait_until(lambda: idle.records_written == 1)
    idle.put(score(2))
    idle.cut_frame()
    assert wait_until(lambda: idle.records_written == 2)
    assert frame_sizes(path) == [1, 1]


def test_each_cut_frame_call_ends_a_frame_even_before_the_writer_catches_up(
    idle: TraceWriter, path: Path
) -> None:
    for i in range(5):
        idle.put(score(i))
        idle.put(score(i))
        idle.cut_frame()
    idle.put(score(9))  # after the last cut: waits for the next one
    assert wait_until(lambda: idle.records_written == 10)
    time.sleep(0.05)
    assert idle.records_written == 10
    idle.close()
    assert frame_sizes(path) == [2, 2, 2, 2, 2, 1]


def test_close_writes_the_last_partial_frame(idle: TraceWriter, path: Path) -> None:
    for i in range(3):
        idle.put(score(i))
    idle.close()
    assert frame_sizes(path) == [3]


def test_flush_times_out_while_the_disk_is_stuck(
    idle: TraceWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real = frames_mod._writev

    def stuck(fd: int, parts: list[bytes]) -> int:
        release.wait(10)
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", stuck)
    idle.put(score(1))
    assert idle.flush(timeout=0.05) is False
    release.set()
    assert idle.flush(timeout=5) is True
    assert idle.records_written == 1


def test_close_is_idempotent_and_put_after_close_counts_a_drop(idle: TraceWriter) -> None:
    idle.put(score(1))
    idle.close()
    idle.close()
    idle.put(score(2))
    assert idle.flush() is True
    assert (idle.records_written, idle.dropped, idle.closed) == (1, 1, True)


def test_puts_from_many_threads_all_arrive_in_per_thread_order(path: Path) -> None:
    w = TraceWriter(path, frame_records=64, frame_interval=0.005)

    def work(t: int) -> None:
        for i in range(5000):
            w.put(Score(run=t, window=i, name="x", value=0.0))
            if i % 997 == 0:
                w.flush()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    records = read(path).records
    assert len(records) == 20_000
    for k in range(4):
        assert [r.window for r in records if r.run == k] == list(range(5000))


def test_put_blob_writes_each_hash_once(idle: TraceWriter, path: Path) -> None:
    idle.put_blob(b"h" * 32, b"data")
    idle.put_blob(b"h" * 32, b"data")
    idle.put_blob(b"g" * 32, b"other", "pool")
    idle.close()
    assert read(path).records == [Blob(hash=b"h" * 32, data=b"data"),
                                  Blob(hash=b"g" * 32, data=b"other", kind="pool")]


def test_put_blob_racing_threads_write_one_blob(idle: TraceWriter, path: Path) -> None:
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for i in range(200):
            idle.put_blob(i.to_bytes(32, "big"), b"x")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    idle.close()
    assert len(read(path).records) == 200


def test_large_records_are_split_into_frames_of_a_few_megabytes(path: Path) -> None:
    n = 1000
    sel = Selection(run=0, window=0, name="doc", step=0, owner="model", pool=bytes(32), n=n,
                    probs=os.urandom(8 * n), draws=os.urandom(8 * n), choice=0, n_zero=0,
                    generator="g")
    w = TraceWriter(path, frame_interval=3600)
    for _ in range(800):  # ~13 MB of vectors in one batch
        w.put(sel)
    w.put(score(1))
    w.close()
    frames = list(iter_frames(path))
    assert sum(len(f.records) for f in frames) == 801
    assert len(frames) >= 4
    assert max(f.payload_len for f in frames) <= writer_mod.FRAME_TARGET_CONTENT * 1.1


def test_fsync_flushes_and_syncs(idle: TraceWriter, path: Path) -> None:
    idle.put(score(1))
    assert idle.fsync() is True
    assert read(path).records == [score(1)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frame_records": 0}, r"`frame_records` must be an int >= 1; found 0"),
        ({"frame_records": 1.5}, r"`frame_records` must be an int >= 1; found 1.5"),
        ({"frame_interval": 0}, r"`frame_interval` must be a finite number of seconds > 0"),
        ({"frame_interval": float("nan")}, r"`frame_interval` must be a finite number"),
        ({"durability": "disk"},
         r"`durability` must be 'frame', 'window' or 'fsync'; found 'disk'"),
        ({"mode": "r"}, r"`mode` must be 'x' \(new trace\), 'a' .*found 'r'"),
        ({"on_full": "wait"}, r"`on_full` must be 'block' or 'drop'; found 'wait'"),
        ({"max_queue_bytes": 10}, r"`max_queue_bytes` must be an int >= 65536; found 10"),
        ({"close_timeout": 0}, r"`close_timeout` must be a finite number of seconds > 0"),
    ],
)
def test_invalid_options_raise_value_error_naming_the_parameter(
    path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TraceWriter(path, **kwargs)
    assert not path.exists()


# -- sharing ------------------------------------------------------------------------------


def test_shared_writer_is_reference_counted_per_path(tmp_path: Path) -> None:
    path = tmp_path / "shared.zst"
    outer = shared_writer(path, frame_interval=3600)
    inner = shared_writer(tmp_path / "." / "shared.zst", durability="window")
    assert inner is outer
    assert outer.durability == "window"  # any user asking for window durability gets it
    inner.put(score(1))
    release_writer(inner)
    assert not outer.closed
    outer.put(score(2))
    release_writer(outer)
    assert not outer.closed  # kept for this process's next use of the file...
    assert read(path).records == [score(1), score(2)]  # ...with its records written
    again = shared_writer(path, frame_interval=3600)  # the same options: the same writer
    assert again is outer
    release_writer(again)
    assert flush_all(timeout=5) and outer.closed


def test_flush_all_flushes_every_open_writer(tmp_path: Path) -> None:
    a = TraceWriter(tmp_path / "a.zst", frame_interval=3600)
    b = TraceWriter(tmp_path / "b.zst", frame_interval=3600)
    a.put(score(1))
    b.put(score(2))
    assert flush_all(timeout=5) is True
    assert (a.records_written, b.records_written) == (1, 1)
    a.close()
    b.close()


# -- failure policy -----------------------------------------------------------------------


def test_unwritable_path_warns_once_counts_drops_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    with pytest.warns(InstrumentationWarning, match="cannot open the trace file") as caught:
        w = TraceWriter(blocker / "t.zst")
        for i in range(5):
            w.put(score(i))
        w.put_blob(b"h" * 32, b"x")
        assert w.flush() is True
        w.cut_frame()
        w.close()
    assert len(caught) == 1
    assert (w.failed, w.dropped, w.records_written) == (True, 6, 0)


def test_shared_writer_on_an_unwritable_path_warns_and_is_not_kept(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(InstrumentationWarning):
        w = shared_writer(blocker / "t.zst")
    w.put(score(1))
    release_writer(w)
    assert w.dropped == 1


def test_a_device_is_refused_up_front(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(TracePathError, match=r"expected a regular file .*found a device"):
        TraceWriter("/dev/full", mode="w")


def test_write_failure_warns_once_keeps_earlier_frames_and_drops_the_rest(
    idle: TraceWriter, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idle.put(score(1))
    idle.flush()

    def disk_full(fd: int, parts: list[bytes]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(frames_mod, "_writev", disk_full)
    with pytest.warns(InstrumentationWarning, match="writing failed .*No space left") as caught:
        idle.put(score(2))
        assert idle.flush() is True
        idle.put(score(3))
        idle.flush()
        idle.cut_frame()
        idle.close()
    assert len(caught) == 1
    assert (idle.records_written, idle.dropped, idle.failed) == (1, 2, True)
    trace = read(path)
    assert trace.records == [score(1)] and not trace.truncated


def test_a_torn_write_is_cut_off_so_the_file_stays_valid(
    idle: TraceWriter, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idle.put(score(1))
    idle.flush()

    def short(fd: int, parts: list[bytes]) -> int:
        return os.write(fd, b"".join(parts)[:10])  # half a frame header reaches the disk

    def disk_full(fd: int, data: memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(frames_mod, "_writev", short)
    monkeypatch.setattr(frames_mod, "_write", disk_full)
    with pytest.warns(InstrumentationWarning):
        idle.put(score(2))
        idle.close()
    trace = read(path)
    assert trace.records == [score(1)]
    assert not trace.truncated  # the torn 10 bytes were truncated away


def test_unencodable_records_are_dropped_with_one_warning_and_the_rest_written(
    idle: TraceWriter, path: Path
) -> None:
    with pytest.warns(InstrumentationWarning, match="cannot be encoded") as caught:
        idle.put(score(1))
        idle.put(Score(run=2**70, window=0, name="x", value=0.0))  # beyond msgpack ints
        idle.put(score(2))
        idle.put(Score(run=0, window=0, name="\ud800", value=0.0))  # lone surrogate
        idle.put(score(3))
        idle.close()
    assert len(caught) == 1
    assert read(path).records == [score(1), score(2), score(3)]
    assert idle.dropped == 2


def test_objects_that_are_not_records_are_dropped_not_written(
    idle: TraceWriter, path: Path
) -> None:
    with pytest.warns(InstrumentationWarning, match="not trace records were put, e.g. dict"):
        idle.put(score(1))
        idle.put({"not": "a record"})  # type: ignore[arg-type]
        idle.close()
    assert read(path).records == [score(1)]
    assert idle.dropped == 1


def test_filling_a_real_tiny_filesystem_leaves_a_valid_trace(tmp_path: Path) -> None:
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                         capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        path = mnt / "t.zst"
        with pytest.warns(InstrumentationWarning, match="writing failed") as caught:
            w = TraceWriter(path, frame_records=100, frame_interval=3600)
            for i in range(20_000):
                w.put(Blob(hash=i.to_bytes(32, "big"), data=os.urandom(64)))
            w.close()
        assert len(caught) == 1
        trace = read(path)
        assert not trace.truncated
        assert trace.records_recovered == w.records_written > 0
        assert w.records_written + w.dropped == 20_000
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_runs_counts_are_its_records_in_the_file_whichever_path_counts_them(
    tmp_path: Path,
) -> None:
    # A batch of small records of the one open run is counted in bulk; a record of a run
    # this writer never opened, or a second open run, sends the batch through the loop.
    import agentlog as al
    from agentlog.records import Continuation, RunEnd, RunStart

    path = tmp_path / "one.zst"
    with al.record(path, seed=1) as run:
        for _ in range(5000):
            al.proceed(0.5, name="p")
        assert al.flush(timeout=10)  # the bulk path's batches
        run.writer.put(Continuation(run=99, window=-1, name="x", step=0, p=0.5, u=0.1,
                                    decision=True, t_ns=1))
        for _ in range(100):
            al.proceed(0.5, name="q")
        assert al.flush(timeout=10)  # that batch: no RunEnd in it, one foreign record
    (end,) = [r for r in read(path).records if isinstance(r, RunEnd)]
    assert end.n_continuations == 5100

    nested = tmp_path / "two.zst"
    with al.record(nested, seed=1):
        with al.record(nested, seed=2):
            for _ in range(300):
                al.proceed(0.5, name="inner")
        for _ in range(200):
            al.proceed(0.5, name="outer")
    trace = read(nested)
    seeds = {r.run: r.seed for r in trace.records if isinstance(r, RunStart)}
    counts = {seeds[r.run]: r.n_continuations for r in trace.records if isinstance(r, RunEnd)}
    assert counts == {2: 300, 1: 200}
    assert al.verify(nested).ok
