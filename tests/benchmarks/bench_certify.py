"""Certified-leaderboard throughput: 20 systems × 50 tasks × 34 readouts, 2,000 sign flips.

Run: ``python tests/benchmarks/bench_certify.py [--repeat N] [--no-check]``. Not collected
by pytest. Prints one line per measurement with its target and a reference measured in the
same run, and exits non-zero when a target is missed (``--no-check`` to only print).

Workload (deterministic, seeded): 20 systems with spread-out means, 50 tasks in 23 clusters
([LBC] §6: 50 held-out tasks in 23 subfields), 34 readouts on six axes (the admitted
readouts of §4), a task effect shared by every system, a declared shared entry (every pair
an exact cell), the whole family of 190 pairs, so 190 × 35 cells (the composite and each
readout) are decided; then Appendix F.5: 2,000 sign-flip draws shared by every cell and
leave-one-cluster-out over the 23 clusters.

* ``certify.certify`` with its calibration. Target ≤ 10 s.
* ``certify.certify(calibrate=False)``: admissibility, eq. 4, rank intervals, ladder.
* Reference: the same sign-flip null in plain numpy, one loop over draws: per draw, flip the
  centred differences of every cell and recompute the mean and the CR1 error directly
  (``(K, N)`` arrays; no Bonferroni, no radius, no family bookkeeping). It does the same
  arithmetic the straightforward way, so the ratio shows what the per-cluster sums buy
  (the board's default CR2 variance differs from CR1 only by a weight per cluster).

Timings are the min and median of ``--repeat`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _timing import line as _line
from _timing import timed

from agentlog.estimators import certify


def line(label: str, t: tuple[float, float], target: float | None = None,
         ref: tuple[float, float] | None = None, ref_label: str = "") -> bool:
    return _line(label, t, target, ref, ref_label, width=58, unit="s")


F = NDArray[np.float64]
N_SYSTEMS, N_TASKS, N_CLUSTERS, N_READOUTS, N_DRAWS = 20, 50, 23, 34, 2000
AXES = {"retrieval": 6, "synthesis": 6, "reasoning": 13, "planning": 2, "writing": 2,
        "form": 5}


def plan_text(n_resamples: int) -> str:
    lines = ['estimand = "whole-system contrast under one shared entry ([LBC] eq. 2)"',
             "[conditions]", "shared_entry = true",
             "[calibration]", f"n_resamples = {n_resamples}"]
    k = 0
    for axis, count in AXES.items():
        for _ in range(count):
            lines += [f"[readouts.r{k:02d}]", "tolerance = 0.2", f'axis = "{axis}"']
            k += 1
    assert k == N_READOUTS
    return "\n".join(lines)


def workload(seed: int = 0) -> tuple[dict[str, F], NDArray[np.intp]]:
    rng = np.random.default_rng(seed)
    clusters = np.concatenate([np.arange(N_CLUSTERS), rng.integers(0, N_CLUSTERS,
                                                                    N_TASKS - N_CLUSTERS)])
    task = rng.normal(0, 0.08, (N_TASKS, 1)) + rng.normal(0, 0.05, (N_CLUSTERS, 1))[clusters]
    means = np.linspace(0.45, 0.55, N_SYSTEMS)  # close enough that many pairs stay undecided
    scores = {f"sys{i:02d}": means[i] + task + rng.normal(0, 0.05, (N_TASKS, N_READOUTS))
              for i in range(N_SYSTEMS)}
    return scores, clusters


def reference(scores: dict[str, F], clusters: NDArray[np.intp], n_draws: int) -> float:
    """The sign-flip null, straightforwardly: one draw at a time over (K, N) arrays."""
    names = list(scores)
    w = np.full(N_READOUTS, 1.0 / N_READOUTS)
    vals = np.stack([np.column_stack([scores[s] @ w, scores[s]]) for s in names])
    ia, ib = np.triu_indices(len(names), 1)
    d = (vals[ia] - vals[ib]).transpose(0, 2, 1).reshape(-1, N_TASKS)
    d = d - d.mean(axis=1, keepdims=True)
    onehot = np.zeros((N_TASKS, N_CLUSTERS))
    onehot[np.arange(N_TASKS), clusters] = 1.0
    G = N_CLUSTERS
    rng = np.random.default_rng(0)
    worst = np.empty(n_draws)
    for b in range(n_draws):
        s = rng.integers(0, 2, G) * 2.0 - 1.0
        x = d * s[clusters]
        mean = x.mean(axis=1)
        resid = (x - mean[:, None]) @ onehot
        se = np.sqrt(G / (G - 1) * (resid**2).sum(axis=1)) / N_TASKS
        worst[b] = np.max(np.abs(mean) / se)
    return float(worst.mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-check", action="store_true", help="print only; never fail")
    args = parser.parse_args(argv)
    scores, clusters = workload()
    plan = certify.Plan.from_toml(plan_text(N_DRAWS))
    board = certify.certify(scores, clusters=clusters, plan=plan)
    assert board.calibration is not None
    cells = len(board.targets) * board.family_size
    print(f"{N_SYSTEMS} systems × {N_TASKS} tasks ({N_CLUSTERS} clusters) × {N_READOUTS} "
          f"readouts: {board.family_size} pairs × {len(board.targets)} targets = {cells} "
          f"cells; {board.counts()['certified']} composite pairs certified; family-wise "
          f"rate {board.calibration.family_rate:.4f} (c* = {board.calibration.c_star:.3f}) "
          f"over {N_DRAWS} sign flips; LOCO Jaccard {board.calibration.jaccard_mean:.3f}")
    ref = timed(lambda: reference(scores, clusters, N_DRAWS), args.repeat)
    full = timed(lambda: certify.certify(scores, clusters=clusters, plan=plan), args.repeat)
    bare = timed(lambda: certify.certify(scores, clusters=clusters, plan=plan,
                                         calibrate=False), args.repeat)
    ok = line("certify + calibration (2,000 sign flips, LOCO)", full, 10.0, ref,
              "the plain-numpy sign-flip loop")
    line("certify without calibration", bare, None, ref, "the plain-numpy sign-flip loop")
    line("reference: plain-numpy sign-flip loop (2,000 draws)", ref, None)
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
