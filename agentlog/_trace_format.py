"""The on-disk layout of a trace file (``*.zst``): format version 2, and version 1.

Version 2 (what the writer writes) is a valid zstd stream: the file header and each
frame's header are zstd *skippable frames*, which every zstd decoder skips, so
``zstd -dc trace.zst`` prints the frames' contents back to back, one msgpack array of
records per frame::

    file    = skippable(FILE_MAGIC, MAGIC (7 bytes, b"AGNTLOG") + version (1 byte)) + frame*
    frame   = skippable(FRAME_MAGIC, header) + payload
    skippable(m, data) = u32 m + u32 len(data) + data       (zstd's skippable frame)
    header  = payload_len, n_records, crc32(payload), crc32(header[:12])   (<IIII)
    payload = one zstd frame (content size written, content checksum on)
              whose content is a msgpack array of ``agentlog._records.Record``

``FILE_MAGIC`` and ``FRAME_MAGIC`` are two of the sixteen magic numbers zstd reserves
for skippable frames (0x184D2A5A, 0x184D2A5B). Version 1 is the same without the
skippable-frame wrappers: an 8-byte file header (``MAGIC`` + version) and a bare 16-byte
header in front of each payload; it stays readable and verifiable, and a writer
appending to a version-1 file goes on writing version-1 frames.

Every frame stands alone (no shared dictionary, no cross-frame references), so
a reader can stop at any frame boundary and a torn write only ever costs the
frame it tore. The two CRCs let a reader tell a torn or corrupted frame from a
valid one before it decompresses anything; the declared sizes are checked
against ``MAX_FRAME_PAYLOAD`` and a reader's ``ReadLimits`` first (records per
frame, and records and decompressed bytes per compressed byte over the whole
file), so a hostile file gets bounded memory and time.

Example::

    >>> from agentlog._records import Score
    >>> from agentlog._trace_format import decode_frame, encode_frame
    >>> frame = encode_frame([Score(run=0, window=1, name="f1", value=0.5)])
    >>> decode_frame(frame)
    [Score(run=0, window=1, name='f1', value=0.5, channel=None, layout=None, wave=None, \
state_hash=None, transition=None, t_ns=0)]
"""

from __future__ import annotations

import re
import struct
import threading
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import msgspec
import zstandard

from agentlog._errors import TraceFormatError
from agentlog._records import RECORD_TYPES, Record

__all__ = [
    "FILE_HEADER",
    "FILE_HEADER_SIZE",
    "FILE_MAGIC",
    "FORMAT_VERSION",
    "FRAME_HEADER",
    "FRAME_HEADER_SIZE",
    "FRAME_MAGIC",
    "FRAME_PREFIX",
    "MAGIC",
    "MAX_FRAME_CONTENT",
    "MAX_FRAME_PAYLOAD",
    "MAX_FRAME_RECORDS",
    "MAX_HELD_BYTES",
    "ZSTD_LEVEL",
    "ZSTD_LEVEL_BULK",
    "FrameDecoder",
    "FrameEncoder",
    "FrameHeader",
    "ReadLimits",
    "check_file_header",
    "decode_frame",
    "encode_frame",
    "encode_frame_raw",
    "file_header_size",
    "frame_header_size",
    "parse_frame_header",
]

MAGIC = b"AGNTLOG"
FORMAT_VERSION = 2
FILE_MAGIC = 0x184D2A5A  # zstd skippable-frame magic numbers (0x184D2A50..0x184D2A5F)
FRAME_MAGIC = 0x184D2A5B
_SKIPPABLE = struct.Struct("<II")  # magic, length of what follows
FILE_HEADER = _SKIPPABLE.pack(FILE_MAGIC, len(MAGIC) + 1) + MAGIC + bytes([FORMAT_VERSION])
FILE_HEADER_SIZE = len(FILE_HEADER)  # 16 (version 1: 8)

FRAME_HEADER = struct.Struct("<IIII")  # what both versions' frame headers hold
FRAME_PREFIX = _SKIPPABLE.pack(FRAME_MAGIC, FRAME_HEADER.size)  # a v2 frame header's start
FRAME_HEADER_SIZE = len(FRAME_PREFIX) + FRAME_HEADER.size  # 24 (version 1: 16)


def file_header_size(version: int) -> int:
    """Bytes before the first frame of a file of format ``version``."""
    return FILE_HEADER_SIZE if version >= 2 else len(MAGIC) + 1


