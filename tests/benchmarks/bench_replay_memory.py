"""Peak memory (RSS) of ``run_units`` over many units with big payloads: encode all vs lazy.

Run: ``python tests/benchmarks/bench_replay_memory.py [--n 20000] [--kb 20]``.
Not collected by pytest. Prints one line per measurement, then the ratios.

Each measurement runs ``run_units`` (local executor, ``concurrency=8``, a trivial sync
job) over ``--n`` units whose payloads hold ``--kb`` KB of bytes, in a fresh child
process that reports its own peak RSS (VmHWM, reset at its start) and its RSS after the
imports (the floor). Two inputs:

* ``generator``: every unit's payload is its own bytes, made when the unit is yielded
  (what ``iter_channel_units`` does while reading a trace);
* ``list-shared``: a list of units sharing one state's bytes (the layouts and waves of one
  transition share its frozen states): the user's list is small, the encoded copies not.

``before`` is the previous engine's code path, reproduced in the child: every unit is
encoded into a key -> bytes map first, and that map stays alive while the units run
(decoded one by one at dispatch); ``after`` is this engine: ``run_units`` takes the input
as given. The rounds are interleaved (before, after, after, before, ...). The output
files are written under a ``bench_dir`` and removed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
from _rss import run_child
from _tempdir import bench_dir

CHILD = """
import os, sys
import msgspec
from agentlog.replay import Unit, UnitScore, run_units
mode, kind, n, kb, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with open("/proc/self/status") as f:
    floor = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))

def job(unit, ctx):
    return [UnitScore("size", float(len(unit.payload["state"])))]

shared = os.urandom(kb * 1000)

def make(i):
    state = shared if kind == "list-shared" else os.urandom(kb * 1000)
    return Unit(f"u{i:07d}", {"state": state, "layout": i % 4}, {"window": i})

units = [make(i) for i in range(n)] if kind == "list-shared" else (make(i) for i in range(n))
if mode == "before":
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
    wire = {}
    for u in units:
        wire[u.key] = enc.encode([u.key, dict(u.payload), dict(u.provenance)])
    units = (Unit(*dec.decode(b)) for b in wire.values())
summary = run_units(units, job, out=out, concurrency=8, progress=False)
assert summary.done == n, summary
print(floor, _peak_kb())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="units (default 20000)")
    parser.add_argument("--kb", type=int, default=20, help="KB of payload per unit")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    args = parser.parse_args()
    print(f"run_units over {args.n:,} units of {args.kb} KB payloads, concurrency 8; "
          f"load average {os.getloadavg()[0]:.2f}")
    peaks: dict[tuple[str, str], list[float]] = {}
    with bench_dir("agentlog-bench-replay-memory-") as folder:
        for kind in ("generator", "list-shared"):
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for mode in order:
                    out = Path(folder) / f"{kind}-{mode}-{r}.zst"
                    floor, peak = (int(w) for w in run_child(
                        CHILD, mode, kind, str(args.n), str(args.kb), str(out)))
                    out.unlink()
                    peaks.setdefault((kind, mode), []).append(peak / 1024)
                    print(f"  {kind:11s} {mode:6s} round {r}: peak {peak / 1024:8.1f} MB "
                          f"(after imports {floor / 1024:.1f} MB)")
    payload_mb = args.n * args.kb * 1000 / 2**20
    print(f"payloads in all: {payload_mb:,.0f} MB")
    for kind in ("generator", "list-shared"):
        before = min(peaks[(kind, "before")])
        after = min(peaks[(kind, "after")])
        print(f"{kind:11s}: peak before {before:8.1f} MB, after {after:8.1f} MB "
              f"({before / after:.1f}x less)")


if __name__ == "__main__":
    main()
