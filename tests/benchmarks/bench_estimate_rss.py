"""Peak memory (RSS) of ``cess.from_traces`` and ``asv.from_traces`` on 1 M and 4 M-record traces.

Run: ``python tests/benchmarks/bench_estimate_rss.py [--sizes 1000000 4000000]``.
Not collected by pytest. Prints one line per measurement and exits non-zero when a
streamed loader's peak over the reference grows by more than ``--max-growth-mb``
(default 20 MB) from the smallest file to the largest.

Each trace holds runs of ~1,000 records (so a 4x larger file has 4x the runs, not longer
runs): a RunStart, one ``step`` window holding 4 ``doc`` selections over a 10-candidate
pool and 3 ``stop`` continuations, its 4 channel scores (direct/quote, x−/x+), ~990
plain scores, RunEnd; written with the writer directly. The loaders keep the current run
and their per-run arrays, so their peak should stay flat while the file grows; ``al.read``
(the whole file in memory) on the smallest file is the comparison. Each measurement runs
in a fresh child process that reports its own peak RSS (VmHWM, reset at its start); the
reference is a child that imports agentlog and the estimators only, measured in the same
run. The files are deleted afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
import numpy as np
from _rss import run_child
from _tempdir import bench_dir

from agentlog import _noise
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
    encode_artifact,
)

T0 = 1_732_900_000_000_000_000
RUN_RECORDS = 1_000
IDS = [f"d{i}" for i in range(10)]
PROBS = np.full(10, 0.1).tobytes()

CHILD = """
import sys, time
import agentlog as al
from agentlog.estimators import asv, cess
what, path = sys.argv[1], sys.argv[2]
ids = [f"d{i}" for i in range(10)]
y = {c: i / 10 for i, c in enumerate(ids)}
m = {c: i / 20 for i, c in enumerate(ids)}
t0 = time.perf_counter()
if what == "cess":
    n = len(cess.from_traces(path, outcomes=y, predictions=m, budget=4))
elif what == "asv":
    n = len(asv.from_traces(path, channels=("direct", "quote")).transitions)
elif what == "read":
    n = len(al.read(path).runs)
else:
    n = 0
dt = time.perf_counter() - t0
print(n, dt, _peak_kb())
"""


def write_trace(path: Path, n: int) -> int:
    """Runs of ``RUN_RECORDS`` records until ``n`` records; returns the number of runs."""
    pool = encode_artifact(IDS)
    pool_hash = hashlib.sha256(pool).digest()
    runs = max(1, n // RUN_RECORDS)
    rng = np.random.default_rng(0)
    with TraceWriter(path, frame_interval=3600) as w:
        w.put(Blob(hash=pool_hash, data=pool, kind="pool"))
        t = T0
        for r in range(runs):
            t += 1000
            w.put(RunStart(run=r, run_id=f"{r:032x}", system="bench", seed=r,
                           task=f"t{r % 4}", meta={}, t_ns=t, generator=_noise.GENERATOR_ID,
                           agentlog_version="bench"))
            entry = encode_artifact({"run": r})
            exit_ = encode_artifact({"return": r})
            entry_hash = hashlib.sha256(entry).digest()
            exit_hash = hashlib.sha256(exit_).digest()
            w.put(WindowEnter(run=r, window=0, name="step", parent=-1, t_ns=t,
                              entry_hash=entry_hash, entry=entry))
            for step in range(4):
                if step:
                    u = _noise.uniform(r, "stop", step - 1)
                    w.put(Continuation(run=r, window=0, name="stop", step=step - 1, p=0.9,
                                       u=u, decision=True, t_ns=t))
                choice = (r + step) % 10
                w.put(Selection(run=r, window=0, name="doc", step=step, owner="model",
                                pool=pool_hash, n=10, probs=PROBS, draws=PROBS,
                                choice=choice, n_zero=0, generator=_noise.GENERATOR_ID,
                                t_ns=t))
            w.put(WindowExit(run=r, window=0, name="step", t_ns=t, status=0,
                             exit_hash=exit_hash, exit=exit_, receipt=b"", wall_ns=1000,
                             selections=4))
            for ch, (before, after) in (("direct", (0.1, 0.5)), ("quote", (0.2, 0.1))):
                w.put(Score(run=r, window=-1, name="margin", value=before, channel=ch,
                            state_hash=entry_hash, transition=0, t_ns=t))
                w.put(Score(run=r, window=-1, name="margin", value=after + r % 7 / 100,
                            channel=ch, state_hash=exit_hash, transition=0, t_ns=t))
            # The bulk no estimator keeps; random values, as real scores (a file of
            # identical records compresses past what the reader accepts from a stranger).
            for value in rng.random(RUN_RECORDS - 14).tolist():
                t += 1
                w.put(Score(run=r, window=-1, name="f1", value=value, t_ns=t))
            w.put(RunEnd(run=r, t_ns=t, status=0, receipt=b"", n_windows=1,
                         n_selections=4, n_continuations=3))
            if r % 200 == 0:
                w.flush()  # keep the writer's queue (this process's memory) small
    return runs


def measure(what: str, path: Path) -> tuple[int, float, float]:
    """(items, seconds, peak RSS in MB) of one child process."""
    out = run_child(CHILD, what, str(path))
    return int(out[0]), float(out[1]), int(out[2]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    ap.add_argument("--max-growth-mb", type=float, default=20.0)
    args = ap.parse_args()
    peaks: dict[str, list[float]] = {"cess": [], "asv": []}
    with bench_dir(prefix="agentlog-estimate-rss-") as d:
        _, _, base = measure("import", Path(d) / "none")
        print(f"{'reference: python + agentlog + estimators imported':<52} "
              f"peak RSS {base:7.1f} MB")
        for k, n in enumerate(sorted(args.sizes)):
            path = Path(d) / f"t{n}.zst"
            t0 = time.perf_counter()
            runs = write_trace(path, n)
            size = path.stat().st_size / 1e6
            print(f"{runs * RUN_RECORDS + 1:,} records ({runs:,} runs): {size:.1f} MB on disk, "
                  f"written in {time.perf_counter() - t0:.1f} s")
            for what in ("cess", "asv") + (("read",) if k == 0 else ()):
                got, dt, rss = measure(what, path)
                assert got == runs, (what, got, runs)
                if what in peaks:
                    peaks[what].append(rss - base)
                print(f"  {what + '.from_traces' if what != 'read' else 'al.read':<16} "
                      f"{dt:7.1f} s  peak RSS {rss:7.1f} MB ({rss - base:+.1f} MB over the "
                      "reference)")
            os.unlink(path)
    grown = {w: p[-1] - p[0] for w, p in peaks.items()}
    print("growth from the smallest to the largest file: "
          + ", ".join(f"{w} {g:+.1f} MB" for w, g in grown.items()))
    missed = [w for w, g in grown.items() if g > args.max_growth_mb]
    if missed:
        print("missed:", ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
