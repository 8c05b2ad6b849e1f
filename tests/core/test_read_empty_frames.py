"""Many empty frames in a row (a hostile or damaged file; agentlog never writes one) are
read with one read and one comparison each after the first (issue 10): the header is
parsed once, and what the reader reports is unchanged."""

from __future__ import annotations

import struct
from pathlib import Path

import msgspec
import pytest

import agentlog as al
import agentlog._frames as frames_module
from agentlog._trace_format import FILE_HEADER, FRAME_HEADER_SIZE, FrameEncoder

EMPTY = FrameEncoder(level=19).encode_raw(b"\xdd" + struct.pack(">I", 0), 0)
SCORE = msgspec.msgpack.encode([8, 0, 0, "f1", 0.5, None, None, None, None, None, 1])
ONE = FrameEncoder(level=3).encode_raw(b"\xdd" + struct.pack(">I", 1) + SCORE, 1)


def _write(path: Path, *frames: bytes) -> Path:
    path.write_bytes(FILE_HEADER + b"".join(frames))
    return path


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offsets at which the reader parsed a frame header."""
    calls: list[int] = []
    real = frames_module.parse_frame_header

    def counting(buf: bytes, **kwargs: object) -> object:
        calls.append(int(kwargs["offset"]))  # type: ignore[call-overload]
        return real(buf, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(frames_module, "parse_frame_header", counting)
    return calls


def test_a_run_of_empty_frames_parses_one_header(tmp_path: Path, parsed: list[int]) -> None:
    path = _write(tmp_path / "e.zst", *[EMPTY] * 1_000)
    with al.iter_frames(path) as it:
        got = [(f.offset, f.payload_len, f.records) for f in it]
    assert parsed == [len(FILE_HEADER)]
    step = len(EMPTY)
    assert got == [(len(FILE_HEADER) + i * step, step - FRAME_HEADER_SIZE, [])
                   for i in range(1_000)]
    assert (it.frames, it.records, it.truncated, it.bytes_dropped) == (1_000, 0, False, 0)


def test_raw_frames_give_the_payload_of_each_copy(tmp_path: Path, parsed: list[int]) -> None:
    path = _write(tmp_path / "e.zst", *[EMPTY] * 3)
    with al.iter_frames(path, raw=True) as it:
        got = [(f.raws, f.payload) for f in it]
    assert got == [([], EMPTY[FRAME_HEADER_SIZE:])] * 3 and len(parsed) == 1


def test_a_different_frame_after_the_run_is_read_in_full(tmp_path: Path,
                                                         parsed: list[int]) -> None:
    path = _write(tmp_path / "m.zst", EMPTY, EMPTY, ONE, EMPTY, EMPTY)
    with al.iter_frames(path) as it:
        counts = [len(f.records) for f in it]
    assert counts == [0, 0, 1, 0, 0] and it.records == 1
    second = len(FILE_HEADER) + 2 * len(EMPTY)
    assert parsed == [len(FILE_HEADER), second, second + len(ONE)]


def test_a_cut_copy_at_the_end_is_a_truncated_tail(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.zst", EMPTY, EMPTY, EMPTY[:-3])
    with al.iter_frames(path) as it:
        assert sum(1 for _ in it) == 2
    assert (it.truncated, it.bytes_dropped) == (True, len(EMPTY) - 3)


def test_a_copy_with_one_flipped_byte_is_caught(tmp_path: Path) -> None:
    bad = bytearray(EMPTY)
    bad[-1] ^= 0x01  # the payload no longer matches its CRC
    path = _write(tmp_path / "f.zst", EMPTY, EMPTY, bytes(bad))
    third = len(FILE_HEADER) + 2 * len(EMPTY)
    with pytest.raises(al.TraceFormatError, match=rf"byte offset {third}: frame payload "
                                                  r"checksum mismatch"):
        list(al.iter_records(path))
