"""The trace layout (version 2, a valid zstd stream; version 1 read back): file header,
frame header, zstd payload, records."""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path

import msgspec
import numpy as np
import pytest
import zstandard

from agentlog._errors import TraceFormatError
from agentlog._reader import iter_frames, read
from agentlog._trace_format import (
    FILE_HEADER,
    FORMAT_VERSION,
    FRAME_HEADER_SIZE,
    FRAME_PREFIX,
    MAGIC,
    MAX_FRAME_CONTENT,
    MAX_FRAME_PAYLOAD,
    ZSTD_LEVEL_BULK,
    FrameDecoder,
    FrameEncoder,
    check_file_header,
    decode_frame,
    encode_frame,
    encode_frame_raw,
    parse_frame_header,
)
from agentlog.records import (
    Blob,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)

GOLDEN = Path(__file__).parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"

SCORES = [Score(run=0, window=i, name="f1", value=i / 3) for i in range(5)]


def frame_from_payload(payload: bytes, n_records: int) -> bytes:
    """A frame with valid CRCs around an arbitrary payload."""
    head = struct.pack("<III", len(payload), n_records, zlib.crc32(payload))
    return FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + payload


def zstd(content: bytes, *, write_checksum: bool = True, write_content_size: bool = True) -> bytes:
    return zstandard.ZstdCompressor(
        level=1, write_checksum=write_checksum, write_content_size=write_content_size
    ).compress(content)


def test_file_header_is_a_skippable_zstd_frame_of_the_magic_and_version() -> None:
    assert MAGIC == b"AGNTLOG"
    assert FORMAT_VERSION == 2
    # zstd's skippable frame: a magic number in 0x184D2A50..5F, the length, the data.
    assert struct.pack("<II", 0x184D2A5A, 8) + b"AGNTLOG\x02" == FILE_HEADER


def test_frame_header_is_a_skippable_frame_of_length_count_and_two_crcs() -> None:
    frame = encode_frame(SCORES)
    assert FRAME_HEADER_SIZE == 24
    assert frame[:8] == FRAME_PREFIX == struct.pack("<II", 0x184D2A5B, 16)
    payload_len, n, payload_crc, header_crc = struct.unpack("<IIII", frame[8:24])
    payload = frame[24:]
    assert payload_len == len(payload)
    assert n == len(SCORES)
    assert payload_crc == zlib.crc32(payload)
    assert header_crc == zlib.crc32(frame[8:20])


def test_frame_payload_is_one_zstd_frame_with_content_size_and_checksum() -> None:
    payload = encode_frame(SCORES)[FRAME_HEADER_SIZE:]
    params = zstandard.get_frame_parameters(payload)
    assert params.has_checksum
    content = zstandard.ZstdDecompressor().decompress(payload)
    assert params.content_size == len(content)
    assert msgspec.msgpack.decode(content) == [[8, *msgspec.structs.astuple(s)] for s in SCORES]


def test_records_are_msgpack_arrays_led_by_their_integer_tag() -> None:
    content = zstandard.ZstdDecompressor().decompress(encode_frame([SCORES[1]])[FRAME_HEADER_SIZE:])
    assert msgspec.msgpack.decode(content) == [[8, 0, 1, "f1", 1 / 3, None, None, None, None,
                                                None, 0]]


def test_encode_frame_raw_wraps_msgpack_encoded_elsewhere() -> None:
    content = msgspec.msgpack.encode(SCORES)
    assert decode_frame(encode_frame_raw(content, len(SCORES))) == SCORES


def test_frames_of_large_records_use_the_fast_level_and_decode_the_same() -> None:
    big = [Blob(hash=bytes(32), data=bytes(range(256)) * 64) for _ in range(4)]
    assert decode_frame(FrameEncoder().encode(big)) == big
    assert decode_frame(FrameEncoder(level=3).encode(big)) == big


def test_empty_frame_round_trips() -> None:
    assert decode_frame(encode_frame([])) == []


@pytest.mark.parametrize("head", [b"", b"A", b"AGNT", b"AGNTLOG", FILE_HEADER[:1],
                                  FILE_HEADER[:4], FILE_HEADER[:8], FILE_HEADER[:15]])
def test_a_prefix_of_the_file_header_reads_as_a_truncated_header(head: bytes) -> None:
    assert check_file_header(head) is None


def test_both_layouts_name_their_version() -> None:
    assert check_file_header(FILE_HEADER) == 2
    assert check_file_header(b"AGNTLOG\x01" + bytes(8)) == 1


@pytest.mark.parametrize("head", [b"X", b"PK\x03\x04", b"AGNTLOX\x01", b"\x28\xb5\x2f\xfd\x00",
                                  FILE_HEADER[:8] + b"AGNTLOX\x02"])
