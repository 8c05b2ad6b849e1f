"""Peak memory (RSS) and time of ``verify`` and ``inspect`` on 1 M and 10 M-record traces.

Run: ``python tests/benchmarks/bench_verify_rss.py [--sizes 1000000 10000000]``.
Not collected by pytest. Prints one line per measurement and exits non-zero when
``verify`` or ``inspect`` of a file peaks above ``--target-mb`` (default 100 MB).

Each trace is one run written with the writer directly (``RunStart``, then
Continuation and Score records in a 1:9 mix with valid draws, then ``RunEnd``), so
``verify`` checks every record and finds nothing wrong. Each measurement runs in a
fresh child process that reports its own peak RSS (VmHWM, reset at its start); the reference is
a child that only imports agentlog and the CLI, measured in the same run. The files
are deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
from _rss import run_child
from _tempdir import bench_dir

from agentlog import _noise
from agentlog._records import Continuation, RunEnd, RunStart, Score
from agentlog._writer import TraceWriter

T0 = 1_732_900_000_000_000_000
SEED = 7

CHILD = """
import sys, time
import agentlog as al
from agentlog.cli._inspect import summarize_path
from pathlib import Path
what, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if what == "verify":
    report = al.verify(path)
    assert report.ok, report.problems[:3]
    n = report.records
elif what == "inspect":
    n = summarize_path(Path(path))["records"]
elif what == "read":
    n = len(al.read(path).records)
else:
    n = 0
dt = time.perf_counter() - t0
print(n, dt, _peak_kb())
"""


def write_trace(path: Path, n: int) -> None:
    """One run of ``n`` records: RunStart, a 1:9 Continuation/Score mix, RunEnd."""
    with TraceWriter(path, frame_interval=3600) as w:
        w.put(RunStart(run=0, run_id="b" * 32, system="bench", seed=SEED, task="t",
                       meta={"n": n}, t_ns=T0, generator=_noise.GENERATOR_ID,
                       agentlog_version="bench"))
        step = 0
        noise_seed = _noise.noise_seed(SEED, "t", _noise.GENERATOR_ID)
        for i in range(n - 2):
            t = T0 + 20_000 * (i + 1)
            if i % 10 == 0:
                u = _noise.uniform(noise_seed, "stop", step)
                w.put(Continuation(run=0, window=-1, name="stop", step=step, p=0.9, u=u,
                                   decision=u < 0.9, t_ns=t))
                step += 1
            else:
                w.put(Score(run=0, window=-1, name="f1", value=(i % 1000) / 1000, t_ns=t))
            if i % 200_000 == 0:
                w.flush()  # keep the writer's queue (this process's memory) small
        w.put(RunEnd(run=0, t_ns=T0 + 20_000 * n, status=0, receipt=b"", n_windows=0,
                     n_selections=0, n_continuations=0))


def measure(what: str, path: Path) -> tuple[int, float, float]:
    """(records, seconds, peak RSS in MB) of one child process."""
    out = run_child(CHILD, what, str(path))
    return int(out[0]), float(out[1]), int(out[2]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--target-mb", type=float, default=100.0)
    ap.add_argument("--read", action="store_true",
                    help="also measure al.read (in memory) on files up to 1 M records")
    args = ap.parse_args()
    missed = []
    with bench_dir(prefix="agentlog-rss-") as d:
        _, _, base = measure("import", Path(d) / "none")
        print(f"{'reference: python + agentlog + CLI imported':<52} peak RSS {base:7.1f} MB")
        for n in args.sizes:
            path = Path(d) / f"t{n}.zst"
            t0 = time.perf_counter()
            write_trace(path, n)
            size = path.stat().st_size / 1e6
            print(f"{n:,} records: {size:.1f} MB on disk, written in "
                  f"{time.perf_counter() - t0:.1f} s")
            whats = ["verify", "inspect"] + (["read"] if args.read and n <= 1_000_000 else [])
            for what in whats:
                got, dt, rss = measure(what, path)
                assert got == n, (what, got, n)
                ok = what == "read" or rss <= args.target_mb
                print(f"  {what:<8} {n:>12,} records  {dt:7.1f} s  peak RSS {rss:7.1f} MB "
                      f"({rss - base:+.1f} MB over the reference)"
                      + ("" if what == "read" else
                         f"  target <= {args.target_mb:.0f} MB  {'ok' if ok else 'MISSED'}"))
                if not ok:
                    missed.append(f"{what} {n}")
            os.unlink(path)
    if missed:
        print("missed:", ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
