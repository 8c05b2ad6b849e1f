"""Hostile trace files against ``agentlog verify`` and ``agentlog inspect``: time and peak RSS.

Run: ``python tests/benchmarks/bench_hostile_files.py``. Not collected by pytest.
Each file (record and byte bombs, huge declared lengths, deep nesting, ext values,
a 10 GiB sparse zero tail, 200,000 empty frames, a header-only file, records outside
any run, and ~370 KB files of 320 MB of compressible probability vectors: in 20 frames,
with and without their candidate pool, or in one frame) is given to ``agentlog verify
--json`` and ``agentlog inspect --json`` (the vector files also to ``agentlog export
--format otlp-json``) in a fresh child process that reports the command's wall time
and its own peak RSS (imports excluded: the child first runs the command on a header-only
file, then resets its peak).
Target: every file rejected (exit 2) or reported (exit 1, or 0 with markers for inspect)
within 2 s and 256 MB. Exits non-zero when one misses it. The files are built in a
temporary folder and deleted afterwards; the in-suite version of the same files is
``tests/core/test_hostile_files.py``.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
import msgspec
from _rss import run_child
from _tempdir import bench_dir
from test_verify_memory import N, write_hostile, write_pooled

from agentlog._trace_format import FILE_HEADER, FRAME_PREFIX, FrameEncoder

TIME_LIMIT_S = 2.0
RSS_LIMIT_MB = 256.0

CHILD = """
import contextlib, io, sys, time
from agentlog.cli import app
warmup, *args = sys.argv[1:]
def run(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0
# The command, agentlog's names and typer's parser load on first use: run the command once
# on a header-only file first, as the time excludes imports.
run([args[0], warmup, *args[2:]])
_reset_peak()
t0 = time.perf_counter()
code = run(args)
dt = time.perf_counter() - t0
print(code, dt, _peak_kb())
"""


def frame(content: bytes, n: int, level: int = 19) -> bytes:
    return FrameEncoder(level=level).encode_raw(content, n)


def array(n: int) -> bytes:
    return b"\xdd" + struct.pack(">I", n)


def tiny_scores(n: int) -> bytes:
    return frame(array(n) + msgspec.msgpack.encode([8, 0, 0, "", 0]) * n, n)


def run_start(meta: object) -> bytes:
    return msgspec.msgpack.encode(
        [[1, 0, "r" * 32, "s", 0, None, meta, 0, "splitmix64-gumbel/1", "0"]])


def nested(depth: int) -> dict[str, object]:
    meta: dict[str, object] = {}
    cur = meta
    for _ in range(depth):
        nxt: dict[str, object] = {}
        cur["a"] = nxt
        cur = nxt
    return meta


def byte_bomb() -> bytes:
    zeros = bytes(400 << 20)
    content = msgspec.msgpack.encode([[9, hashlib.sha256(zeros).digest(), zeros, "artifact"]])
    return frame(content, 1, level=1)


def long_header() -> bytes:
    head = struct.pack("<III", 200 << 20, 1, 0)
    return FRAME_PREFIX + head + struct.pack("<I", zlib.crc32(head)) + b"x" * 64


def orphan_scores(n: int) -> bytes:
    rec = msgspec.msgpack.encode([8, 3, 0, "f1", 0.5, None, None, None, None, None, 12345])
    return frame(array(n) + rec * n, n, level=1)


FILES: dict[str, Callable[[], bytes]] = {
    "record bomb: 31 x 262,144 six-byte records (6 KB)": lambda: tiny_scores(1 << 18) * 31,
    "record bomb: 40 x 60,000 records": lambda: tiny_scores(60_000) * 40,
    "a frame declaring 11.2 M records": lambda: tiny_scores(11_200_000),
    "byte bomb: a 400 MB zero Blob": byte_bomb,
    "a 200 MB declared payload, 64 bytes there": long_header,
    "a record nested 100,000 deep": lambda: frame(
        run_start({"a": msgspec.Raw(b"\x91" * 100_000 + b"\x00")}), 1),
    "metadata nested 900 deep (90 bytes)": lambda: frame(run_start(nested(900)), 1),
    "a msgpack ext value in metadata": lambda: frame(
        run_start({"x": msgspec.msgpack.Ext(5, b"ab")}), 1),
    "200,000 empty frames": lambda: frame(array(0), 0) * 200_000,
    "the file header only": lambda: b"",
    "5,000 records outside any run": lambda: orphan_scores(5_000),
}


# Files of huge vectors, small on disk (issue 30.5: 311 KB cost 445 MB in verify).
VECTOR_FILES: dict[str, Callable[[Path], Path]] = {
    "vectors: 20 frames of a 1 M-candidate selection": lambda p: write_hostile(
        p, frames=20, n=N),
    "vectors: the same with their 1 M-id pool": lambda p: write_pooled(p, frames=20, n=N),
    "vectors: one frame of a 20 M-candidate selection": lambda p: write_hostile(
        p, frames=1, n=20 * N),
}


def measure(warmup: Path, *args: str) -> tuple[int, float, float]:
    out = run_child(CHILD, str(warmup), *args)
    return int(out[0]), float(out[1]), int(out[2]) / 1024


def main() -> int:
    missed = []
    with bench_dir(prefix="agentlog-hostile-") as d:
        warmup = Path(d) / "warmup.zst"
        warmup.write_bytes(FILE_HEADER)
        paths = {}
        for i, (label, build) in enumerate(FILES.items()):
            p = Path(d) / f"h{i}.zst"
            p.write_bytes(FILE_HEADER + build())
            paths[label] = p
        sparse = Path(d) / "sparse.zst"
        sparse.write_bytes(FILE_HEADER + frame(run_start({}), 1))
        with sparse.open("r+b") as f:
            f.truncate(sparse.stat().st_size + (10 << 30))
        paths["a 10 GiB sparse zero tail"] = sparse
        for i, (label, write) in enumerate(VECTOR_FILES.items()):
            paths[label] = write(Path(d) / f"v{i}.zst")
        print(f"{'file':<52} {'size':>10}  {'command':<8} exit  {'time':>7}  {'peak RSS':>9}")
        out = str(Path(d) / "spans.json")
        for label, p in paths.items():
            size = p.stat().st_size
            commands = [["verify", str(p), "--json"], ["inspect", str(p), "--json"]]
            if label in VECTOR_FILES:
                commands.append(["export", str(p), "--format", "otlp-json", "--out", out])
            for args in commands:
                cmd = args[0]
                code, dt, rss = measure(warmup, *args)
                ok = dt <= TIME_LIMIT_S and rss <= RSS_LIMIT_MB and code in (0, 1, 2)
                print(f"{label:<52} {size:>10,}  {cmd:<8} {code:>4}  {dt:6.2f}s  {rss:7.1f} MB"
                      f"  {'ok' if ok else 'MISSED'}")
                if not ok:
                    missed.append(f"{cmd} {label}")
    print(f"target: every file within {TIME_LIMIT_S:g} s and {RSS_LIMIT_MB:g} MB peak RSS; "
          + ("all ok" if not missed else "missed: " + "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
