"""What the demo's ASV section costs: record-time evaluator vs channel replay, interleaved.

A: record the default study (20 questions x 2 rankings x 3 seeds) with the record-time
   evaluator and build the ASV face from the traces (the demo before channel replay).
B: record it without the evaluator, replay the retrieval transitions under direct and quote
   (4 layouts each: 960 units) and build the face from the replay's output (the demo now).

Rounds alternate A and B so both see the same machine load; the full ``agentlog demo``
(with CESS, reliability and the certified board) is timed last. Temporary folders are
removed. Run: ``python tests/benchmarks/bench_demo_replay.py [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _tempdir import bench_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from agentlog.cli._demo import (
        replay_asv_demo,
        run_demo,
        summarize_asv_demo,
    )
    from agentlog.cli._demo_pools import (
        DEMO_BUDGET,
        DEMO_CANDIDATES,
        DEMO_POOL_SEED,
    )
    from agentlog.examples.deep_research import run_study, task_ids

    tasks = task_ids(20)

    def record(folder: Path, evaluate: bool) -> list[Path]:
        return run_study(folder, tasks=tasks, seeds=range(3), budget=DEMO_BUDGET,
                         n_candidates=DEMO_CANDIDATES, pool_seed=DEMO_POOL_SEED,
                         evaluate=evaluate)

    def record_time(folder: Path) -> tuple[float, float]:
        t0 = time.perf_counter()
        paths = record(folder, True)
        t1 = time.perf_counter()
        summarize_asv_demo(paths)
        return t1 - t0, time.perf_counter() - t1

    def replayed(folder: Path) -> tuple[float, float]:
        t0 = time.perf_counter()
        paths = record(folder, False)
        t1 = time.perf_counter()
        out, _ = replay_asv_demo(paths, folder)
        summarize_asv_demo([out])
        return t1 - t0, time.perf_counter() - t1

    with bench_dir("agentlog-bench-demo-") as folder:
        base = Path(folder)
        a: list[tuple[float, float]] = []
        b: list[tuple[float, float]] = []
        for i in range(args.rounds):
            a.append(record_time(base / f"a{i}"))
            b.append(replayed(base / f"b{i}"))
        for label, rows in (("A record-time evaluator", a), ("B channel replay", b)):
            rec = [r[0] for r in rows]
            asv = [r[1] for r in rows]
            tot = [r[0] + r[1] for r in rows]
            print(f"{label:<26} record min {min(rec):.2f} s med {statistics.median(rec):.2f} s"
                  f" | ASV min {min(asv):.2f} s med {statistics.median(asv):.2f} s"
                  f" | total min {min(tot):.2f} s med {statistics.median(tot):.2f} s")
        ta = min(r[0] + r[1] for r in a)
        tb = min(r[0] + r[1] for r in b)
        print(f"B / A (min totals): {tb / ta:.2f}x, +{tb - ta:.2f} s")
        demo = []
        for i in range(max(2, args.rounds // 2)):
            t0 = time.perf_counter()
            run_demo(base / f"demo{i}")
            demo.append(time.perf_counter() - t0)
        print(f"agentlog demo (run_demo, default): min {min(demo):.2f} s, median "
              f"{statistics.median(demo):.2f} s")


if __name__ == "__main__":
    main()