def test_a_file_not_starting_with_the_magic_is_not_an_agentlog_trace(head: bytes) -> None:
    with pytest.raises(TraceFormatError, match="not an agentlog trace") as info:
        check_file_header(head, path="x.zst")
    assert info.value.offset == 0
    assert info.value.path == "x.zst"


def test_a_newer_format_version_asks_to_upgrade() -> None:
    with pytest.raises(TraceFormatError, match=r"version 3 was written by a newer agentlog.*upgr"):
        check_file_header(FILE_HEADER[:-1] + b"\x03")


@pytest.mark.parametrize("head", [MAGIC + b"\x02", FILE_HEADER[:-1] + b"\x01"])
def test_a_version_in_the_other_versions_layout_is_a_corrupted_header(head: bytes) -> None:
    with pytest.raises(TraceFormatError, match="the file header is corrupted"):
        check_file_header(head)


def test_format_version_zero_is_refused() -> None:
    with pytest.raises(TraceFormatError, match="found 0"):
        check_file_header(MAGIC + b"\x00")


def test_frame_header_crc_mismatch_names_both_crcs_and_the_offset() -> None:
    head = bytearray(encode_frame(SCORES)[:FRAME_HEADER_SIZE])
    head[12] ^= 1
    with pytest.raises(TraceFormatError, match=r"frame header checksum mismatch.*0x") as info:
        parse_frame_header(bytes(head), path="t.zst", offset=123)
    assert info.value.offset == 123
    assert "t.zst, byte offset 123" in str(info.value)


def test_a_frame_header_without_its_skippable_frame_wrapper_is_corruption() -> None:
    head = bytearray(encode_frame(SCORES)[:FRAME_HEADER_SIZE])
    head[0] ^= 1
    with pytest.raises(TraceFormatError, match="expected a frame header here") as info:
        parse_frame_header(bytes(head), path="t.zst", offset=77)
    assert info.value.offset == 77


def test_a_version_1_frame_header_is_the_bare_16_bytes() -> None:
    frame = FrameEncoder(version=1).encode(SCORES)
    header = parse_frame_header(frame[:16], version=1)
    assert (header.payload_len, header.n_records) == (len(frame) - 16, len(SCORES))
    assert FrameDecoder().decode_payload(frame[16:], header) == SCORES


def test_payload_length_over_the_limit_is_refused_before_reading() -> None:
    head = struct.pack("<III", MAX_FRAME_PAYLOAD + 1, 1, 0)
    with pytest.raises(TraceFormatError, match=r"over the .*-byte limit"):
        parse_frame_header(FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)))


def test_payload_crc_mismatch_is_a_format_error() -> None:
    frame = bytearray(encode_frame(SCORES))
    frame[-1] ^= 0x80
    with pytest.raises(TraceFormatError, match="payload checksum mismatch"):
        decode_frame(bytes(frame))


def test_zstd_frame_without_declared_content_size_is_refused() -> None:
    payload = zstd(msgspec.msgpack.encode(SCORES), write_content_size=False)
    with pytest.raises(TraceFormatError, match="does not declare its content size"):
        decode_frame(frame_from_payload(payload, len(SCORES)))


def test_zstd_frame_without_content_checksum_is_refused() -> None:
    payload = zstd(msgspec.msgpack.encode(SCORES), write_checksum=False)
    with pytest.raises(TraceFormatError, match="no content checksum"):
        decode_frame(frame_from_payload(payload, len(SCORES)))


def test_declared_content_size_over_the_limit_is_refused_before_decompressing() -> None:
    # A zstd frame header by hand: magic, descriptor with an 8-byte content size
    # and the checksum flag, window descriptor, then the (huge) size and one empty block.
    huge = 1 << 40
    payload = (b"\x28\xb5\x2f\xfd" + bytes([0b11000100]) + b"\x58"
               + struct.pack("<Q", huge) + b"\x01\x00\x00")
    assert zstandard.get_frame_parameters(payload).content_size == huge
    with pytest.raises(TraceFormatError, match=f"declares {huge} bytes of content, over the "
                                               f"{MAX_FRAME_CONTENT}-byte limit"):
        decode_frame(frame_from_payload(payload, 1))


def test_payload_that_is_not_zstd_is_a_format_error() -> None:
    with pytest.raises(TraceFormatError, match="expected a zstd frame"):
        decode_frame(frame_from_payload(b"not zstd at all", 1))


def test_data_after_the_zstd_frame_inside_a_payload_is_refused() -> None:
    payload = zstd(msgspec.msgpack.encode(SCORES)) + b"extra"
    with pytest.raises(TraceFormatError, match="does not decompress"):
        decode_frame(frame_from_payload(payload, len(SCORES)))