def frame_header_size(version: int) -> int:
    """Bytes in front of each frame payload in a file of format ``version``."""
    return FRAME_HEADER_SIZE if version >= 2 else FRAME_HEADER.size


# Bounds a reader enforces before allocating anything for a frame. A writer with
# default settings never comes near them (see agentlog._writer.frames.FRAME_TARGET_CONTENT).
MAX_FRAME_PAYLOAD = 256 * 1024 * 1024  # compressed bytes
MAX_FRAME_CONTENT = 512 * 1024 * 1024  # decompressed (msgpack) bytes
# Records per frame. A decoded record costs ~150 bytes of Python objects for as little as
# 6 bytes of msgpack, so a frame of this many records stays under ~40 MB in memory. The
# writer never cuts a larger frame (its default is 4,096 records per frame).
MAX_FRAME_RECORDS = 1 << 18
# Decoded bytes a reader accepts per compressed byte read so far, once past
# RATIO_FLOOR. Real traces stay far below it (small records compress ~3x, float
# vectors not at all, repeated artifacts are stored once as Blobs); a "zstd bomb"
# compresses >10,000x.
MAX_COMPRESSION_RATIO = 1024.0
RATIO_FLOOR = 16 * 1024 * 1024
# Records a reader accepts per compressed byte read so far, once past RECORDS_FLOOR
# records. A real record costs well over a compressed byte (its
# clock stamp and its draws are noise: ~16 bytes for a small record); a bomb of
# repeated records packs over 1,000 records into a byte, and each costs ~150 bytes
# of memory once decoded.
MAX_RECORDS_PER_BYTE = 1.0
RECORDS_FLOOR = 1 << 16
# Decompressed bytes of one frame a reader holds at once, whatever the file's ratio: what
# bounds the memory of a streaming reader (verify, inspect, iter_runs), which holds one
# frame at a time. The ratio bound alone let a 311 KB file of compressible vectors hold
# 320 MB at once (verify peaked at 445 MB to 1 GB). The writer cuts frames of at most
# FRAME_TARGET_CONTENT (4 MiB); only a single larger record (a selection of over a million
# candidates, an artifact Blob over 16 MiB) makes a larger frame.
MAX_HELD_BYTES = 16 * 1024 * 1024

# zstd levels, measured with tests/benchmarks/bench_writer_reader.py (2-CPU box):
# * Small records (4096 per frame): level 1 gives 16.3 B/record at ~450 MB/s; level 3
#   gives 16.7 (no better, ~20 % slower) and even level 19 only 15.0; level -1 costs
#   ~5 % more bytes.
# * Float64 vectors (probabilities, Gumbel draws) are noise: Huffman-coding their
#   literals at level >= 1 saves 4 % (15.4 vs 16.1 KB per 1,000-candidate
#   selection) but halves both compression (0.63 vs 1.26 GB/s) and decompression
#   (0.8 vs 1.5 GB/s) speed, because negative levels store literals raw.
# So a frame whose content averages at least BULK_RECORD_BYTES per record (vector
# records dominate it) is compressed at ZSTD_LEVEL_BULK, every other frame at
# ZSTD_LEVEL. Readers need not know: every frame is a plain zstd frame.
# * Among negative levels (bench_writer_reader.py --levels, 2026-12-01, load ~1, paired
#   rounds of CPU time, two runs): on an agent loop's run frame (72 records, 166 KB of
#   msgpack, a fixed probability vector repeated 50 times) levels -3 / -5 / -7 / -10 take
#   0.79-0.80 / 0.68-0.69 / 0.61-0.63 / 0.55-0.58 of level -1's time for 0.1 / 0.7 / 0.6 /
#   1.0 % more bytes; on fresh 1,000-candidate vectors (stored raw at every level)
#   1.02-1.06 / 0.89-1.38 / 0.72-0.84 / 0.68-0.80. Decoding costs the same at all of them.
#   The writer thread's CPU per agent-loop run: 0.87-0.88 of level -1's at level -7.
ZSTD_LEVEL = 1
ZSTD_LEVEL_BULK = -7
BULK_RECORD_BYTES = 1024

_TAGS: frozenset[int] = frozenset(cast(int, t.__struct_config__.tag) for t in RECORD_TYPES)
_PATH_INDEX = re.compile(r"\$\[(\d+)\]")


class FrameHeader(NamedTuple):
    """The fixed 16-byte header in front of every frame payload."""

    payload_len: int
    n_records: int
    payload_crc: int


