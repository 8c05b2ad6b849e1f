"""``verify`` and ``inspect`` hold a bounded amount of decompressed data, whatever the file.

The hostile files here are a few hundred KB on disk and decompress to hundreds of MB of
probability vectors (issue 30.5: a 311 KB file cost 445 MB in ``verify`` and ~310 MB in
``inspect``). Each command runs in a fresh child process that reports its own peak RSS
(VmHWM, reset after the imports, as ``tests/benchmarks/_rss.py`` does), so what is
measured is what a user's process would need. The time and RSS acceptance check of the
same files, with ``export``, is ``tests/benchmarks/bench_hostile_files.py``.
"""

from __future__ import annotations

import hashlib
import io
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
import pytest
import zstandard

import agentlog as al
from agentlog._noise import GENERATOR_ID
from agentlog._trace_format import FILE_HEADER, FRAME_PREFIX, FrameEncoder, ReadLimits

MB = 1_000_000
RSS_LIMIT_MB = 100  # verify and inspect, on any input (issue 30.5)
N = 1_000_000  # candidates of one hostile selection: 16 MB of vectors, 16 KB on disk
POOL = hashlib.sha256(b"no such pool").digest()

CHILD = """
import contextlib, io, sys, time
def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
def _peak_kb():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
from agentlog.cli import app
what, path = sys.argv[1:]
def run(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0
run([what, "--json", path + ".none"])  # load the command's modules first
_reset_peak()
t0 = time.perf_counter()
code = run([what, "--json", path])
print(code, time.perf_counter() - t0, _peak_kb())
"""


def vector_bytes(n: int, seed: int) -> Iterator[bytes]:
    """``n`` float64 that compress ~1,000x: a constant with a random word every 1,400."""
    rng = np.random.default_rng(seed)
    chunk = 1 << 16
    for start in range(0, n, chunk):
        v = np.full(min(chunk, n - start), 1.0 / n)
        v[::1400] = rng.random(len(v[::1400]))
        yield v.tobytes()


def _bin32(n: int) -> bytes:
    return b"\xc6" + struct.pack(">I", n)


def selection_parts(n: int, step: int, seed: int, pool: bytes = POOL) -> Iterator[bytes]:
    """The msgpack bytes of one Selection of ``n`` candidates, in pieces (never whole)."""
    head = msgspec.msgpack.encode
    yield b"\x9d" + head(4) + head(0) + head(-1) + head("doc") + head(step) + head("model")
    yield head(pool) + head(n) + _bin32(8 * n)
    yield from vector_bytes(n, seed)
    yield _bin32(8 * n)
    yield from vector_bytes(n, seed + 1)
    yield head(0) + head(0) + head(GENERATOR_ID)


def frame_of(parts_factory: object, n_records: int) -> bytes:
    """One complete frame (header + zstd payload) of the content ``parts_factory()``
    yields, compressed as it streams by (the content is never held whole)."""
    size = sum(len(p) for p in parts_factory())  # type: ignore[operator]
    out = io.BytesIO()
    cctx = zstandard.ZstdCompressor(level=1, write_checksum=True, write_content_size=True)
    with cctx.stream_writer(out, size=size + 5, closefd=False) as w:
        w.write(b"\xdd" + struct.pack(">I", n_records))
        for p in parts_factory():  # type: ignore[operator]
            w.write(p)
    payload = out.getvalue()
    head = struct.pack("<III", len(payload), n_records, zlib.crc32(payload))
    return FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + payload


def run_start() -> bytes:
    return msgspec.msgpack.encode([[1, 0, "h" * 32, "hostile", 1, "t", {}, 0, GENERATOR_ID,
                                    "0.1.0"]])[1:]


def write_hostile(path: Path, *, frames: int, n: int, pool: bytes = POOL) -> Path:
    """A run whose ``frames`` frames each hold one selection of ``n`` candidates from the
    candidate pool named ``pool`` (by default, none in the file)."""
    with path.open("wb") as f:
        f.write(FILE_HEADER)
        f.write(frame_of(lambda: iter([run_start()]), 1))
        if pool != POOL:
            f.write(frame_of(lambda: iter([pool_blob(n)]), 1))
        for k in range(frames):
            f.write(frame_of(lambda k=k: selection_parts(n, k, 2 * k, pool), 1))
    return path


def pool_blob(n: int) -> bytes:
    """A candidate pool Blob of ``n`` ids, all "a" (it compresses to nothing)."""
    ids = msgspec.msgpack.encode(["a"] * n)
    return msgspec.msgpack.encode([9, hashlib.sha256(ids).digest(), ids, "pool"])


def write_pooled(path: Path, *, frames: int, n: int) -> Path:
    """As ``write_hostile``, with the selections' pool in the file: verify keys it and
    regenerates every draw."""
    pool = msgspec.msgpack.decode(pool_blob(n))[1]
    return write_hostile(path, frames=frames, n=n, pool=pool)