def test_record_count_different_from_the_header_is_a_format_error() -> None:
    payload = zstd(msgspec.msgpack.encode(SCORES))
    with pytest.raises(TraceFormatError, match="declares 4 records, the frame holds 5"):
        decode_frame(frame_from_payload(payload, 4))


def test_unknown_record_tag_is_named_in_the_error() -> None:
    content = msgspec.msgpack.encode([[8, 0, 1, "f1", 0.5], [11, 0, 1]])
    with pytest.raises(TraceFormatError, match=r"record 1 of the frame has unknown record tag 11 "
                                               r"\(this agentlog knows tags 1, 2, .*10\)"):
        decode_frame(frame_from_payload(zstd(content), 2))


def test_wrong_field_type_is_a_schema_error_naming_the_record() -> None:
    content = msgspec.msgpack.encode([[8, 0, 1, "f1", "not a float"]])
    with pytest.raises(TraceFormatError, match=r"record 0 of the frame does not match the record "
                                               r"schema: Expected `float`, got `str`"):
        decode_frame(frame_from_payload(zstd(content), 1))


def test_frame_decoder_is_reusable_after_an_error() -> None:
    dec = FrameDecoder()
    good = encode_frame(SCORES)
    header = parse_frame_header(good[:FRAME_HEADER_SIZE])
    with pytest.raises(TraceFormatError):
        dec.decode_content(b"\xc1", 1)
    assert dec.decode_payload(good[FRAME_HEADER_SIZE:], header) == SCORES


def test_decode_frame_needs_exactly_one_frame() -> None:
    frame = encode_frame(SCORES)
    with pytest.raises(TraceFormatError, match="24-byte frame header, found 3 bytes"):
        decode_frame(frame[:3])
    with pytest.raises(TraceFormatError, match="-byte frame payload, found"):
        decode_frame(frame + b"x")


# -- the committed version-1 fixture ------------------------------------------------------


def h(s: str) -> bytes:
    return hashlib.sha256(s.encode()).digest()


def f8(*xs: float) -> bytes:
    return struct.pack(f"<{len(xs)}d", *xs)


BIG_ENTRY = b"entry:" + bytes(range(256)) * 10
GOLDEN_FRAMES = [
    [
        RunStart(run=0, run_id="0123456789abcdef0123456789abcdef", system="golden-agent",
                 seed=7, task="q-001", meta={"backbone": "qwen3-8b", "k": [1, 2.5, None],
                                              "nested": {"x": True}},
                 t_ns=1_700_000_000_000_000_000, generator="splitmix64-gumbel/1",
                 agentlog_version="0.1.0", parent_run=None, pid=0),
        WindowEnter(run=0, window=0, name="retrieval", parent=-1,
                    t_ns=1_700_000_000_000_001_000, entry_hash=h("entry-0"), entry=b"\x91\xa1q",
                    args_hash=None, after=None, link_hash=None, expected_hash=None, thread=0),
        Blob(hash=h("pool"), data=b"\x93\xa2d1\xa2d2\xa2d3", kind="pool"),
        Selection(run=0, window=0, name="doc", step=0, owner="model", pool=h("pool"), n=3,
                  probs=f8(0.5, 0.25, 0.25), draws=f8(0.125, -1.5, 2.0), choice=2, n_zero=0,
                  generator="splitmix64-gumbel/1", top_k=3, top_p=0.9,
                  raw_probs=f8(0.4, 0.2, 0.2, 0.2), t_ns=1_700_000_000_000_002_000),
        Continuation(run=0, window=0, name="stop", step=1, p=0.75, u=0.5, decision=True,
                     t_ns=1_700_000_000_000_003_000),
    ],
    [
        LLMCall(run=0, window=0, t_ns=1_700_000_000_000_004_000, provider="openai",
                model="gpt-4o-mini", request=b"\x81\xa1m\xa2hi", response=b"\x81\xa1c\xa2ok",
                cache_key=h("cache"), input_tokens=12, output_tokens=3, latency_ns=250_000_000,
                cost=0.0001, status=0, error_type=None, error_message=None,
                fingerprint="fp_123"),
        ToolCall(run=0, window=0, name="search", t_ns=1_700_000_000_000_005_000,
                 wall_ns=42_000, status=2, args_hash=h("args"), result_hash=None,
                 error_type="SealedWindowError",
                 error_message="tool 'search' is forbidden in window 'synthesis'"),
        Score(run=0, window=0, name="f1", value=0.83, channel="direct", layout=1, wave=2,
              state_hash=h("state"), transition=0, t_ns=1_700_000_000_000_006_000),
        WindowExit(run=0, window=0, name="retrieval", t_ns=1_700_000_000_000_007_000, status=0,
                   exit_hash=h("exit-0"), exit=b"\x91\xa2d3", receipt=h("receipt-0"),
                   wall_ns=6_000, error_type=None, error_message=None, tool_calls=1,
                   llm_calls=1, input_tokens=12, output_tokens=3, cost=0.0001, selections=1),
        Blob(hash=hashlib.sha256(BIG_ENTRY).digest(), data=BIG_ENTRY, kind="artifact"),
        WindowEnter(run=0, window=1, name="synthesis", parent=-1,
                    t_ns=1_700_000_000_000_008_000, entry_hash=hashlib.sha256(BIG_ENTRY).digest(),
                    entry=None, args_hash=h("args-1"), after="retrieval",
                    link_hash=h("exit-0"), expected_hash=h("exit-0"), thread=1),
    ],
    [
        WindowExit(run=0, window=1, name="synthesis", t_ns=1_700_000_000_000_009_000, status=1,
                   exit_hash=h("failed"), exit=b"\xc0", receipt=h("receipt-1"), wall_ns=1_000,
                   error_type="ValueError", error_message="no answer \u00e9\u4e2d\U0001f600",
                   tool_calls=0, llm_calls=0, input_tokens=0, output_tokens=0, cost=None,
                   selections=0),
        Score(run=0, window=-1, name="reward", value=-1.0e300, channel=None, layout=None,
              wave=None, state_hash=None, transition=None, t_ns=1_700_000_000_000_010_000),
        RunEnd(run=0, t_ns=1_700_000_000_000_011_000, status=1, receipt=h("receipt-1"),
               n_windows=2, n_selections=1, n_continuations=1, dropped=0,
               error_type="ValueError"),
    ],
]


