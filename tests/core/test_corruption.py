"""Truncated, corrupted and hostile trace files: a truncated tail is reported, anything
else is a TraceFormatError, and no damaged file ever yields a wrong record."""

from __future__ import annotations

import random
import struct
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard

from agentlog._errors import TraceFormatError
from agentlog._reader import iter_frames, read
from agentlog._trace_format import FILE_HEADER, FRAME_HEADER_SIZE, FRAME_PREFIX, MAX_FRAME_PAYLOAD
from agentlog._writer import TraceWriter
from agentlog.records import (
    Blob,
    Continuation,
    RunEnd,
    RunStart,
    Score,
    Selection,
    WindowEnter,
    WindowExit,
)

# A hang guard, not a speed claim: a hostile file read in a loop that never ends fails its
# test instead of stalling the run.
pytestmark = pytest.mark.timeout(120)


def small_trace_records() -> list[list[Any]]:
    """Four frames, about 2 KB on disk."""
    h = bytes(range(32))
    return [
        [RunStart(run=0, run_id="r" * 32, system="s", seed=1, task="t", meta={"a": [1, 2]},
                  t_ns=1, generator="g/1", agentlog_version="0.1.0"),
         WindowEnter(run=0, window=0, name="w", parent=-1, t_ns=2, entry_hash=h, entry=b"e")],
        [Selection(run=0, window=0, name="doc", step=i, owner="model", pool=h, n=4,
                   probs=struct.pack("<4d", 0.1, 0.2, 0.3, 0.4), draws=bytes(range(32)),
                   choice=i % 4, n_zero=0, generator="g/1") for i in range(3)],
        [Continuation(run=0, window=0, name="stop", step=i, p=0.5, u=i / 10, decision=i < 5)
         for i in range(10)]
        + [Blob(hash=h, data=random.Random(3).randbytes(1200))],
        [Score(run=0, window=0, name="f1", value=0.25),
         WindowExit(run=0, window=0, name="w", t_ns=3, status=0, exit_hash=h, exit=b"x",
                    receipt=h, wall_ns=1),
         RunEnd(run=0, t_ns=4, status=0, receipt=h, n_windows=1, n_selections=3,
                n_continuations=10)],
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[Any], list[int]]:
    """(file bytes, records, frame end offsets) of a small valid trace."""
    path = tmp_path_factory.mktemp("small") / "t.zst"
    w = TraceWriter(path, frame_interval=3600)
    for frame in small_trace_records():
        for r in frame:
            w.put(r)
        w.flush()
    w.close()
    data = path.read_bytes()
    records = [r for f in small_trace_records() for r in f]
    ends = [f.offset + FRAME_HEADER_SIZE + f.payload_len for f in iter_frames(path)]
    assert 1500 < len(data) < 4000 and len(ends) == 4
    return data, records, ends


def read_bytes(tmp_path: Path, data: bytes) -> Any:
    path = tmp_path / "probe.zst"
    path.write_bytes(data)
    return read(path)


def test_truncation_at_every_byte_offset_recovers_exactly_the_complete_frames(
    tmp_path: Path, small: tuple[bytes, list[Any], list[int]]
) -> None:
    data, records, ends = small
    counts = [0] + [len(f) for f in small_trace_records()]
    boundaries = [len(FILE_HEADER), *ends]
    for cut in range(len(data) + 1):
        trace = read_bytes(tmp_path, data[:cut])  # never raises
        complete = [i for i, end in enumerate(boundaries) if end <= cut]
        n = sum(counts[: complete[-1] + 1]) if complete else 0
        assert trace.records == records[:n], cut
        assert trace.truncated == (cut not in boundaries), cut
        good = boundaries[complete[-1]] if complete else 0
        assert trace.bytes_dropped == cut - good, cut
        assert trace.frames == (len(complete) - 1 if complete else 0)


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_a_flipped_byte_at_every_offset_is_detected_never_misread(
    tmp_path: Path, small: tuple[bytes, list[Any], list[int]], mask: int
) -> None:
    data, records, _ = small
    silent = []
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= mask
        try:
            trace = read_bytes(tmp_path, bytes(bad))
        except TraceFormatError as exc:
            assert exc.offset is not None and exc.offset <= i
            continue
        assert trace.records == records[: len(trace.records)], i
        if trace.records == records and not trace.truncated:
            silent.append(i)
    assert silent == []  # CRC32 catches every single-byte error


