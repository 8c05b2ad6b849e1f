"""Crash safety at scale: SIGKILL an agent at random moments many times; asserts nothing.

Run: ``python tests/benchmarks/bench_crash.py [TRIALS]`` (default 300). Prints how many
traces recovered every flushed window, how many were torn mid-frame (reported as
truncated), and the records lost after the last flush (at most one frame interval).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir

import agentlog as al
from agentlog._records import WindowExit
from tests.core.test_crash_agent import INTERRUPTION, kill_trial


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with bench_dir() as folder, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda s: kill_trial(Path(folder), 10_000 + s), range(trials)))
        complete = torn = unexpected = 0
        beyond_flush = []
        for flushed, path in results:
            trace = al.read(path)
            exits = sum(isinstance(r, WindowExit) for r in trace.records)
            complete += exits >= flushed
            torn += trace.truncated
            beyond_flush.append(exits - flushed)
            kinds = {p.kind for p in al.verify(path).problems}
            unexpected += not kinds <= INTERRUPTION
    print(f"trials                                  {trials}")
    print(f"recovered every flushed window          {complete}/{trials}")
    print(f"torn tail reported as truncated         {torn}")
    print(f"verify problems beyond the interruption {unexpected}")
    print(f"windows recovered past the last flush   median {sorted(beyond_flush)[trials // 2]}")


if __name__ == "__main__":
    main()