class ReadLimits(NamedTuple):
    """How much a reader decodes before it calls a file hostile; pass to ``read(limits=)``.

    The defaults read every trace agentlog writes. Raise them only for a file you
    trust (for example a trace holding a huge, highly repetitive artifact):
    ``al.read(path, limits=al.ReadLimits(max_compression_ratio=1e4))``.

    Attributes:
        max_frame_records: records one frame may declare.
        max_frame_content: decompressed bytes one frame may declare.
        max_compression_ratio: decompressed bytes per compressed byte over the whole
            file, once more than ``ratio_floor`` bytes were decompressed.
        ratio_floor: decompressed bytes always allowed, whatever the ratio.
        max_records_per_byte: records per compressed byte over the whole file, once
            more than ``records_floor`` records were decoded.
        records_floor: records always allowed, whatever the ratio.
        max_held_bytes: decompressed bytes of one frame, whatever the ratio: what a
            streaming reader holds at once (16 MiB; agentlog's writer cuts frames of at
            most 4 MiB, larger only for one record over that size).
    """

    max_frame_records: int = MAX_FRAME_RECORDS
    max_frame_content: int = MAX_FRAME_CONTENT
    max_compression_ratio: float = MAX_COMPRESSION_RATIO
    ratio_floor: int = RATIO_FLOOR
    max_records_per_byte: float = MAX_RECORDS_PER_BYTE
    records_floor: int = RECORDS_FLOOR
    max_held_bytes: int = MAX_HELD_BYTES


DEFAULT_LIMITS = ReadLimits()
_RAISE_LIMITS = ("raise it, for a file you trust, with "
                 "al.read(path, limits=al.ReadLimits({field}=...))")


class FrameEncoder:
    """Encodes record batches into complete frames. Not thread-safe: one per thread.

    Args:
        level: zstd level for every frame; by default ``ZSTD_LEVEL``, or
            ``ZSTD_LEVEL_BULK`` for frames of large (vector) records.
        version: the format of the file the frames go into (a writer appending to a
            version-1 file writes version-1 frames).
    """

    def __init__(self, *, level: int | None = None, version: int = FORMAT_VERSION) -> None:
        self._prefix = FRAME_PREFIX if version >= 2 else b""
        self._encoder = msgspec.msgpack.Encoder()
        self._compressor = _compressor(ZSTD_LEVEL if level is None else level)
        self._bulk = self._compressor if level is not None else _compressor(ZSTD_LEVEL_BULK)

    def encode_records(self, records: Sequence[Any]) -> bytes:
        """Return the msgpack encoding of ``records`` (one array, the frame content)."""
        return self._encoder.encode(records)

    def encode_parts(self, content: bytes, n_records: int) -> tuple[bytes, bytes]:
        """Return ``(header, payload)`` for already msgpack-encoded ``content``.

        Kept apart so a writer can hand both to ``os.writev`` without copying.
        """
        bulk = len(content) >= BULK_RECORD_BYTES * max(n_records, 1)
        payload = (self._bulk if bulk else self._compressor).compress(content)
        head = struct.pack("<III", len(payload), n_records, zlib.crc32(payload))
        return self._prefix + head + struct.pack("<I", zlib.crc32(head)), payload

    def encode_raw(self, content: bytes, n_records: int) -> bytes:
        """Return a complete frame (header + payload) for msgpack-encoded ``content``."""
        header, payload = self.encode_parts(content, n_records)
        return header + payload

    def encode(self, records: Sequence[Any]) -> bytes:
        """Return a complete frame (header + payload) holding ``records``."""
        return self.encode_raw(self._encoder.encode(records), len(records))


def _compressor(level: int) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)


_local = threading.local()


def _thread_encoder() -> FrameEncoder:
    enc: FrameEncoder | None = getattr(_local, "encoder", None)
    if enc is None:
        enc = _local.encoder = FrameEncoder()
    return enc


def encode_frame(records: Sequence[Any]) -> bytes:
    """Return one complete frame (24-byte header + zstd payload) holding ``records``."""
    return _thread_encoder().encode(records)


def encode_frame_raw(msgpack_bytes: bytes, n: int) -> bytes:
    """Return one complete frame for a msgpack array of ``n`` records encoded elsewhere."""
    return _thread_encoder().encode_raw(msgpack_bytes, n)