def test_seeded_random_damage_is_an_error_or_a_correct_prefix(
    tmp_path: Path, small: tuple[bytes, list[Any], list[int]]
) -> None:
    data, records, _ = small
    rng = random.Random(20240601)
    for _ in range(1500):
        bad = bytearray(data[: rng.randint(0, len(data))] if rng.random() < 0.3 else data)
        for _ in range(rng.randint(1, 8)):
            if bad:
                bad[rng.randrange(len(bad))] = rng.randrange(256)
        try:
            trace = read_bytes(tmp_path, bytes(bad))
        except TraceFormatError:
            continue
        assert trace.records == records[: len(trace.records)]


# -- hostile files ------------------------------------------------------------------------


def frame(payload: bytes, n: int, payload_len: int | None = None) -> bytes:
    size = len(payload) if payload_len is None else payload_len
    head = struct.pack("<III", size, n, zlib.crc32(payload))
    return FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + payload


def zframe(content: bytes, n: int) -> bytes:
    return frame(zstandard.ZstdCompressor(write_checksum=True).compress(content), n)


def bounded(tmp_path: Path, data: bytes, *, max_mib: float = 64) -> Any:
    """Read ``data``; assert it takes under ``max_mib`` MiB of Python memory."""
    tracemalloc.start()
    try:
        return read_bytes(tmp_path, data)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < max_mib * 2**20, peak


def test_random_bytes_are_not_an_agentlog_trace(tmp_path: Path) -> None:
    rng = random.Random(7)
    for n in [1, 7, 8, 100, 10_000]:
        with pytest.raises(TraceFormatError, match="not an agentlog trace"):
            bounded(tmp_path, b"\x00" + rng.randbytes(n))


def test_random_bytes_after_a_valid_header_are_an_error_or_a_truncation(tmp_path: Path) -> None:
    rng = random.Random(8)
    for _ in range(300):
        data = FILE_HEADER + rng.randbytes(rng.randint(0, 3000))
        try:
            trace = bounded(tmp_path, data)
        except TraceFormatError:
            continue
        assert trace.records == [] and (trace.truncated or len(data) == len(FILE_HEADER))


def test_a_huge_declared_payload_length_is_refused_without_allocating(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=f"over the {MAX_FRAME_PAYLOAD}-byte limit"):
        bounded(tmp_path, FILE_HEADER + frame(b"", 1, payload_len=0xFFFFFFFF), max_mib=1)


def test_a_large_declared_payload_in_a_short_file_is_a_truncation_without_allocating(
    tmp_path: Path,
) -> None:
    trace = bounded(tmp_path, FILE_HEADER + frame(b"abc", 1, payload_len=200 * 2**20), max_mib=1)
    assert trace.truncated and trace.bytes_dropped == FRAME_HEADER_SIZE + 3 and trace.records == []


def test_a_zstd_frame_declaring_a_huge_content_size_is_refused_before_decompressing(
    tmp_path: Path,
) -> None:
    fake = (b"\x28\xb5\x2f\xfd" + bytes([0b11000100]) + b"\x58" + struct.pack("<Q", 1 << 40)
            + b"\x01\x00\x00")
    with pytest.raises(TraceFormatError, match="declares 1099511627776 bytes of content"):
        bounded(tmp_path, FILE_HEADER + frame(fake, 1), max_mib=1)


