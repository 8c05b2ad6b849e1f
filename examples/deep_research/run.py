"""Record a small study of the deep-research agent into a folder.

Run it with ``python -m agentlog.examples.deep_research.run --out runs/`` (or as a plain
script), then look at the traces with ``agentlog inspect`` and ``agentlog verify``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:
    from .agent import RANKINGS, run_study, task_ids
else:  # run as a plain script: python examples/deep_research/run.py
    from agentlog.examples.deep_research import RANKINGS, run_study, task_ids


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="runs", help="folder for the traces (default: runs)")
    parser.add_argument("--tasks", type=int, default=4, help="number of questions")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per question and ranking")
    parser.add_argument("--rankings", nargs="+", choices=RANKINGS, default=["agent", "reversed"])
    parser.add_argument("--budget", type=int, default=4, help="documents opened at most (K)")
    args = parser.parse_args(argv)
    paths = run_study(args.out, tasks=task_ids(args.tasks), rankings=args.rankings,
                      seeds=range(args.seeds), budget=args.budget)
    print(f"recorded {len(paths)} trace{'s' * (len(paths) != 1)} into {args.out}/")
    print(f"next: agentlog inspect {paths[0]}  ·  agentlog verify {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
