"""``agentlog import inspect`` on large ``.eval`` logs: time and peak RSS at 10³, 10⁴ and
10⁵ samples.

Run: ``python tests/benchmarks/bench_inspect_import.py [--sizes 1000 10000 100000]``. Not
collected by pytest. A real log of 200 samples is written by ``inspect_ai.eval`` (mockllm;
the tests' ``large`` task); the larger logs repeat its samples under new ids, each
serialized by inspect_ai's own JSON encoder into a zip with its compression, member
layout and header (``inspect_ai.log.write_eval_log`` had not written 10⁵ samples after
45 minutes: its recorder compares each buffered sample with every other, and an eval of
10⁵ samples would take hours here). Each import runs in a fresh child that reports its
wall time and own peak RSS (VmHWM); the reference child reads the log's header only
(``read_eval_log(header_only=True)``), the floor of any reader. Peak RSS should stay flat
while the samples grow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
from _rss import run_child
from _tempdir import bench_dir

ROOT = Path(__file__).resolve().parents[2]

GROW = """
import sys, zipfile
from inspect_ai._util.json import to_json_safe
from inspect_ai._util.zipfile import zipfile_compress_kwargs
from inspect_ai.log import read_eval_log
from inspect_ai.log._recorders.eval import LogStart, _eval_log_header
base = read_eval_log(sys.argv[1])
n = int(sys.argv[2])
base.eval.dataset.samples = n
base.eval.dataset.sample_ids = list(range(n))
summaries = []
with zipfile.ZipFile(sys.argv[3], "w", **zipfile_compress_kwargs) as z:
    z.writestr("_journal/start.json", to_json_safe(
        LogStart(version=base.version, eval=base.eval, plan=base.plan), indent=None))
    for i in range(n):
        s = base.samples[i % len(base.samples)].model_copy(update={"id": i, "uuid": None})
        z.writestr(f"samples/{i}_epoch_{s.epoch}.json", to_json_safe(s, indent=None))
        summaries.append(s.summary())
    z.writestr("summaries.json", to_json_safe(summaries, indent=None))
    z.writestr("reductions.json", to_json_safe(base.reductions or [], indent=None))
    z.writestr("header.json", to_json_safe(_eval_log_header(base), indent=None))
print(0, _peak_kb())
"""

IMPORT = """
import sys, time
from agentlog.adapters.inspect_ai import import_logs
t0 = time.perf_counter()
result = import_logs(sys.argv[1], sys.argv[2])
assert result.runs == int(sys.argv[3]), result.runs
print(time.perf_counter() - t0, _peak_kb())
"""

HEADER = """
import sys, time
from inspect_ai.log import read_eval_log
import agentlog.adapters.inspect_ai
t0 = time.perf_counter()
read_eval_log(sys.argv[1], header_only=True)
print(time.perf_counter() - t0, _peak_kb())
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args(argv)
    rows = []
    with bench_dir("agentlog-bench-inspect-") as tmp:
        folder = Path(tmp)
        code = ("import sys; from tests.adapters.test_inspect_import import write_logs; "
                "write_logs(sys.argv[1], sys.argv[2])")
        subprocess.run([sys.executable, "-c", code, str(folder / "base"), "large:200"],
                       cwd=ROOT, check=True, capture_output=True,
                       env={**os.environ, "INSPECT_LOG_LEVEL": "error"})
        (base,) = (folder / "base").glob("*.eval")
        for n in args.sizes:
            log_dir = folder / f"log-{n}"
            log_dir.mkdir()
            log = log_dir / f"large-{n}.eval"
            run_child(GROW, str(base), str(n), str(log))
            size_mb = log.stat().st_size / 2**20
            header_s, header_kb = (float(x) for x in run_child(HEADER, str(log)))
            out = run_child(IMPORT, str(log_dir), str(folder / f"traces-{n}"), str(n))
            seconds, peak_kb = float(out[0]), int(out[1])
            rows.append((n, size_mb, seconds, peak_kb / 1024, header_s, header_kb / 1024))
            print(f"{n:>7,} samples ({size_mb:.0f} MB log): import {seconds:.1f} s "
                  f"({n / seconds:,.0f} samples/s), peak {peak_kb / 1024:.0f} MB; header "
                  f"only: {header_s:.1f} s, {header_kb / 1024:.0f} MB", flush=True)
    print("\n| samples | log | import | peak RSS | reading the header only |")
    print("|---|---|---|---|---|")
    for n, size_mb, seconds, peak, header_s, header_mb in rows:
        print(f"| {n:,} | {size_mb:.0f} MB | {seconds:.1f} s ({n / seconds:,.0f}/s) | "
              f"{peak:.0f} MB | {header_s:.1f} s, {header_mb:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