@pytest.fixture(scope="module")
def many_frames(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 frames of 16 MB of vectors each (320 MB), ~320 KB on disk."""
    return write_hostile(tmp_path_factory.mktemp("hostile") / "vectors.zst", frames=20, n=N)


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with the selections' 1 M-id pool in the file."""
    return write_pooled(tmp_path_factory.mktemp("hostile") / "pooled.zst", frames=20, n=N)


@pytest.fixture(scope="module")
def one_frame(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One frame of 320 MB of vectors, ~320 KB on disk."""
    return write_hostile(tmp_path_factory.mktemp("hostile") / "frame.zst", frames=1, n=20 * N)


def peak_of(what: str, path: Path) -> tuple[int, float, float]:
    """(exit code, seconds, peak RSS in MB) of ``agentlog WHAT --json PATH`` in a child."""
    out = subprocess.run([sys.executable, "-c", CHILD, what, str(path)], check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1]), int(out[2]) * 1024 / MB


def test_the_hostile_files_are_small_on_disk_and_huge_decompressed(
    many_frames: Path, one_frame: Path,
) -> None:
    for path in (many_frames, one_frame):
        assert path.stat().st_size < 400_000
    with al.iter_frames(many_frames, limits=ReadLimits(max_held_bytes=32 * MB)) as frames:
        assert sum(f.payload_len for f in frames) < 400_000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("what", ["verify", "inspect"])
def test_frames_of_huge_vectors_are_streamed_in_bounded_memory(
    many_frames: Path, pooled: Path, what: str,
) -> None:
    """320 MB of vectors in 20 frames: each frame is checked and let go; with the pool in
    the file, verify also keys its million ids and regenerates every draw."""
    for path in (many_frames, pooled):
        code, _, rss = peak_of(what, path)
        assert code == (1 if what == "verify" else 0)  # the vectors do not sum to 1
        assert rss <= RSS_LIMIT_MB, (path.name, rss)


def test_verify_reports_what_is_wrong_with_the_hostile_selections(
    many_frames: Path, pooled: Path,
) -> None:
    kinds = {p.kind for p in al.verify(many_frames).problems}
    assert kinds == {"probabilities", "choice", "missing-blob", "run-not-ended"}
    kinds = {p.kind for p in al.verify(pooled).problems}
    assert kinds == {"probabilities", "choice", "draws", "run-not-ended"}


@pytest.mark.parametrize("what", ["verify", "inspect"])
def test_a_frame_over_the_held_bytes_limit_is_refused_before_it_is_decompressed(
    one_frame: Path, what: str,
) -> None:
    code, _, rss = peak_of(what, one_frame)
    assert code == 2
    assert rss <= RSS_LIMIT_MB


def write_wide_metadata(path: Path, n: int) -> Path:
    """A run whose metadata is ``{"a": [[]] * n}``: one byte per empty list on the wire,
    ~64 bytes each once decoded (156 bytes on disk for two million)."""
    meta = msgspec.Raw(b"\x81\xa1a\xdd" + n.to_bytes(4, "big") + b"\x90" * n)
    content = msgspec.msgpack.encode([[1, 0, "w" * 32, "s", 1, None, meta, 0, GENERATOR_ID,
                                       "0"]])
    path.write_bytes(FILE_HEADER + FrameEncoder(level=19).encode_raw(content, 1))
    return path


def test_verify_never_decodes_metadata_so_wide_metadata_costs_nothing(tmp_path: Path) -> None:
    """Decoded, the two million lists took 202 MB in verify; the digest covers the
    metadata's bytes, which verify reads as they are."""
    path = write_wide_metadata(tmp_path / "wide.zst", 2_000_000)
    assert path.stat().st_size < 1_000
    code, _, rss = peak_of("verify", path)
    assert code == 1 and rss <= RSS_LIMIT_MB  # the run never ended


def test_stream_offsets_past_a_thousand_streams_are_reported_not_decoded(
    tmp_path: Path,
) -> None:
    from agentlog._verify.checker import MAX_OFFSETS_BYTES
    from agentlog._writer import TraceWriter
    from agentlog.records import RunStart, WindowEnter

    steps = {f"s{k}": k for k in range(20_000)}
    assert len(msgspec.msgpack.encode(steps)) > MAX_OFFSETS_BYTES
    path = tmp_path / "t.zst"
    h = hashlib.sha256(b"e").digest()
    with TraceWriter(path) as w:
        w.put(RunStart(run=0, run_id="o" * 32, system="s", seed=1, task=None, meta={},
                       t_ns=0, generator=GENERATOR_ID, agentlog_version="test"))
        w.put(WindowEnter(run=0, window=0, name="w", parent=-1, t_ns=1, entry_hash=h,
                          entry=b"e", steps=steps, function="m:f"))
    found = [p for p in al.verify(path).problems if p.kind == "stream-offset"]
    assert len(found) == 1 and "bytes of stream offsets" in found[0].message
