"""The writer's queue stays bounded when producers outrun it: peak queue and peak RSS.

Run: ``python tests/benchmarks/bench_backpressure.py [--selections N] [--candidates K]``.
Two workloads, each in a fresh child process (so ``ru_maxrss`` is its own):

* 4 producer threads putting small ``Score`` records as fast as they can (500,000 in all);
* ``--selections`` (10,000) ``Selection`` records over ``--candidates`` (10,000) candidates
  (160 KB of float64 each), from one thread.

Prints the peak number of queued records, the records dropped, and the peak RSS against
the RSS of the same child before it started writing. Asserts nothing; cleans up.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir  # noqa: E402


def _child(kind: str, path: str, n: int, k: int) -> None:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from agentlog._records import Score, Selection
    from agentlog._writer import TraceWriter

    if kind == "small":
        records = [Score(run=0, window=i, name="f1", value=float(i)) for i in range(125_000)]
    else:
        probs = np.random.default_rng(0).dirichlet(np.ones(k)).tobytes()
        draws = np.random.default_rng(1).gumbel(size=k).tobytes()
        records = [Selection(run=0, window=-1, name="doc", step=i, owner="model",
                             pool=b"p" * 32, n=k, probs=probs, draws=draws, choice=0, n_zero=0,
                             generator="bench/1") for i in range(n)]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    w = TraceWriter(path, mode="w")
    peak = [0]

    def produce(batch: list[object]) -> None:
        for r in batch:
            w.put(r)  # type: ignore[arg-type]
            q = w.pending
            if q > peak[0]:
                peak[0] = q

    threads = [threading.Thread(target=produce, args=(records,))
               for _ in range(4 if kind == "small" else 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close(timeout=600)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{peak[0]} {w.dropped} {w.records_written} {base} {rss}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--selections", type=int, default=10_000)
    ap.add_argument("--candidates", type=int, default=10_000)
    args = ap.parse_args()
    with bench_dir(prefix="agentlog-backpressure-") as d:
        for kind, label in (("small", "4 threads x 125,000 small records"),
                            ("sel", f"{args.selections:,} selections of "
                                    f"{args.candidates:,} candidates")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, os.path.join(d, f"{kind}.zst"),
                 str(args.selections), str(args.candidates)],
                capture_output=True, text=True, check=True).stdout.split()
            peak, dropped, written, base, rss = map(int, out)
            print(f"{label:<44} peak queue {peak:>9,} records   dropped {dropped:>7,}   "
                  f"written {written:>9,}   peak RSS {rss / 1024:>7,.0f} MB "
                  f"(before writing {base / 1024:,.0f} MB)")


if __name__ == "__main__":
    main()
