"""SIGTERM at random moments: hangs and returned windows lost, over many trials.

Run: ``python tests/benchmarks/bench_sigterm.py [--trials N] [--parallel K] [--kill]
[--threads T]``.

Each trial starts a child recording windows in a tight loop
(``tests/core/_sigterm_child.py``), sends SIGTERM after a seeded random delay (0-200 ms)
and waits at most 20 s for it to end. A quarter of the trials send the signal from
inside the child's own ``threading.Event.set()`` (the moment that used to deadlock the
handler). Prints, per durability: trials, hangs, how the child ended, returned windows
lost, and the time from SIGTERM to exit. ``--kill`` sends SIGKILL instead: with
``durability="window"`` or ``"fsync"`` no window that had returned may be lost.
``--threads T`` (T > 1) records from T threads at once instead
(``tests/core/_sigterm_threads_child.py``: one run, windows returned from every thread,
the signal 0.2-0.6 s after they start); run it with ``--parallel 1`` so the trials do not
share the CPUs. Asserts nothing; cleans up its temporary files.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import signal
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir  # noqa: E402

spec = importlib.util.spec_from_file_location("_sigterm_child",
                                              ROOT / "tests" / "core" / "_sigterm_child.py")
assert spec is not None and spec.loader is not None
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)
spec = importlib.util.spec_from_file_location(
    "_sigterm_threads_child", ROOT / "tests" / "core" / "_sigterm_threads_child.py")
assert spec is not None and spec.loader is not None
threads_child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(threads_child)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=210, help="in all, across durabilities")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    ap.add_argument("--threads", type=int, default=1, help="recording threads per child")
    args = ap.parse_args()
    sig = signal.SIGKILL if args.kill else signal.SIGTERM
    durabilities = ["frame", "window", "fsync"]
    threaded = args.threads > 1
    jobs = [(durabilities[i % 3], i, i % 4 == 3 and not args.kill and not threaded)
            for i in range(args.trials)]

    def run(job: tuple[str, int, bool], d: Path) -> tuple[str, bool, Any]:
        dur, seed, in_event_set = job
        if threaded:
            return dur, False, threads_child.trial(d, dur, seed, threads=args.threads, sig=sig)
        return dur, in_event_set, child.trial(d, dur, seed, in_event_set=in_event_set, sig=sig)

    with bench_dir(prefix="agentlog-sigterm-") as d, \
            ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda j: run(j, Path(d)), jobs))
    if threaded:
        print(f"{args.threads} recording threads per child")
    print(f"{'durability':<10} {'trials':>6} {'hangs':>5} {'exit':>14} {'windows returned':>17} "
          f"{'lost':>5} {'signal->exit median / max':>28}")
    for dur in durabilities:
        rows = [t for d_, _, t in results if d_ == dur]
        codes = collections.Counter(t.returncode for t in rows)
        secs = [t.seconds for t in rows]
        print(f"{dur:<10} {len(rows):>6} {sum(t.hung for t in rows):>5} "
              f"{', '.join(f'{c}x{n}' for c, n in codes.items()):>14} "
              f"{sum(t.returned for t in rows):>17,} {sum(t.lost for t in rows):>5} "
              f"{statistics.median(secs) * 1000:>17.0f} ms / {max(secs) * 1000:.0f} ms")
    inside = [t for _, e, t in results if e]
    print(f"of which signalled inside Event.set(): {len(inside)} trials, "
          f"{sum(t.hung for t in inside)} hangs, {sum(t.lost for t in inside)} windows lost")


if __name__ == "__main__":
    main()
