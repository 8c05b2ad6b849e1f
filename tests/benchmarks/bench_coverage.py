"""Coverage of the bootstrap intervals at small samples, per method (seeded study).

Run: ``python tests/benchmarks/bench_coverage.py [--trials N] [--asv-trials N]
[--asv-resamples B]``. Not collected by
pytest. Prints, per design and sample size, the share of seeded trials whose 95 % interval
contains the known truth, for ``method="percentile"``, ``"basic"`` and ``"BCa"``, with the
Monte Carlo standard error ``√(0.95·0.05/trials)``. The README's coverage table and the
``MIN_RUNS_FOR_COVERAGE`` / ``MIN_TRAJECTORIES_FOR_COVERAGE`` thresholds (the smallest size
from which every design — for reliability every bounded-score design — covers ≥ 0.92) come
from this script's output (``--trials 2000 --asv-trials 400 --asv-resamples 1000``).

Designs:

* ``reliability.summary`` (the mean of n runs, 2,000 resamples): scores drawn from a
  normal, a lognormal(0, 1) (right-skewed, like costs or latencies), a Bernoulli(0.3)
  (success/failure runs) and a beta(2, 0.7) (left-skewed scores in [0, 1], like per-seed
  F1). Truth: the distribution's mean. The trials of one size are summarised in one
  grouped call (one group per trial).
* ``asv.summarize`` (the mean Ω over T trajectories × 11 transitions, ``--asv-resamples``
  trajectory-block resamples): Ω = trajectory effect + transition noise, the trajectory
  effect normal or centred exponential (skewed), the noise normal. Truth: 0.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentlog import DegenerateDataWarning
from agentlog.estimators import asv, reliability

METHODS = ("percentile", "basic", "BCa")
LEVEL = 0.95

Draw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
RELIABILITY_DESIGNS: dict[str, tuple[Draw, float]] = {
    "normal": (lambda r, s: r.normal(size=s), 0.0),
    "lognormal": (lambda r, s: r.lognormal(size=s), float(np.exp(0.5))),
    "bernoulli(0.3)": (lambda r, s: (r.random(s) < 0.3).astype(float), 0.3),
    "beta(2, 0.7)": (lambda r, s: r.beta(2.0, 0.7, size=s), 2.0 / 2.7),
}
#: Terminal scores of agent runs are bounded (success, F1, accuracy): the warning threshold
#: comes from these designs; the lognormal shows what heavy tails need.
BOUNDED = ("normal", "bernoulli(0.3)", "beta(2, 0.7)")
ASV_DESIGNS: dict[str, Draw] = {
    "normal effects": lambda r, s: r.normal(size=s),
    "skewed effects": lambda r, s: r.exponential(size=s) - 1.0,
}


def reliability_coverage(design: str, n: int, trials: int, seed: int) -> dict[str, float]:
    draw, truth = RELIABILITY_DESIGNS[design]
    rng = np.random.default_rng([seed, n])
    scores = draw(rng, (trials, n)).ravel()
    groups = np.repeat(np.arange(trials), n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = reliability.summary(scores, groups=groups, n_resamples=2000, seed=seed)
    out = {}
    for m in METHODS:
        low, high = res.confidence_interval(LEVEL, method=m)  # type: ignore[arg-type]
        out[m] = float(np.mean((low <= truth) & (truth <= high)))
    return out


def asv_coverage(design: str, n_traj: int, trials: int, seed: int, k: int = 11,
                 n_resamples: int = 2000) -> dict[str, float]:
    draw = ASV_DESIGNS[design]
    rng = np.random.default_rng([seed, n_traj, 1])
    hits = dict.fromkeys(METHODS, 0)
    traj = np.repeat(np.arange(n_traj), k)
    for _ in range(trials):
        effect = draw(rng, (n_traj,))[traj]
        omega = effect + 0.5 * rng.normal(size=n_traj * k)
        before0 = rng.normal(size=n_traj * k)
        after0 = before0 + rng.normal(size=n_traj * k)
        before1 = rng.normal(size=n_traj * k)
        # after1 − before1 − (after0 − before0) = Ω
        after1 = before1 + (after0 - before0) + omega
        f = asv.face(before0, after0, before1, after1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            s = asv.summarize(f, trajectory=traj, n_resamples=n_resamples,
                              seed=int(rng.integers(2**31)))
        for m in METHODS:
            low, high = s.confidence_interval("mean_interaction", method=m)  # type: ignore[arg-type]
            hits[m] += int(low <= 0.0 <= high)
    return {m: hits[m] / trials for m in METHODS}


def table(title: str, rows: list[tuple[str, int, dict[str, float]]], trials: int,
          size: str) -> None:
    print(f"\n{title} — 95% intervals, {trials} seeded trials per cell")
    print(f"{'design':<16} {size:>4}  " + "  ".join(f"{m:>10}" for m in METHODS)
          + "   MC s.e.")
    for design, n, cov in rows:
        se = np.sqrt(0.95 * 0.05 / trials)
        print(f"{design:<16} {n:>4}  " + "  ".join(f"{cov[m]:>10.3f}" for m in METHODS)
              + f"   {se:.3f}")


def threshold(rows: list[tuple[str, int, dict[str, float]]], method: str,
              designs: tuple[str, ...] | None = None) -> int | None:
    """The smallest size from which every design (of ``designs``) at every larger size
    covers ≥ 0.92."""
    rows = [r for r in rows if designs is None or r[0] in designs]
    sizes = sorted({n for _, n, _ in rows})
    ok = [all(c[method] >= 0.92 for _, n, c in rows if n == size) for size in sizes]
    for i, size in enumerate(sizes):
        if all(ok[i:]):
            return size
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000, help="trials per reliability cell")
    ap.add_argument("--asv-trials", type=int, default=1000, help="trials per ASV cell")
    ap.add_argument("--asv-resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rel_rows = [(d, n, reliability_coverage(d, n, args.trials, args.seed))
                for d in RELIABILITY_DESIGNS for n in (5, 10, 20, 30, 50, 100)]
    table("reliability.summary: the mean of n runs (2,000 resamples)", rel_rows, args.trials,
          "n")
    for m in METHODS:
        print(f"  {m}: covers >= 0.92 from n = {threshold(rel_rows, m, BOUNDED)} on the "
              f"bounded-score designs (MIN_RUNS_FOR_COVERAGE), from n = "
              f"{threshold(rel_rows, m)} with the lognormal too")
    asv_rows = [(d, t, asv_coverage(d, t, args.asv_trials, args.seed,
                                    n_resamples=args.asv_resamples))
                for d in ASV_DESIGNS for t in (5, 10, 20, 30, 50, 100)]
    table(f"asv.summarize: mean Ω, trajectory-block bootstrap ({args.asv_resamples:,} "
          "resamples)", asv_rows, args.asv_trials, "T")
    for m in METHODS:
        print(f"  {m}: covers >= 0.92 from T = {threshold(asv_rows, m)}")


if __name__ == "__main__":
    main()
