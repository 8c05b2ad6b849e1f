"""Hostile trace files: every one is rejected or reported, in bounded memory.

Each file here is small (a few KB) and built to cost a naive reader gigabytes or
minutes: record and byte bombs, huge declared lengths, deep nesting, sparse zero
tails, empty frames, runless files. Memory is measured with ``tracemalloc`` (the
decoded records and buffers are Python allocations), never with a clock; the
wall-clock and peak-RSS acceptance check of the same files is
``tests/benchmarks/bench_hostile_files.py``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentlog as al
from agentlog._trace_format import (
    FILE_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_PREFIX,
    MAX_FRAME_RECORDS,
    FrameEncoder,
    ReadLimits,
)

MiB = 1 << 20
PEAK_LIMIT = 96 * MiB  # what reading or verifying one hostile file may allocate

_TINY_SCORE = msgspec.msgpack.encode([8, 0, 0, "", 0])  # 6 bytes: the smallest record


def _frame(content: bytes, n: int, level: int = 19) -> bytes:
    return FrameEncoder(level=level).encode_raw(content, n)


def _array(n: int) -> bytes:
    return b"\xdd" + struct.pack(">I", n)


def _record_bomb_frame(n: int) -> bytes:
    return _frame(_array(n) + _TINY_SCORE * n, n)


@pytest.fixture
def peak() -> Iterator[Callable[[], int]]:
    tracemalloc.start()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _write(path: Path, *frames: bytes) -> Path:
    path.write_bytes(FILE_HEADER + b"".join(frames))
    if tracemalloc.is_tracing():  # count what reading costs, not what building the file did
        tracemalloc.reset_peak()
    return path


def _rejected(fn: Callable[[], Any], match: str) -> None:
    with pytest.raises(al.TraceFormatError, match=match):
        fn()


# -- record and byte bombs --------------------------------------------------------------


def test_a_6_kb_record_bomb_is_rejected_before_its_records_are_decoded(
    tmp_path: Path, peak: Callable[[], int]
) -> None:
    """31 frames of 262,144 six-byte records compress to ~6 KB (8 M records)."""
    path = _write(tmp_path / "bomb.zst", *[_record_bomb_frame(MAX_FRAME_RECORDS)] * 31)
    assert path.stat().st_size < 8_000
    _rejected(lambda: al.read(path), r"records per compressed byte .* record bomb")
    _rejected(lambda: list(al.iter_records(path)), "record bomb")
    _rejected(lambda: al.verify(path), "record bomb")
    assert peak() < PEAK_LIMIT


def test_a_record_bomb_under_the_floor_per_frame_is_stopped_by_the_file_ratio(
    tmp_path: Path, peak: Callable[[], int]
) -> None:
    """Frames of 60,000 records each pass the floor alone; together they exceed it."""
    path = _write(tmp_path / "bomb.zst", *[_record_bomb_frame(60_000)] * 40)
    _rejected(lambda: al.read(path), "record bomb")
    assert peak() < PEAK_LIMIT


def test_a_frame_declaring_millions_of_records_is_rejected_at_its_header(
    tmp_path: Path, peak: Callable[[], int]
) -> None:
    n = 11_200_000
    path = _write(tmp_path / "declared.zst", _record_bomb_frame(n))
    _rejected(lambda: al.read(path), f"frame declares {n} records, over the 262144")
    assert peak() < PEAK_LIMIT


def test_a_byte_bomb_blob_is_rejected_before_it_is_decompressed(
    tmp_path: Path, peak: Callable[[], int]
) -> None:
    """A 400 MB Blob of zeros in a ~13 KB frame."""
    zeros = bytes(400 * MiB)
    content = msgspec.msgpack.encode([[9, hashlib.sha256(zeros).digest(), zeros, "artifact"]])
    frame = _frame(content, 1, level=1)
    del zeros, content
    path = _write(tmp_path / "zeros.zst", frame)
    assert path.stat().st_size < 64_000
    _rejected(lambda: al.read(path), r"ratio over the 1024 .* compression bomb")
    assert peak() < PEAK_LIMIT


def test_the_limits_can_be_raised_for_a_trusted_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "many.zst", _record_bomb_frame(100_000))
    _rejected(lambda: al.read(path), r"al\.ReadLimits\(max_records_per_byte=\.\.\.\)")
    trusted = al.read(path, limits=ReadLimits(max_records_per_byte=1e6))
    assert len(trusted.records) == 100_000


def test_the_writer_never_cuts_a_frame_the_reader_refuses(tmp_path: Path) -> None:
    from agentlog._writer import TraceWriter
    from agentlog.records import Score

    path = tmp_path / "big-frames.zst"
    with TraceWriter(path, frame_records=MAX_FRAME_RECORDS + 10, frame_interval=3600) as w:
        for i in range(MAX_FRAME_RECORDS + 10):
            w.put(Score(run=0, window=-1, name="s", value=float(i), t_ns=i * 7919))
    with al.iter_frames(path) as frames:
        sizes = [len(f.records) for f in frames]
    assert max(sizes) <= MAX_FRAME_RECORDS and sum(sizes) == MAX_FRAME_RECORDS + 10


# -- declared lengths, nesting, ext values ----------------------------------------------


def test_a_huge_declared_payload_in_a_short_file_reads_as_truncation(tmp_path: Path) -> None:
    head = struct.pack("<III", 200 * MiB, 1, 0)
    import zlib

    path = _write(tmp_path / "long.zst",
                  FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + b"x" * 64)
    trace = al.read(path)
    assert trace.truncated and trace.records == []


def test_a_record_nested_100_000_deep_is_a_format_error(tmp_path: Path) -> None:
    deep = msgspec.Raw(b"\x91" * 100_000 + b"\x00")
    content = msgspec.msgpack.encode([[1, 0, "r" * 32, "s", 0, None, {"a": deep}, 0, "g", "0"]])
    path = _write(tmp_path / "deep.zst", _frame(content, 1))
    _rejected(lambda: al.read(path), "RecursionError")
    _rejected(lambda: al.verify(path), "RecursionError")


# -- sparse zero tails -------------------------------------------------------------------


def _holes_supported(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 0, os.SEEK_DATA)
        size = os.fstat(fd).st_size
        os.lseek(fd, size - 1, os.SEEK_DATA)
    except OSError as exc:
        return exc.errno == errno.ENXIO
    finally:
        os.close(fd)
    return False


def test_a_10_gib_sparse_zero_tail_is_found_by_seeking_not_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sparse.zst"
    with al.record(path, seed=1):
        al.score("f1", 0.5)
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    good = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(good + 10 * (1 << 30))
    if not hasattr(os, "SEEK_DATA") or not _holes_supported(path):
        pytest.skip("this filesystem does not report holes")
    read_bytes = [0]
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        read_bytes[0] += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    trace = al.read(path)
    assert trace.truncated and trace.bytes_dropped == 10 * (1 << 30)
    assert [type(r).__name__ for r in trace.records] == ["RunStart", "Score", "RunEnd"]
    assert read_bytes[0] < MiB  # the 10 GiB hole itself was never read


def test_data_inside_a_zero_tail_is_still_found(tmp_path: Path) -> None:
    path = tmp_path / "sparse.zst"
    with al.record(path, seed=1):
        al.score("f1", 0.5)
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    good = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(good + 64 * MiB)
        f.seek(good + 40 * MiB)
        f.write(b"\x01")
    with pytest.raises(al.TraceFormatError, match="expected a frame header here"):
        al.read(path)


# -- files without runs, empty frames ---------------------------------------------------


def _problems(path: Path, **kw: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in al.verify(path, **kw).problems:
        out.setdefault(p.kind, []).append(p.message)
    return out


def test_a_header_only_file_has_no_run_and_fails_verify(tmp_path: Path) -> None:
    path = _write(tmp_path / "header.zst")
    report = al.verify(path)
    assert not report.ok
    assert list(_problems(path)) == ["no-runs"]
    assert "header only" in report.problems[0].message


def test_many_empty_frames_are_reported(tmp_path: Path, peak: Callable[[], int]) -> None:
    empty = _frame(_array(0), 0)
    path = _write(tmp_path / "empty.zst", *[empty] * 20_000)
    problems = _problems(path)
    assert set(problems) == {"no-runs", "empty-frames"}
    assert problems["empty-frames"][0].startswith("20000 frame(s) hold no record")
    assert peak() < PEAK_LIMIT


def test_records_outside_any_run_are_problems_and_are_listed_in_bounded_number(
    tmp_path: Path, peak: Callable[[], int]
) -> None:
    n = 5_000
    rec = msgspec.msgpack.encode([8, 3, 0, "f1", 0.5, None, None, None, None, None, 12345])
    path = _write(tmp_path / "scores.zst", _frame(_array(n) + rec * n, n, level=1))
    report = al.verify(path)
    kinds = [p.kind for p in report.problems]
    assert kinds.count("orphan-record") == 101 and "no-runs" in kinds
    assert report.problems[-1].message.startswith("… and 4900 more 'orphan-record' problems")
    assert "never started: it lies outside any run" in report.problems[0].message
    assert peak() < PEAK_LIMIT


def test_a_record_after_its_runs_end_lies_outside_the_run(tmp_path: Path) -> None:
    from agentlog._trace_format import encode_frame
    from agentlog.records import Score

    path = tmp_path / "late.zst"
    with al.record(path, seed=1):
        al.score("f1", 0.5)
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    with path.open("ab") as f:  # one more frame, after the RunEnd
        f.write(encode_frame([Score(run=0, window=-1, name="late", value=1.0)]))
    assert _problems(path) == {"orphan-record": [
        "record of run 0 comes after the run's RunEnd: it lies outside the run"]}


def test_a_repeated_empty_frame_with_a_wrong_payload_crc_is_still_caught(tmp_path: Path) -> None:
    import zlib

    empty = _frame(_array(0), 0)
    payload = empty[FRAME_HEADER_SIZE:]
    head = struct.pack("<III", len(payload), 0, zlib.crc32(payload) ^ 1)
    bad = FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + payload
    path = _write(tmp_path / "empty.zst", empty, empty, bad)
    with pytest.raises(al.TraceFormatError, match="frame payload checksum mismatch"):
        al.read(path)