def test_a_zstd_frame_lying_about_its_content_size_is_a_format_error(tmp_path: Path) -> None:
    real = zstandard.ZstdCompressor(write_checksum=True).compress(b"\x90")
    # Same frame, declared size 2 instead of 1 (the single-byte size field follows the
    # descriptor when the single-segment flag is set).
    params = zstandard.get_frame_parameters(real)
    assert params.content_size == 1
    lying = bytearray(real)
    lying[5] = 2
    with pytest.raises(TraceFormatError, match="does not decompress"):
        bounded(tmp_path, FILE_HEADER + frame(bytes(lying), 0))


def test_deeply_nested_msgpack_is_a_format_error_not_a_crash(tmp_path: Path) -> None:
    start = msgspec.msgpack.encode(
        [RunStart(run=0, run_id="r", system="s", seed=1, task=None, meta={}, t_ns=0,
                  generator="g", agentlog_version="v")]
    )
    nested_meta = start.replace(b"\x80", b"\x81\xa1x" + b"\x91" * 100_000 + b"\xc0", 1)
    with pytest.raises(TraceFormatError, match="RecursionError"):
        bounded(tmp_path, FILE_HEADER + zframe(nested_meta, 1))
    with pytest.raises(TraceFormatError, match="does not match the record schema"):
        bounded(tmp_path, FILE_HEADER + zframe(b"\x91" * 100_000 + b"\xc0", 1))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xdd\xff\xff\xff\xff", "Input data was truncated"),  # array of 4 billion
        (b"\x91\xdd\xff\xff\xff\xff", "truncated"),
        (b"\x91\xc6\xff\xff\xff\xff", "truncated"),  # bin of 4 GiB
        (b"\xc1", "malformed"),
        (b"\x91\x95\x08\x00\x00\xa2\xff\xfe\xcb" + bytes(8), "Invalid UTF-8"),
        (msgspec.msgpack.encode([[8, 0, 0, "x", 1.0]]) + b"\x00", "trailing"),
        (msgspec.msgpack.encode({"not": "a list"}), "Expected `array`, got `object`"),
        (msgspec.msgpack.encode([[8, "zero", 0, "x", 1.0]]), "Expected `int`, got `str`"),
        (msgspec.msgpack.encode([[8, 0, 0]]), "Expected `array` of at least length"),
        (msgspec.msgpack.encode([[99, 0]]), "unknown record tag 99"),
        (msgspec.msgpack.encode([["Score", 0]]), "Expected `int`, got `str`"),
        (msgspec.msgpack.encode([[8, 2**64 - 1, 0, "x", 1.0]]), None),
    ],
)
def test_hostile_record_content_is_a_format_error(
    tmp_path: Path, content: bytes, message: str | None
) -> None:
    data = FILE_HEADER + zframe(content, 1)
    if message is None:  # a valid record: uint64 fields are fine
        assert len(bounded(tmp_path, data).records) == 1
        return
    with pytest.raises(TraceFormatError, match=message) as info:
        bounded(tmp_path, data)
    assert info.value.offset == len(FILE_HEADER)


def test_msgpack_extension_types_decode_as_inert_values_never_code(tmp_path: Path) -> None:
    ext = msgspec.msgpack.Ext(42, b"__import__('os').system('false')")
    start = RunStart(run=0, run_id="r", system="s", seed=1, task=None, meta={"e": ext},
                     t_ns=0, generator="g", agentlog_version="v")
    trace = bounded(tmp_path, FILE_HEADER + zframe(msgspec.msgpack.encode([start]), 1))
    assert trace.records[0].meta["e"] == ext


def test_errors_after_good_frames_name_the_offset_of_the_bad_frame(
    tmp_path: Path, small: tuple[bytes, list[Any], list[int]]
) -> None:
    data, _, ends = small
    bad = bytearray(data)
    bad[ends[1] + FRAME_HEADER_SIZE + 4] ^= 0x55  # inside the third frame's payload
    with pytest.raises(TraceFormatError, match=f"byte offset {ends[1]}: frame payload checksum"):
        read_bytes(tmp_path, bytes(bad))
