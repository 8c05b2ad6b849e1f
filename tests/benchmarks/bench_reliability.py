"""Reliability summaries: 100 groups × 50 runs with 2,000 bootstrap resamples each.

Run: ``python tests/benchmarks/bench_reliability.py [--groups G] [--runs N] [--repeat R]
[--no-check]``. Not collected by pytest. Prints one line per measurement with its target and
references measured in the same run, and exits non-zero when a target is missed
(``--no-check`` to only print).

Workload (deterministic, seeded): a long table of 5,000 runs, 10 models × 10 tasks × 50
seeds, rows shuffled, scores from a beta(2, 0.7) rounded to 3 digits (ties, like per-seed
F1). Measured:

* ``reliability.summary(scores, groups=(model, task), n_resamples=2000)``: mean, worst,
  CVaR@0.2, Reliability@0.9 and the bootstrap distribution of every group's mean (the
  interval is a quantile of it, taken by ``confidence_interval``). Target ≤ 1 s.
* the same with one label column (``groups=group_id``).
* reference 1: a bare ``numpy`` mean over the same array (``scores.mean()``).
* reference 2: the same bootstrap in plain numpy on pre-sorted, pre-grouped data with no
  validation, labels or tail statistics (``V[:, idx].mean(axis=-1)``, one (2000, 50) draw
  matrix): the floor of the resampling work itself.
* the same 100 groups summarised by a Python loop of ``summary`` calls, one per group
  (what a user without ``groups=`` would write).

Timings are the min and median of ``--repeat`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _timing import line as _line
from _timing import timed

from agentlog.estimators import reliability


def line(label: str, t: tuple[float, float], target: float | None = None,
         ref: tuple[float, float] | None = None, ref_label: str = "") -> bool:
    return _line(label, t, target, ref, ref_label, width=58, unit="ms")


TARGET_S = 1.0
B = 2000


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--groups", type=int, default=100, help="models × tasks (a square)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    side = round(args.groups ** 0.5)
    n_groups, runs = side * side, args.runs
    rng = np.random.default_rng(0)
    model = np.repeat([f"model-{i}" for i in range(side)], side * runs)
    task = np.tile(np.repeat([f"T{j}" for j in range(side)], runs), side)
    scores = np.round(rng.beta(2.0, 0.7, size=model.size), 3)
    perm = rng.permutation(model.size)
    scores, model, task = scores[perm], model[perm], task[perm]
    group_id = np.unique(np.stack([model, task], 1), axis=0, return_inverse=True)[1].ravel()

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; {n_groups} groups × "
          f"{runs} runs = {scores.size:,} scores, {B:,} resamples per group")
    bare = timed(lambda: scores.mean(), args.repeat)
    order = np.lexsort((scores, group_id))
    V = scores[order].reshape(n_groups, runs)
    idx = np.random.default_rng(0).integers(0, runs, size=(B, runs))
    floor = timed(lambda: V[:, idx].mean(axis=-1), args.repeat)
    ok = True
    t = timed(lambda: reliability.summary(scores, groups=(model, task), n_resamples=B),
              args.repeat)
    ok &= line("summary(groups=(model, task)), 2,000 resamples", t, TARGET_S)
    line("  reference: bare numpy scores.mean()", bare)
    print(f"{'':<58} {t[0] / bare[0]:,.0f}× the bare mean")
    line("  reference: plain-numpy bootstrap floor", floor)
    print(f"{'':<58} {t[0] / floor[0]:.1f}× the bootstrap floor")
    t1 = timed(lambda: reliability.summary(scores, groups=group_id, n_resamples=B),
               args.repeat)
    ok &= line("summary(groups=group_id), 2,000 resamples", t1, TARGET_S)
    masks = [group_id == g for g in range(n_groups)]
    loop = timed(lambda: [reliability.summary(scores[m], n_resamples=B) for m in masks],
                 max(1, args.repeat // 2))
    line("  a Python loop of summary() per group", loop)
    print(f"{'':<58} grouped call is {loop[0] / t[0]:.1f}× faster than the loop")
    r = reliability.summary(scores, groups=(model, task), n_resamples=B)
    ci = r.confidence_interval()
    print(f"check: {len(r)} groups, first {r.groups[0]} mean {r.mean[0]:.4f} "
          f"CI [{ci.low[0]:.4f}, {ci.high[0]:.4f}] CVaR@0.2 {r.cvar[0]:.4f}")
    if not ok and not args.no_check:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
