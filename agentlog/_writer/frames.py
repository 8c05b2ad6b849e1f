"""Cutting, encoding and writing frames: the writer thread's side of ``TraceWriter``.

``FrameWriting`` is mixed into ``TraceWriter`` (as ``RunSealer`` is): a batch taken from
the queue is sealed (``agentlog._writer.seal``), cut into frames of at most
``frame_records`` records or ``FRAME_TARGET_CONTENT`` bytes of content (a frame always
ends before a recorder's ``RunEnd``, so the run's digest is complete), each frame
encoded, compressed, hashed into the runs' digests and handed to the OS in one
``writev``. A write that fails cuts the torn frame off, so the file keeps its complete
frames.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentlog import _digest
from agentlog._records import RECORD_TYPES
from agentlog._trace_format import (
    MAX_FRAME_CONTENT,
    MAX_FRAME_PAYLOAD,
    MAX_FRAME_RECORDS,
    FrameEncoder,
)

__all__ = ["FRAME_TARGET_CONTENT", "FrameWriting"]

# Frames of large records (selections over big pools) are cut to about this much
# msgpack content instead of ``frame_records`` records: reading a frame that fits
# in cache is twice as fast as reading a 64 MB one (measured with 1,000-candidate
# selections: 92k vs 36k records/s), and a crash tears less.
FRAME_TARGET_CONTENT = 4 * 1024 * 1024

_RECORD_TYPES = frozenset(RECORD_TYPES)


# The OS calls the pool threads use, as module attributes so tests can make a write
# fail (disk full) or stall without touching the os module everyone else uses.
def _writev_joined(fd: int, parts: list[bytes]) -> int:  # pragma: no cover - Windows
    return os.write(fd, b"".join(parts))


_writev: Callable[[int, list[bytes]], int] = getattr(os, "writev", _writev_joined)
_write: Callable[[int, memoryview], int] = os.write


class FrameWriting:
    """The frame-writing half of ``TraceWriter`` (pool thread only)."""

    if TYPE_CHECKING:  # pragma: no cover - defined by TraceWriter and RunSealer
        _fd: int
        _failed: bool
        _end: int
        _version: int
        _chunk_records: int
        _learned: bool
        _frame_encoder: FrameEncoder | None
        _digests: dict[int, Any]
        _run_ends: list[int]
        _batch_blobs: bool
        _keyed_chain: Any
        frame_records: int
        dropped: int
        records_written: int
        frames_written: int
        bytes_written: int

        def _note_problem(self, message: str) -> None: ...
        def _learn(self, n_records: int, n_bytes: int) -> None: ...
        def _seal(self, batch: list[Any]) -> None: ...

    def _peek(self, q: deque[Any], n: int) -> None:
        """Learn the record size from the first records without writing them (once)."""
        sample = [q[i] for i in range(min(n, len(q)))]
        with contextlib.suppress(Exception):
            if all(type(r) in _RECORD_TYPES for r in sample):
                self._learn(len(sample), len(self._encoder().encode_records(sample)))

    def _encoder(self) -> FrameEncoder:
        encoder = self._frame_encoder
        if encoder is None:
            encoder = self._frame_encoder = FrameEncoder(version=self._version)
        return encoder

    def _sync(self) -> None:
        if self._fd < 0 or self._failed:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._note_problem(f"fsync failed: {exc}")

    def _write_batch(self, batch: list[Any], kinds: set[type] | None = None) -> None:
        if self._failed:
            self.dropped += len(batch)
            return
        if kinds is None:
            kinds = set(map(type, batch))
        if not kinds <= _RECORD_TYPES:
            batch = self._only_records(batch)
        self._seal(batch)
        ends, self._run_ends = self._run_ends, []
        # The common batch (one open run, no Blob, no RunEnd) advances its run's digest
        # by each frame's payload without looking at a record (agentlog._digest).
        digests = self._digests
        single: Any = None
        if len(digests) == 1 and not ends and not self._batch_blobs:
            single = next(iter(digests.values()))
        self._batch_blobs = False
        start = 0
        for cut in (*ends, len(batch)):
            while start < cut:
                stop = min(start + self._chunk_records, cut)
                self._write_records(batch[start:stop], single)
                start = stop
            if cut < len(batch):
                # A frame ends before a recorder's RunEnd: every frame of its run is
                # written (and hashed), so its digest is complete.
                batch[cut] = _digest.seal_run_end(digests, batch[cut], self._keyed_chain)

    def _only_records(self, batch: list[Any]) -> list[Any]:
        kept = [r for r in batch if type(r) in _RECORD_TYPES]
        bad = len(batch) - len(kept)
        self.dropped += bad
        first = next(r for r in batch if type(r) not in _RECORD_TYPES)
        self._note_problem(
            f"{bad} object(s) that are not trace records were put, e.g. {type(first).__name__}"
        )
        return kept

    def _write_records(self, records: list[Any], digest: Any = None) -> None:
        if not records:
            return
        encoder = self._encoder()
        try:
            content = encoder.encode_records(records)
        except Exception as exc:
            if len(records) == 1:
                self.dropped += 1
                self._note_problem(
                    f"a {type(records[0]).__name__} record cannot be encoded "
                    f"({type(exc).__name__}: {exc})"
                )
                return
            mid = len(records) // 2  # find the bad records without a per-record loop
            self._write_records(records[:mid], digest)
            self._write_records(records[mid:], digest)
            return
        n = len(records)
        if len(content) > FRAME_TARGET_CONTENT and n > 1:
            # Large records: fewer per frame, from now on (one extra encode, once).
            step = self._chunk_records = max(1, n * FRAME_TARGET_CONTENT // len(content))
            self._learned = True
            self._learn(n, len(content))
            for start in range(0, n, step):
                self._write_records(records[start:start + step], digest)
            return
        small_again = 4 * len(content) < FRAME_TARGET_CONTENT
        if small_again and n == self._chunk_records < self.frame_records:
            self._chunk_records = min(self.frame_records, MAX_FRAME_RECORDS, 2 * n)
        self._learn(n, len(content))
        if len(content) > MAX_FRAME_CONTENT:
            self.dropped += 1
            self._note_problem(
                f"a {type(records[0]).__name__} record encodes to {len(content)} bytes, over "
                f"the {MAX_FRAME_CONTENT}-byte frame limit"
            )
            return
        header, payload = encoder.encode_parts(content, len(records))
        if len(payload) > MAX_FRAME_PAYLOAD:  # pragma: no cover - zstd never expands 2x
            self.dropped += len(records)
            self._note_problem("a frame compressed past the payload limit")
            return
        if self._digests:
            _digest.advance_frame(self._digests, digest, records, payload)
        try:
            self._write_all([header, payload])
        except OSError as exc:
            self._fail_write(exc, len(records))
            return
        self.records_written += len(records)
        self.frames_written += 1
        self.bytes_written += len(header) + len(payload)
        self._end += len(header) + len(payload)

    def _write_all(self, parts: list[bytes]) -> None:
        total = sum(len(p) for p in parts)
        done = _writev(self._fd, parts)
        if done < total:  # a short write: rare, finish byte by byte
            rest = memoryview(b"".join(parts))[done:]
            while rest:
                n = _write(self._fd, rest)
                rest = rest[n:]

    def _fail_write(self, exc: OSError, n_records: int) -> None:
        self._failed = True
        self.dropped += n_records
        # Cut the torn frame off so the file stays a valid trace of its complete frames.
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._end)
        self._note_problem(
            f"writing failed ({exc}); the file keeps the {self.records_written} records "
            "written before and the rest is dropped"
        )