def test_golden_v1_fixture_reads_field_for_field() -> None:
    trace = read(GOLDEN)
    assert trace.format_version == 1
    assert not trace.truncated
    assert trace.bytes_dropped == 0
    assert trace.frames == 3
    expected = [r for frame in GOLDEN_FRAMES for r in frame]
    assert trace.records_recovered == len(expected)
    for got, want in zip(trace.records, expected, strict=True):
        assert type(got) is type(want)
        for field in want.__struct_fields__:
            assert getattr(got, field) == getattr(want, field), (type(want).__name__, field)


def test_golden_v1_fixture_has_one_frame_per_flush_and_every_record_type() -> None:
    frames = list(iter_frames(GOLDEN))
    assert [f.records for f in frames] == GOLDEN_FRAMES
    assert frames[0].offset == len(b"AGNTLOG\x01")
    seen = {type(r) for r in read(GOLDEN).records}
    assert seen == {RunStart, WindowEnter, WindowExit, Selection, Continuation, LLMCall,
                    ToolCall, Score, Blob, RunEnd}


def test_golden_v1_fixture_views_resolve_blobs_and_vectors() -> None:
    trace = read(GOLDEN)
    (run,) = trace.runs
    assert run.run_id == "0123456789abcdef0123456789abcdef" and run.failed
    retrieval, synthesis = trace.windows()
    assert retrieval.complete and synthesis.failed
    assert synthesis.entry_bytes == BIG_ENTRY
    (sel,) = trace.selections("doc")
    assert trace.probs(sel).tolist() == [0.5, 0.25, 0.25]
    assert trace.draws(sel).tolist() == [0.125, -1.5, 2.0]
    assert trace.blob(sel.pool) == b"\x93\xa2d1\xa2d2\xa2d3"


def test_a_frame_of_vector_records_is_compressed_at_the_bulk_level() -> None:
    # ZSTD_LEVEL_BULK is a measured choice (bench_writer_reader, the comment at its
    # definition): a frame averaging at least BULK_RECORD_BYTES per record gets exactly
    # that level's bytes, and they differ from level -1's (the level before) on a frame
    # whose vectors repeat, as an agent loop's fixed candidate pool does.
    probs = np.random.default_rng(3).dirichlet(np.ones(200)).tobytes()
    big = [Blob(hash=bytes(32), data=probs + bytes(range(256)) * (k + 1)) for k in range(40)]
    content = msgspec.msgpack.encode(big)
    _, payload = FrameEncoder().encode_parts(content, len(big))
    level = zstandard.ZstdCompressor(level=ZSTD_LEVEL_BULK, write_checksum=True,
                                     write_content_size=True)
    assert payload == level.compress(content)
    before = zstandard.ZstdCompressor(level=-1, write_checksum=True, write_content_size=True)
    assert payload != before.compress(content)
    assert decode_frame(FrameEncoder().encode(big)) == big
