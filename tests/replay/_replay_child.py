"""A replay in a child process, for the kill tests: ``python -m tests.replay._replay_child
OUT N SLEEP CONCURRENCY``. Exit 0 when done, 130 on Ctrl-C (after printing the summary)."""

from __future__ import annotations

import json
import sys

from agentlog.replay import ExecutionOptions, Unit, run_units


def units(n: int, sleep: float) -> list[Unit]:
    return [Unit(f"u{i:04d}", {"x": i, "sleep": sleep}, {"source_run": "r", "window": i})
            for i in range(n)]


def main() -> int:
    out, n, sleep, concurrency = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(
        sys.argv[4])
    try:
        summary = run_units(units(n, sleep), "tests.replay._unit_jobs:slow_score", out=out,
                            execution=ExecutionOptions(concurrency=concurrency, progress=False))
    except KeyboardInterrupt:
        print(json.dumps({"interrupted": True}), flush=True)
        return 130
    print(json.dumps(summary.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
