"""Distance throughput: many small transport problems and the controllability fixed point.

Run: ``python tests/benchmarks/bench_distance.py [--states N] [--repeat R] [--no-check]``.
Not collected by pytest. Prints one line per measurement with its target and a reference
measured in the same run, and exits non-zero when a target is missed (``--no-check`` to only
print).

Workloads (deterministic, seeded):

* Per-problem overhead of ``wasserstein_many`` against a bare ``ot.emd2`` call (default
  arguments, and ``check_marginals=False``), on 5,000 random problems of each size
  ``k × k`` (k = 2, 3, 5, 10) with random weights. No target; the point is the ratio.
* ``controllability_distance`` on two 50-state branch kernels (1-5 branches per state, drawn
  uniformly; 4 labels; 2-D interfaces) at γ = 0.9, β = 0.5 (bound 0.45), both runs (from
  ``d ≡ 0`` and ``d ≡ 1``) to ``tol = 1e-9``. Target ≤ 5 s. Reference: the same transport
  problems solved by ``ot.emd2`` one call each (timed on every problem of one operator step
  at the fixed point, then multiplied by the number of transport problems the run solved).
  A second workload with 1-10 branches per state is printed without a target.

Timings are the min and median of ``--repeat`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import ot
from numpy.typing import NDArray

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

sys.path.insert(0, str(Path(__file__).parent))
from _timing import timed

from agentlog.estimators import _controllability, _wasserstein, distance


def random_kernel(rng: np.random.Generator, n: int, n_labels: int,
                  max_branches: int) -> distance.BranchKernel:
    branches = []
    for _ in range(n):
        k = int(rng.integers(1, max_branches + 1))
        probs = rng.dirichlet(np.ones(k))
        branches.append([(int(rng.integers(n_labels)), int(rng.integers(n)), float(q))
                         for q in probs])
    return distance.BranchKernel(rng.random((n, 2)) * 0.5, branches, n_labels=n_labels)


def overhead_row(k: int, n_problems: int, repeat: int, rng: np.random.Generator) -> None:
    M = rng.random((n_problems, k, k))
    a = rng.dirichlet(np.ones(k), n_problems)
    b = rng.dirichlet(np.ones(k), n_problems)
    ragged, a_list, b_list = list(M), list(a), list(b)

    def bare() -> list[float]:
        return [float(ot.emd2(a[i], b[i], M[i])) for i in range(n_problems)]

    def unchecked() -> object:
        return [ot.emd2(a[i], b[i], M[i], check_marginals=False) for i in range(n_problems)]

    def many() -> NDArray[np.float64]:
        return distance.wasserstein_many(M, a=a, b=b)

    def many_ragged() -> object:
        return distance.wasserstein_many(ragged, a=a_list, b=b_list)

    per = [timed(f, repeat)[0] / n_problems * 1e6 for f in (bare, unchecked, many, many_ragged)]
    assert np.allclose(many(), bare(), rtol=1e-12, atol=1e-15), "values disagree"
    print(f"  {k:>3}  {per[0]:9.1f}  {per[1]:14.1f}  {per[2]:16.1f}  {per[3]:8.1f}  "
          f"{per[2] / per[0]:15.3f}×")


def bench_overhead(n_problems: int, repeat: int) -> None:
    print(f"per-problem cost, {n_problems:,} random k × k problems each (µs per problem)")
    print(f"  {'k':>3}  {'ot.emd2':>9}  {'emd2 unchecked':>14}  {'wasserstein_many':>16}  "
          f"{'ragged':>8}  {'ratio to ot.emd2':>16}")
    rng = np.random.default_rng(0)
    for k in (2, 3, 5, 10):
        overhead_row(k, n_problems, repeat, rng)


def bench_fixed_point(n: int, max_branches: int, repeat: int, target: float | None) -> bool:
    rng = np.random.default_rng(1)
    a, b = random_kernel(rng, n, 4, max_branches), random_kernel(rng, n, 4, max_branches)
    gamma, beta = 0.9, 0.5
    print(f"\ncontrollability_distance: two {n}-state kernels, 1-{max_branches} branches per "
          f"state ({a.source.size} and {b.source.size} branches), γ = {gamma}, β = {beta}")

    def run() -> distance.ControllabilityResult:
        return distance.controllability_distance(a, b, gamma=gamma, beta=beta)

    t = timed(run, repeat)
    r = run()
    # the reference: each transport problem of one step at the fixed point, by ot.emd2
    DL, DZ = _controllability._operator_iv(a, b, gamma, beta, None, None)
    op = _controllability._compile(a, b, gamma, beta, DL, DZ)
    op(r.distance)  # fills the shared cost buffer with the lifted costs at d†
    problems = [(pa, pb, M.copy()) for _, pa, pb, M in op.lp]
    t0 = time.perf_counter()
    values = [ot.emd2(pa, pb, M) for pa, pb, M in problems]
    per_emd2 = (time.perf_counter() - t0) / len(problems)
    ours = [_wasserstein._emd_solver()(pa, pb, M)[1] for pa, pb, M in problems]
    assert np.allclose(values, ours, rtol=1e-12, atol=1e-15), "solvers disagree"
    reference = per_emd2 * r.n_transport
    ok = target is None or t[0] <= target
    text = f"  fixed point, both runs{'':<14} min {t[0]:7.3f} s   median {t[1]:7.3f} s"
    if target is not None:
        text += f"   target ≤ {target:g} s {'ok' if ok else 'MISSED'}"
    print(text)
    print(f"  reference: ot.emd2 × {r.n_transport:,} transport problems = "
          f"{per_emd2 * 1e6:.1f} µs × {r.n_transport:,} = {reference:.3f} s "
          f"({reference / t[0]:.1f}× the fixed point)")
    print(f"  iterations {r.iterations}, contraction ratio {r.contraction_ratio:.6f} ≤ bound "
          f"{r.bound:g}, sup gap {r.sup_gap:.2e}, converged {r.converged}")
    assert r.converged and r.sup_gap <= 1e-6 and r.contraction_ratio <= r.bound + 1e-9
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--states", type=int, default=50)
    ap.add_argument("--problems", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-check", action="store_true", help="exit 0 even when a target is missed")
    args = ap.parse_args(argv)
    bench_overhead(args.problems, args.repeat)
    ok = bench_fixed_point(args.states, 5, args.repeat, 5.0)
    bench_fixed_point(args.states, 10, 1, None)
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
