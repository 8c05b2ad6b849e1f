"""Each ``select`` of a window of the agent loop, timed where the loop calls it.

Run: ``python tests/benchmarks/bench_select_in_loop.py [fresh|fixed] [--runs N]`` (prints
one line per call position; asserts nothing). The loop is ``bench_agent_loop.py``'s: each
window does 1 ms of CPU work, then five ``select``s over 200 candidates from a fresh list
of new ids (``fresh``, the default) or from one fixed list (``fixed``), inside ``al.record``
with runs of 10 windows appended to one file. Each call is timed on the calling thread's
CPU clock (``time.thread_time_ns``), so the load of a shared machine does not enter; the
line gives the median and mean over all windows for the first, second, ... ``select`` of
a window. The first ``select`` of a fresh pool prepares the pool and draws a block of
rows for it; the second enters the list into the list cache; the rest find both cached.
After the window's 1 ms of other work every call starts on cold caches, which is why these
numbers are larger than ``bench_select.py``'s tight loops.

A/B of two checkouts: ``PYTHONPATH=<checkout> python tests/benchmarks/...`` (the script
uses only the public API and ``bench_agent_loop``'s loop), processes alternating.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_agent_loop as loop
from _tempdir import bench_dir

import agentlog as al


def measure(folder: str, fresh: bool, runs: int) -> dict[int, list[int]]:
    clock = time.thread_time_ns
    times: dict[int, list[int]] = {s: [] for s in range(loop.SELECTIONS)}

    def step(question: str) -> int:
        loop.spin(loop.WORK_S)
        ids = loop.fresh_ids() if fresh else loop.FIXED_IDS
        total = 0
        for s in range(loop.SELECTIONS):
            t0 = clock()
            total += al.select(loop.PROBS, candidates=ids, name="doc")
            times[s].append(clock() - t0)
        return total

    windowed = al.window("step")(step)
    path = os.path.join(folder, "loop.zst")
    for r in range(runs):
        with al.record(path, seed=r, task="t", mode="a"):
            for w in range(loop.WINDOWS):
                windowed(f"q{w}")
    al.flush()
    return times


def main() -> None:
    fresh = "fixed" not in sys.argv[1:]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 60
    loop._ITERATIONS = loop._calibrate()
    with bench_dir("agentlog-bench-select-loop-") as folder:
        times = measure(folder, fresh, runs)
    print(f"load average {os.getloadavg()[0]:.1f}; {runs} runs x {loop.WINDOWS} windows, "
          f"{'a fresh pool' if fresh else 'one fixed pool'} of {loop.CANDIDATES} per window; "
          "caller CPU per select")
    for position, samples in times.items():
        print(f"select {position + 1} of the window: median "
              f"{statistics.median(samples) / 1000:7.1f} µs, mean "
              f"{statistics.mean(samples) / 1000:7.1f} µs")


if __name__ == "__main__":
    main()
