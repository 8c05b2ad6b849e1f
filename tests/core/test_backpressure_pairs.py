"""Under backpressure a full queue drops records, but never what makes the rest readable.

A run's ``RunEnd`` (with ``RunEnd.dropped``, the count of what was dropped) is always
written, and a window's exit is dropped exactly when its entry was: a reader never sees an
exit without its entry, nor an entry whose window returned without its exit. Before, the
``RunEnd`` itself was dropped when the queue was full as the run ended (``verify`` then
reported a crash and the count never reached the file), and with ``on_full="drop"`` a
window whose entry was dropped could have its exit kept once the queue had drained.

The storage is simulated by a ``_writev`` that blocks while a gate is closed, so where the
queue is full is decided by the test, not by this machine's speed (a test about the
writer's private seam).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentlog as al
import agentlog._writer.frames as frames_mod
from agentlog.records import RunEnd, RunStart, WindowEnter, WindowExit


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Frames wait in the OS write while the returned event is clear."""
    opened = threading.Event()
    opened.set()
    real = frames_mod._writev

    def gated(fd: int, parts: list[bytes]) -> int:
        opened.wait(30)
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", gated)
    _gates.append(opened)
    yield opened
    opened.set()
    _gates.remove(opened)


@al.window("step")
def step(i: int) -> int:
    al.score("i", float(i))
    return i


_gates: list[threading.Event] = []


@al.window("drains")
def drains() -> int:
    # Entered while the queue is full (its entry dropped); the writer catches up before
    # it returns, so its exit would find room.
    _gates[-1].set()
    assert al.flush(timeout=10)
    return 0


def _fill(gate: threading.Event) -> int:
    """Stall the writer and record windows until the queue drops records."""
    gate.clear()
    writer = al.current_run().writer  # type: ignore[union-attr]
    before = writer.dropped
    for i in range(200_000):
        step(i)
        if writer.dropped > before:
            return i
    raise AssertionError("the queue never filled")


@pytest.mark.parametrize("on_full", ["drop", "block"])
def test_a_full_queue_keeps_the_run_end_and_window_pairs(
        tmp_path: Path, gate: threading.Event, on_full: str) -> None:
    out = tmp_path / "t.zst"
    with pytest.warns(al.InstrumentationWarning, match=r"queue|keep up"):
        with al.record(out, max_queue_bytes=1 << 16, on_full=on_full) as run:  # type: ignore[arg-type]
            _fill(gate)
            drains()  # entry dropped, exit would fit: both dropped
            _fill(gate)  # the run ends while the queue is full
        writer_dropped = run.writer.dropped
        gate.set()
        assert al.flush(timeout=30)
    records = al.read(out).records
    assert len([r for r in records if type(r) is RunStart]) == 1
    (end,) = [r for r in records if type(r) is RunEnd]
    assert end.dropped == writer_dropped > 0
    entered = {(r.run, r.window) for r in records if type(r) is WindowEnter}
    exited = [(r.run, r.window) for r in records if type(r) is WindowExit]
    assert len(exited) == len(set(exited))
    assert set(exited) == entered  # every window here returned: kept whole or not at all
    assert "drains" not in {r.name for r in records if type(r) is WindowExit}
    report = al.verify(out)
    kinds = {p.kind for p in report.problems}
    assert not kinds & {"run-not-ended", "exit-without-enter", "window-not-closed",
                        "orphan-record"}, report.problems
    assert not report.ok  # the drops are reported, from RunEnd.dropped


def test_records_put_meanwhile_take_the_short_path_again_once_the_pairs_are_closed(
        tmp_path: Path, gate: threading.Event) -> None:
    with pytest.warns(al.InstrumentationWarning, match=r"queue"):
        with al.record(tmp_path / "t.zst", max_queue_bytes=1 << 16, on_full="drop") as run:
            writer = run.writer
            _fill(gate)
            drains()
            assert not writer._dropped_windows
            assert writer._wake_before >= 0  # the short path is open again
        gate.set()
        al.flush()


def test_a_blob_the_full_queue_dropped_is_put_again_by_its_next_user(
        tmp_path: Path, gate: threading.Event) -> None:
    import hashlib

    from agentlog._writer import TraceWriter
    from agentlog.records import Blob, Score

    w = TraceWriter(tmp_path / "t.zst", max_queue_bytes=1 << 16, on_full="drop")
    data = b"pool" * 64
    h = hashlib.sha256(data).digest()
    with pytest.warns(al.InstrumentationWarning, match=r"queue"):
        gate.clear()
        for i in range(100_000):
            w.put(Score(run=0, window=-1, name="f", value=float(i)))
            if w.dropped:
                break
        w.put_blob(h, data, "pool")  # dropped: the queue is full
        gate.set()
        assert w.flush(timeout=30)
        w.put_blob(h, data, "pool")  # a later selection of the same pool
        w.close()
    blobs = [r for r in al.read(tmp_path / "t.zst").records if type(r) is Blob]
    assert [b.hash for b in blobs] == [h]