def check_file_header(head: bytes, *, path: str | None = None) -> int | None:
    """Validate a file's first bytes (up to ``FILE_HEADER_SIZE``) and return its version.

    Returns ``None`` when ``head`` is shorter than its header but is a prefix of a
    valid one (a file truncated inside its header). Raises ``TraceFormatError`` for
    anything that is not an agentlog trace of a version this reader supports.
    """
    head = bytes(head)
    if head[:1] == MAGIC[:1]:  # version 1: MAGIC + version
        at, size = len(MAGIC), file_header_size(1)
        if len(head) < size:
            if MAGIC[:len(head)] != head[:len(MAGIC)]:
                raise _bad_magic(head, path)
            return None
        if head[:len(MAGIC)] != MAGIC:
            raise _bad_magic(head, path)
        version = head[at]
        if version != 1:  # a later version never comes in this layout
            raise _bad_version(version, path, at)
        return 1
    size = FILE_HEADER_SIZE
    if len(head) < size:
        if FILE_HEADER[:len(head)] != head:
            raise _bad_magic(head, path)
        return None
    if head[:size - 1] != FILE_HEADER[:-1]:
        raise _bad_magic(head, path)
    version = head[size - 1]
    if version > FORMAT_VERSION:
        raise TraceFormatError(
            f"trace format version {version} was written by a newer agentlog; this agentlog "
            f"reads versions up to {FORMAT_VERSION}: upgrade agentlog to read it",
            path=path, offset=size - 1,
        )
    if version < 2:
        raise _bad_version(version, path, size - 1)
    return version


def _bad_version(version: int, path: str | None, at: int) -> TraceFormatError:
    return TraceFormatError(
        f"expected a trace format version between 1 and {FORMAT_VERSION} in its place, "
        f"found {version}: the file header is corrupted", path=path, offset=at)


def _bad_magic(head: bytes, path: str | None) -> TraceFormatError:
    return TraceFormatError(
        f"not an agentlog trace: expected the file to start with agentlog's header "
        f"({FILE_HEADER[:-1]!r} and a version; {MAGIC!r} in version 1), found "
        f"{bytes(head[:FILE_HEADER_SIZE - 1])!r}",
        path=path, offset=0,
    )


def parse_frame_header(
    buf: bytes | memoryview,
    *,
    path: str | None = None,
    offset: int | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
    version: int = FORMAT_VERSION,
) -> FrameHeader:
    """Parse and check a frame header (``frame_header_size(version)`` bytes: its
    skippable-frame wrapper, its CRC and the declared sizes)."""
    if version >= 2:
        if bytes(buf[:len(FRAME_PREFIX)]) != FRAME_PREFIX:
            raise TraceFormatError(
                f"expected a frame header here (a zstd skippable frame starting "
                f"{FRAME_PREFIX.hex()}), found {bytes(buf[:len(FRAME_PREFIX)]).hex()}; the "
                "file is corrupted here (everything before this offset is intact)",
                path=path, offset=offset,
            )
        buf = buf[len(FRAME_PREFIX):]
    payload_len, n_records, payload_crc, header_crc = FRAME_HEADER.unpack(buf)
    actual = zlib.crc32(buf[:12])
    if actual != header_crc:
        raise TraceFormatError(
            f"frame header checksum mismatch: the header says crc32 {header_crc:#010x}, "
            f"its 12 bytes hash to {actual:#010x}; the file is corrupted here "
            "(everything before this offset is intact)",
            path=path, offset=offset,
        )
    if payload_len > MAX_FRAME_PAYLOAD:
        raise TraceFormatError(
            f"frame declares a {payload_len}-byte payload, over the {MAX_FRAME_PAYLOAD}-byte "
            "limit this reader accepts; the file is corrupted or hostile",
            path=path, offset=offset,
        )
    if n_records > limits.max_frame_records:
        raise TraceFormatError(
            f"frame declares {n_records} records, over the {limits.max_frame_records} records "
            "per frame this reader accepts (agentlog writes at most "
            f"{MAX_FRAME_RECORDS}); the file is corrupted or hostile; "
            + _RAISE_LIMITS.format(field="max_frame_records"),
            path=path, offset=offset,
        )
    return FrameHeader(payload_len, n_records, payload_crc)


