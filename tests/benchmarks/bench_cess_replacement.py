"""CESS with and without replacement: bias of each form on each design, the eq. 10 interval.

Run: ``python tests/benchmarks/bench_cess_replacement.py [--pools 20000] [--seeds 40]``.
Not collected by pytest. Prints the README's CESS validity tables (markdown) and exits
non-zero when a correct form is off by more than 3 s.e. or the interval built on the true
θ+ misses θ* (``--no-check`` to only print).

The design is ``simulate`` of ``tests/estimators/test_cess_replacement.py`` (the suite runs
it at 50,000 trajectories): pools of N = 12 documents, budget K = 5, selection a softmax
of ±1.5·a (a correlates with Y) with a 0.1 uniform floor whose sign turns once the opened
evidence averages above 0.3 (adaptive), informative stopping (0.5 before a round when the
opened evidence leans positive, else 0.1), a misspecified outcome model (biased low).
With replacement an opened document keeps 0.3 of its weight; without, it gets 0. Bias is
the mean error over pools of the per-pool mean error; its s.e. is across pools (``--runs``
trajectories per pool are not independent).

Tables:

1. Each form on each design, against θ*: Des Raj's ordered form and eq. 6, raw DR and
   sequential IPW, the Opened Mean for scale.
2. Limited support: the 2 highest-a candidates have probability 0 at every round (ρ = 1/6,
   a fixed D+). Bias of raw DR against θ+ and θ*; how often the eq. 10 interval around
   the point estimate (CESS at λ = 1, i.e. Π[raw DR]) holds θ* (an identification region
   around a noisy point, not a confidence interval), and around the true θ+ (always).
3. A changed support: the 2 lowest-a candidates drop to 0 from round 2 on. D+ then depends
   on the run (a run that stops after round 1 keeps them), so the point estimate only
   approximates θ+: its bias against the realised θ+ is measured, not promised.

``--seeds S`` also reruns the suite's seeded check (50,000 trajectories) under seeds
0..S−1 and prints the mean and sd of each check's z = bias/s.e. (near 0 and 1 when the
3-s.e. tolerance fails about 0.3 % of seeds) and the smallest |z| of the biased forms.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentlog import DegenerateDataWarning
from agentlog.estimators import cess
from tests.estimators.test_cess_replacement import Runs, bias_se, simulate

FORMS = {"without": "Des Raj (without)", "with": "eq. 6 (with)"}


def cell(values: np.ndarray, target: np.ndarray, runs: Runs) -> tuple[str, float]:
    bias, se = bias_se(values, target, runs.pool)
    return f"{bias:+.4f} ± {se:.4f} ({bias / se:+.1f})", bias / se


def forms_table(pools: int, runs_per_pool: int, seed: int) -> bool:
    print(f"\n1. Each form on each design ({pools * runs_per_pool:,} trajectories per design, "
          "N = 12, K = 5): bias against θ* ± s.e. (z)\n")
    print("| design | form | raw DR | sequential IPW | Opened Mean |")
    print("| --- | --- | --- | --- | --- |")
    ok = True
    for design in ("without", "with"):
        runs = simulate(replacement=design, n_pools=pools, runs_per_pool=runs_per_pool,
                        seed=seed)
        for form in ("without", "with"):
            res = runs.estimate(form)
            dr, z_dr = cell(res.dr_raw, runs.theta_star, runs)
            ipw, z_ipw = cell(res.ipw, runs.theta_star, runs)
            om, _ = cell(res.opened_mean, runs.theta_star, runs)
            print(f"| {design} replacement | {FORMS[form]} | {dr} | {ipw} | {om} |")
            if form == design:
                ok &= abs(z_dr) <= 3 and abs(z_ipw) <= 3
    return ok


def support_tables(pools: int, runs_per_pool: int, seed: int) -> bool:
    ok = True
    for title, kwargs in (
        ("2. Limited support: 2 of 12 candidates unreachable at every round (ρ = 1/6)",
         {"unreachable": 2}),
        ("3. A changed support: 2 of 12 candidates drop to 0 from round 2 on",
         {"dropped": 2}),
    ):
        print(f"\n{title}\n")
        print("| design | mean ρ | raw DR − θ+ | raw DR − θ* | θ* in the interval around "
              "Π[raw DR] | θ* in the interval around the true θ+ |")
        print("| --- | --- | --- | --- | --- | --- |")
        for design in ("without", "with"):
            runs = simulate(replacement=design, n_pools=pools, runs_per_pool=runs_per_pool,
                            seed=seed, **kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                res = runs.estimate(rho=runs.rho)
            plus, z = cell(res.dr_raw, runs.theta_plus, runs)
            star, _ = cell(res.dr_raw, runs.theta_star, runs)
            held = float(((res.support_low <= runs.theta_star)
                          & (runs.theta_star <= res.support_high)).mean())
            low, high = cess.support_interval(runs.theta_plus, runs.rho)
            sharp = float(((low <= runs.theta_star) & (runs.theta_star <= high)).mean())
            print(f"| {design} replacement | {runs.rho.mean():.3f} | {plus} | {star} | "
                  f"{held:.1%} | {sharp:.1%} |")
            ok &= sharp == 1.0
            if "unreachable" in kwargs:
                ok &= abs(z) <= 3
    return ok


def seed_study(seeds: int) -> None:
    """The suite's checks (test_cess_replacement.py, 50,000 trajectories) over seeds."""
    z: dict[str, list[float]] = {}
    for seed in range(seeds):
        for design, offset in (("without", 1), ("with", 2)):
            runs = simulate(replacement=design, n_pools=5_000, runs_per_pool=10,
                            seed=seed * 10 + offset)
            for form in ("without", "with"):
                res = runs.estimate(form)
                for est in ("dr_raw", "ipw"):
                    bias, se = bias_se(getattr(res, est), runs.theta_star, runs.pool)
                    z.setdefault(f"{design} design, {FORMS[form]}, {est}", []).append(
                        bias / se)
    print(f"\nz = bias/s.e. of the suite's check over {seeds} seeds (50,000 trajectories "
          "each)\n")
    print("| check | mean z | sd z | min abs z | max abs z |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in z.items():
        v = np.array(values)
        print(f"| {name} | {v.mean():+.2f} | {v.std(ddof=1):.2f} | {np.abs(v).min():.1f} | "
              f"{np.abs(v).max():.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--pools", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=10, help="trajectories per pool")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=0, help="also the suite's check over seeds")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    start = time.perf_counter()
    ok = forms_table(args.pools, args.runs, args.seed)
    ok &= support_tables(args.pools, args.runs, args.seed)
    if args.seeds:
        seed_study(args.seeds)
    print(f"\n({time.perf_counter() - start:.1f} s)")
    if not ok and not args.no_check:
        print("FAILED: a correct form is off by more than 3 s.e., or the sharp interval "
              "missed θ*")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
