"""Peak memory (RSS) of the validity card's, certify's and ``estimate reliability``'s trace
loaders on 1 M and 4 M-record traces (issue 10).

Run: ``python tests/benchmarks/bench_memory_loaders.py [--sizes 1000000 4000000]``.
Not collected by pytest. Prints one line per measurement and exits non-zero when a
loader's peak over the reference grows by more than ``--max-growth-mb`` (default 20 MB)
from the smallest file to the largest.

The traces are ``bench_estimate_rss.py``'s (runs of ~1,000 records, so a 4x larger file
has 4x the runs): a ``step`` window with ``doc`` selections and ``stop`` continuations,
channel scores and ~990 ``f1`` scores per run. The loaders: ``ownership_map`` and
``replay_check`` (the validity card's trace audits), ``certify.from_traces`` (its readouts,
failures and the ``step`` entries) and ``EntryTable.from_traces``, and ``estimate
reliability``'s ``terminal_score_names`` + ``collect_scores``. Each streams one run at a
time, so its peak should stay flat while the file grows; ``al.read`` (the whole file in
memory) on the smallest file is the comparison. Each measurement runs in a fresh child
process that reports its own peak RSS (VmHWM, reset at its start); the reference is a child
that imports the same modules only, measured in the same run. The files are deleted
afterwards (a temporary directory).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
from _rss import run_child
from _tempdir import bench_dir
from bench_estimate_rss import RUN_RECORDS, write_trace

LOADERS = ("ownership_map", "replay_check", "certify.from_traces", "EntryTable.from_traces",
           "estimate reliability")

CHILD = """
import sys, time
import agentlog as al
from agentlog.cli._estimate_reliability import collect_scores, terminal_score_names
from agentlog.estimators import certify, reliability
what, path = sys.argv[1], sys.argv[2]
plan = certify.Plan.from_toml('''
estimand = "bench"
window = "step"
[readouts.f1]
tolerance = 0.05
[conditions]
shared_entry = true
''')
t0 = time.perf_counter()
if what == "ownership_map":
    n = reliability.ownership_map(path)["doc"].n_runs
elif what == "replay_check":
    n = len(reliability.replay_check(path).detail) and 0
elif what == "certify.from_traces":
    n = certify.from_traces(path, plan=plan).n_runs
elif what == "EntryTable.from_traces":
    n = len(certify.EntryTable.from_traces(path, window="step").entries)
elif what == "estimate reliability":
    from pathlib import Path
    files = [Path(path)]
    terminal_score_names(files)
    n = len(collect_scores(files, "f1"))
elif what == "read":
    n = len(al.read(path).runs)
else:
    n = 0
dt = time.perf_counter() - t0
print(n, dt, _peak_kb())
"""


def measure(what: str, path: Path) -> tuple[int, float, float]:
    """(items, seconds, peak RSS in MB) of one child process."""
    out = run_child(CHILD, what, str(path))
    return int(out[0]), float(out[1]), int(out[2]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    ap.add_argument("--max-growth-mb", type=float, default=20.0)
    args = ap.parse_args()
    peaks: dict[str, list[float]] = {w: [] for w in LOADERS}
    with bench_dir(prefix="agentlog-loaders-rss-") as d:
        _, _, base = measure("import", Path(d) / "none")
        print(f"{'reference: python + agentlog + estimators + CLI imported':<52} "
              f"peak RSS {base:7.1f} MB")
        for k, n in enumerate(sorted(args.sizes)):
            path = Path(d) / f"t{n}.zst"
            t0 = time.perf_counter()
            runs = write_trace(path, n)
            size = path.stat().st_size / 1e6
            print(f"{runs * RUN_RECORDS + 1:,} records ({runs:,} runs): {size:.1f} MB on disk, "
                  f"written in {time.perf_counter() - t0:.1f} s")
            for what in LOADERS + (("read",) if k == 0 else ()):
                got, dt, rss = measure(what, path)
                if what != "replay_check":
                    assert got == runs, (what, got, runs)
                if what in peaks:
                    peaks[what].append(rss - base)
                print(f"  {what:<24} {dt:7.1f} s  peak RSS {rss:7.1f} MB ({rss - base:+.1f} MB "
                      "over the reference)")
            path.unlink()
    grown = {w: p[-1] - p[0] for w, p in peaks.items()}
    print("growth from the smallest to the largest file: "
          + ", ".join(f"{w} {g:+.1f} MB" for w, g in grown.items()))
    missed = [w for w, g in grown.items() if g > args.max_growth_mb]
    if missed:
        print("missed:", ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