class FrameDecoder:
    """Decodes frame payloads back into records, with the reader's safety limits.

    Holds one reused ``msgspec.msgpack.Decoder(list[Record])`` and one zstd
    decompression context. Not thread-safe: one per thread. It counts the
    compressed and decompressed bytes it has seen, so that ``limits`` bound the
    decompressed size of a whole file relative to its compressed size (use one
    decoder per file).
    """

    def __init__(self, limits: ReadLimits = DEFAULT_LIMITS, *, record_type: Any = None
                 ) -> None:
        # record_type: the union to decode into (agentlog._frames.RECORD_VIEWS: records
        # whose bytes are zero-copy views of the frame); by default the records.
        self._decoder: msgspec.msgpack.Decoder[list[Any]] = msgspec.msgpack.Decoder(
            list[Record] if record_type is None else list[record_type])
        self._raw_decoder = msgspec.msgpack.Decoder(list[msgspec.Raw])
        self._dctx = zstandard.ZstdDecompressor()
        self.limits = limits
        self.compressed = 0
        self.decompressed = 0
        self.records = 0

    def decode_payload(
        self,
        payload: bytes | memoryview,
        header: FrameHeader,
        *,
        path: str | None = None,
        offset: int | None = None,
    ) -> list[Any]:
        """Check and decode one frame payload; ``offset`` is the frame's start.

        Raises:
            TraceFormatError: on any CRC, size, zstd, msgpack or record error.
        """
        self._check_crc(payload, header, path, offset)
        content = self.decompress(payload, path=path, offset=offset)
        return self.decode_content(content, header.n_records, path=path, offset=offset)

    def decode_payload_raw(
        self,
        payload: bytes | memoryview,
        header: FrameHeader,
        *,
        path: str | None = None,
        offset: int | None = None,
    ) -> tuple[list[Any], list[msgspec.Raw]]:
        """As ``decode_payload``, also returning each record's exact bytes in the file."""
        self._check_crc(payload, header, path, offset)
        content = self.decompress(payload, path=path, offset=offset)
        records = self.decode_content(content, header.n_records, path=path, offset=offset)
        raws: list[msgspec.Raw] = self._raw_decoder.decode(content)
        return records, raws

    def _check_crc(self, payload: bytes | memoryview, header: FrameHeader, path: str | None,
                   offset: int | None) -> None:
        limits = self.limits
        records = self.records + header.n_records
        compressed = self.compressed + len(payload)
        if records > max(limits.records_floor, limits.max_records_per_byte * compressed):
            raise TraceFormatError(
                f"the file would hold {records} records in {compressed} compressed bytes so "
                f"far, over the {limits.max_records_per_byte:g} records per compressed byte "
                "this reader accepts (a record bomb: a real record takes well over a byte); "
                "the file is corrupted or hostile; "
                + _RAISE_LIMITS.format(field="max_records_per_byte"),
                path=path, offset=offset,
            )
        actual = zlib.crc32(payload)
        if actual != header.payload_crc:
            raise TraceFormatError(
                f"frame payload checksum mismatch: the header says crc32 "
                f"{header.payload_crc:#010x}, the {len(payload)}-byte payload hashes to "
                f"{actual:#010x}; the file is corrupted inside this frame",
                path=path, offset=offset,
            )

    def decompress(
        self, payload: bytes | memoryview, *, path: str | None = None, offset: int | None = None
    ) -> bytes:
        """Decompress one zstd frame after checking its declared content size."""
        try:
            params = zstandard.get_frame_parameters(payload)
        except zstandard.ZstdError as exc:
            raise TraceFormatError(
                f"expected a zstd frame as the frame payload, found none ({exc})",
                path=path, offset=offset,
            ) from exc
        size = params.content_size
        if size == zstandard.CONTENTSIZE_UNKNOWN or size == zstandard.CONTENTSIZE_ERROR:
            raise TraceFormatError(
                "the frame's zstd payload does not declare its content size; agentlog writes "
                "it always and refuses frames without it (memory could not be bounded)",
                path=path, offset=offset,
            )
        limits = self.limits
        if size > limits.max_frame_content:
            raise TraceFormatError(
                f"the frame's zstd payload declares {size} bytes of content, over the "
                f"{limits.max_frame_content}-byte limit this reader accepts; the file is "
                "corrupted or hostile; " + _RAISE_LIMITS.format(field="max_frame_content"),
                path=path, offset=offset,
            )
        compressed = self.compressed + len(payload)
        decompressed = self.decompressed + size
        allowed = max(limits.ratio_floor, limits.max_compression_ratio * compressed)
        if decompressed > allowed:
            raise TraceFormatError(
                f"the file would decompress to {decompressed} bytes from {compressed} "
                f"compressed bytes so far, a ratio over the {limits.max_compression_ratio:g} "
                "this reader accepts (a compression bomb: agentlog's traces stay far below "
                "it); the file is corrupted or hostile; "
                + _RAISE_LIMITS.format(field="max_compression_ratio"),
                path=path, offset=offset,
            )
        if size > limits.max_held_bytes:
            raise TraceFormatError(
                f"the frame's zstd payload declares {size} bytes of content, over the "
                f"{limits.max_held_bytes} bytes a reader holds at once (agentlog's writer cuts "
                "frames of at most 4 MiB, larger only for one record over that size); the "
                "file is hostile, or holds a record too large to read in bounded memory; "
                + _RAISE_LIMITS.format(field="max_held_bytes"),
                path=path, offset=offset,
            )
        if not params.has_checksum:
            raise TraceFormatError(
                "the frame's zstd payload has no content checksum; agentlog writes it always",
                path=path, offset=offset,
            )
        try:
            content = self._dctx.decompress(payload, max_output_size=size, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise TraceFormatError(
                f"the frame's zstd payload does not decompress: {exc}",
                path=path, offset=offset,
            ) from exc
        if len(content) != size:  # pragma: no cover - libzstd enforces it
            raise TraceFormatError(
                f"the frame's zstd payload declared {size} bytes and produced {len(content)}",
                path=path, offset=offset,
            )
        self.compressed = compressed
        self.decompressed = decompressed
        return content

    def decode_content(
        self,
        content: bytes,
        n_records: int,
        *,
        path: str | None = None,
        offset: int | None = None,
    ) -> list[Any]:
        """Decode a frame's msgpack content and check its record count."""
        try:
            records = self._decoder.decode(content)
        except msgspec.ValidationError as exc:
            raise _record_error(exc, content, path, offset) from exc
        except (msgspec.DecodeError, RecursionError, OverflowError, ValueError, TypeError,
                MemoryError) as exc:
            raise TraceFormatError(
                f"expected a msgpack array of records in the frame, the content does not "
                f"decode: {type(exc).__name__}: {exc}",
                path=path, offset=offset,
            ) from exc
        if len(records) != n_records:
            raise TraceFormatError(
                f"the frame header declares {n_records} records, the frame holds "
                f"{len(records)}; the file is corrupted",
                path=path, offset=offset,
            )
        self.records += n_records
        return records


def _record_error(
    exc: msgspec.ValidationError, content: bytes, path: str | None, offset: int | None
) -> TraceFormatError:
    msg = str(exc)
    m = _PATH_INDEX.search(msg)
    where = f"record {m.group(1)} of the frame" if m else "a record of the frame"
    tag = _unknown_tag(msg)
    if tag is not None:
        known = ", ".join(str(t) for t in sorted(_TAGS))
        return TraceFormatError(
            f"{where} has unknown record tag {tag} (this agentlog knows tags {known}); "
            "the file was written by a newer agentlog (upgrade) or is corrupted",
            path=path, offset=offset,
        )
    return TraceFormatError(
        f"{where} does not match the record schema: {msg}", path=path, offset=offset
    )


_TAG_ERROR = re.compile(r"^Invalid value (-?\d+) - at `\$\[\d+\]\[0\]`$")


def _unknown_tag(msg: str) -> int | None:
    m = _TAG_ERROR.match(msg)
    return int(m.group(1)) if m else None


def decode_frame(
    frame: bytes | memoryview, *, path: str | None = None, offset: int | None = None
) -> list[Any]:
    """Decode one complete frame (header + payload) into its records.

    ``frame`` must hold exactly one frame. Raises ``TraceFormatError`` for a
    short buffer as well as for every check ``FrameDecoder`` makes.
    """
    view = memoryview(frame)
    if len(view) < FRAME_HEADER_SIZE:
        raise TraceFormatError(
            f"expected a {FRAME_HEADER_SIZE}-byte frame header, found {len(view)} bytes",
            path=path, offset=offset,
        )
    header = parse_frame_header(view[:FRAME_HEADER_SIZE], path=path, offset=offset)
    if len(view) - FRAME_HEADER_SIZE != header.payload_len:
        raise TraceFormatError(
            f"expected a {header.payload_len}-byte frame payload, found "
            f"{len(view) - FRAME_HEADER_SIZE} bytes",
            path=path, offset=offset,
        )
    dec: FrameDecoder | None = getattr(_local, "decoder", None)
    if dec is None:
        dec = _local.decoder = FrameDecoder()
    dec.compressed = dec.decompressed = dec.records = 0  # one frame stands alone
    return dec.decode_payload(view[FRAME_HEADER_SIZE:], header, path=path, offset=offset)
