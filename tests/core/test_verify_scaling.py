"""``verify`` is linear in what a frame holds (issue 30.3).

A RunEnd's digest takes the run's records that come before it in its own frame. That list
was made by scanning every earlier record of the frame at each RunEnd: quadratic in the
runs that end inside one frame (4,096 runs took 3 s, 32,768 runs 101 s, so 100,000 runs
about 15 minutes). The file here is written with the library's frame encoder (one frame,
no writer), so that 100,000 runs cost a second to build.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentlog as al
from agentlog._digest import RunDigest, run_end_tail
from agentlog._noise import GENERATOR_ID
from agentlog._state import receipt_genesis
from agentlog._trace_format import FILE_HEADER, FrameEncoder
from agentlog.records import RunEnd, RunStart, Score


def runs_in_one_frame(n: int) -> list[msgspec.Struct]:
    """``n`` runs of a RunStart and a RunEnd each, with their digests and receipts right."""
    records: list[msgspec.Struct] = []
    for run in range(n):
        run_id = uuid.UUID(int=run + 1).hex
        start = RunStart(run=run, run_id=run_id, system="scale", seed=run, task=None, meta={},
                         t_ns=run, generator=GENERATOR_ID, agentlog_version="test")
        digest = RunDigest(run_id)
        digest.update(msgspec.msgpack.encode(start))  # its record before the RunEnd
        receipt = receipt_genesis(run_id)
        tail = run_end_tail(run, run + 1, 0, receipt, 0, 0, 0, 0, None)
        records += [start, RunEnd(run=run, t_ns=run + 1, status=0, receipt=receipt,
                                  n_windows=0, n_selections=0, n_continuations=0,
                                  digest=digest.finish_bytes(tail))]
    return records


def write_runs_in_one_frame(path: Path, n: int) -> Path:
    path.write_bytes(FILE_HEADER + FrameEncoder().encode(runs_in_one_frame(n)))
    return path


def test_a_small_file_of_runs_ending_in_one_frame_verifies(tmp_path: Path) -> None:
    report = al.verify(write_runs_in_one_frame(tmp_path / "t.zst", 3))
    assert report.ok and report.frames == 1
    assert (report.runs, report.checked["digests"]) == (3, 3)


@pytest.mark.timeout(60)  # the quadratic scan needed ~15 minutes; this takes a few seconds
def test_100_000_runs_ending_in_one_frame_verify_in_linear_time(tmp_path: Path) -> None:
    path = write_runs_in_one_frame(tmp_path / "t.zst", 100_000)
    with al.iter_frames(path) as frames:
        assert [len(f.records) for f in frames] == [200_000]
    report = al.verify(path)
    assert report.ok, report.problems[:3]
    assert (report.runs, report.checked["digests"]) == (100_000, 100_000)


def test_a_record_slipped_before_a_runend_in_its_frame_still_breaks_that_digest(
    tmp_path: Path,
) -> None:
    """The positions kept per run give the RunEnd exactly its own records: one more Score
    of run 1 before its RunEnd breaks run 1's digest and no other."""
    records = runs_in_one_frame(3)
    records.insert(3, Score(run=1, window=-1, name="f1", value=1.0))  # start1, score, end1
    path = tmp_path / "t.zst"
    path.write_bytes(FILE_HEADER + FrameEncoder().encode(records))
    report = al.verify(path)
    assert [(p.kind, p.run) for p in report.problems] == [("digest", 1)]


def test_a_pool_evicted_from_the_bounded_cache_is_read_back_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About a private piece (``agentlog._verify.batch.Pools``): with room for a few pools
    only, a pool used again after 40 others is read back from its frame, and its draws
    still check; an edited draw of it is still found."""
    from agentlog._verify import batch as _verify_batch
    from agentlog.records import Selection

    monkeypatch.setattr(_verify_batch, "POOL_KEYS_BYTES", 4_000)
    monkeypatch.setattr(_verify_batch, "POOL_DATA_BYTES", 4_000)
    reads: list[int] = []
    real_read_frame = _verify_batch.read_frame

    def counting_read_frame(*args: object, **kw: object) -> list[object]:
        reads.append(1)
        return real_read_frame(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_verify_batch, "read_frame", counting_read_frame)
    path = tmp_path / "t.zst"
    first = [f"first-{j}" for j in range(50)]
    with al.record(path, seed=1, task="t", frame_interval=3600):
        al.select([1 / 50] * 50, candidates=first, name="doc")
        for k in range(40):
            al.select([0.5, 0.5], candidates=[f"{k}-a", f"{k}-b"], name="doc")
            al.flush()
        al.select([1 / 50] * 50, candidates=first, name="doc")
    report = al.verify(path)
    assert report.ok and report.checked["selections"] == 42 and reads

    def edit_last_draw(r: Any) -> Any:
        if isinstance(r, Selection) and r.step == 41:
            return msgspec.structs.replace(r, draws=b"\0" * 8 + r.draws[8:])
        return r

    encoder = FrameEncoder()
    with al.iter_frames(path) as frames:
        body = b"".join(encoder.encode([edit_last_draw(r) for r in f.records]) for f in frames)
    edited = tmp_path / "edited.zst"
    edited.write_bytes(FILE_HEADER + body)
    assert [p.kind for p in al.verify(edited).problems][:1] == ["draws"]
