"""``verify`` names the cause of lost records from what the trace records (issue 30.15).

It used to say "I/O errors while recording" for any ``RunEnd.dropped`` and "the process
stopped" for any run without a RunEnd, so records dropped because the writer's queue was
full (``on_full="drop"``, or a put waiting ``full_timeout``) were blamed on a crash. What
a trace can show: a RunEnd written with ``dropped > 0`` means the writer was still writing
when the run ended (a write error, a full disk among them, stops the writer for good); a
stream whose steps skip numbers lost records before they reached the file (a crash or a
full disk only ever cuts the end of a run); a run that simply stops could be either a
crash or a writer that could not write any more, and the message says so.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import msgspec

import agentlog as al
from agentlog._digest import RunDigest, run_end_tail
from agentlog._noise import GENERATOR_ID, noise_seed, uniform
from agentlog._writer import TraceWriter
from agentlog.records import Continuation, RunEnd, RunStart, Score

SEED, TASK = 3, "q-1"


def write_run(path: Path, steps: list[int], *, dropped: int | None = None,
              counts: tuple[int, int, int] | None = None) -> Path:
    """A run of continuations at ``steps``; with ``dropped``, a RunEnd the writer seals
    (its digest, receipt and counts: ``counts`` overrides the counts)."""
    seed = noise_seed(SEED, TASK, GENERATOR_ID)
    with TraceWriter(path) as w:
        w.put(RunStart(run=0, run_id="d" * 32, system="s", seed=SEED, task=TASK, meta={},
                       t_ns=1, generator=GENERATOR_ID, agentlog_version="test", pid=4242))
        for step in steps:
            u = uniform(seed, "stop", step)
            w.put(Continuation(run=0, window=-1, name="stop", step=step, p=0.9, u=u,
                               decision=u < 0.9))
            w.put(Score(run=0, window=-1, name="f1", value=0.5))
        if dropped is not None:
            w.put(RunEnd(run=0, t_ns=2, status=0, receipt=b"", n_windows=0, n_selections=0,
                         n_continuations=0, dropped=dropped))
    if counts is not None:  # what a writer that lost records it had counted would write
        rewrite_run_end(path, counts)
    return path


def rewrite_run_end(path: Path, counts: tuple[int, int, int]) -> None:
    """Give the run's RunEnd other ``counts``, its digest recomputed to match."""
    records = list(al.iter_records(path))
    end = records.pop()
    assert isinstance(end, RunEnd)
    digest = RunDigest("d" * 32)
    with al.iter_frames(path, raw=True) as frames:
        for f in frames:
            if not isinstance(f.records[0], RunEnd) and f.payload is not None:
                digest.update(f.payload)
    tail = run_end_tail(0, end.t_ns, 0, end.receipt, *counts, end.dropped, None)
    with TraceWriter(path, mode="w") as w:
        for r in records:
            w.put(r)
        w.cut_frame()
        w.put(msgspec.structs.replace(end, n_windows=counts[0], n_selections=counts[1],
                                      n_continuations=counts[2],
                                      digest=digest.finish_bytes(tail)))


def messages(path: Path) -> dict[str, str]:
    return {p.kind: p.message for p in al.verify(path).problems}


def test_records_dropped_while_the_writer_kept_writing_are_named_backpressure(
    tmp_path: Path,
) -> None:
    path = write_run(tmp_path / "t.zst", list(range(5)), dropped=7)
    found = messages(path)
    assert list(found) == ["dropped"]
    assert found["dropped"].startswith(
        "7 record(s) were dropped while the run was recorded and are not in the file "
        "(RunEnd.dropped): the writer's queue was full (backpressure: on_full='drop', or a "
        "put waiting full_timeout) or a record could not be encoded")
    assert "no crash and no full disk cut the run" in found["dropped"]
    assert "I/O error" not in found["dropped"]


def test_counted_records_the_writer_could_not_write_are_named_so(tmp_path: Path) -> None:
    path = write_run(tmp_path / "t.zst", list(range(5)), dropped=1, counts=(0, 0, 6))
    found = messages(path)
    assert set(found) == {"counts", "dropped"}
    assert found["counts"].endswith("(0, 0, 5): the writer counted records it then could not "
                                    "write (RunEnd.dropped = 1: a record that could not be "
                                    "encoded, or over the frame limit)")
    assert "records the writer could not encode or fit in a frame" in found["dropped"]


def test_a_run_that_stops_after_skipped_steps_lost_its_records_to_backpressure(
    tmp_path: Path,
) -> None:
    path = write_run(tmp_path / "t.zst", [0, 1, 2, 5, 6, 9])
    message = messages(path)["run-not-ended"]
    assert message.startswith(f"run {'d' * 32} has no RunEnd record, and 4 step(s) of its "
                              "streams are missing between recorded ones: records of it were "
                              "dropped before they reached the file")
    assert "backpressure" in message and "never records inside it" in message


def test_a_run_that_simply_stops_names_a_crash_or_a_writer_that_could_not_write(
    tmp_path: Path,
) -> None:
    message = messages(write_run(tmp_path / "t.zst", list(range(4))))["run-not-ended"]
    assert "killed or crashed" in message
    assert "a full disk or an I/O error" in message and "InstrumentationWarning" in message


def test_a_recording_that_dropped_records_under_backpressure_says_so(tmp_path: Path) -> None:
    """A real writer, its queue bounded to 64 KB and ``on_full="drop"``: whether the
    RunEnd itself was dropped or not, verify names the full queue, not a crash."""
    path = tmp_path / "t.zst"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", al.InstrumentationWarning)
        with al.record(path, seed=1, task="t", on_full="drop", max_queue_bytes=64 << 10,
                       frame_interval=3600):
            for i in range(20_000):
                al.score("f1", i / 20_000)
                al.proceed(0.99, name="stop")
        al.flush()
    found = messages(path)
    assert "dropped" in found or "run-not-ended" in found, found
    assert all("backpressure" in m for k, m in found.items()
               if k in ("dropped", "run-not-ended")), found
