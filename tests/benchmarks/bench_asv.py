"""ASV summary timing: 10,000 trajectory-block resamples over 1,000 trajectories x 11
transitions (target <= 2 s, BCa included), against a reference measured in the same run in
interleaved rounds (a plain numpy bootstrap of the mean interaction only). Also prints the
share of the leave-one-trajectory-out pass that BCa's acceleration needs.
Run: ``python tests/benchmarks/bench_asv.py``."""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np

from agentlog.estimators import asv

ROUNDS = 3


def main() -> None:
    rng = np.random.default_rng(0)
    T, k, B = 1_000, 11, 10_000
    traj = np.repeat(np.arange(T), k)
    corners = rng.normal(size=(4, T * k))
    f = asv.face(*corners)
    target = traj % 100

    def reference() -> None:
        counts = rng.multinomial(T, np.full(T, 1 / T), size=B).astype(float)
        per_traj = np.bincount(traj, weights=f.interaction) / k
        _ = counts @ per_traj / T

    def summary(weighting: str, resamples: int) -> Callable[[], object]:
        return lambda: asv.summarize(f, trajectory=traj, target=target, weighting=weighting,
                                     n_resamples=resamples, seed=1)

    jobs: dict[str, Callable[[], object]] = {"reference": reference}
    for weighting in ("empirical", "equal-target"):
        jobs[weighting] = summary(weighting, B)
        # 2 resamples: what is left is the fixed cost, mostly the jackknife pass of BCa
        jobs[f"{weighting}, 2 resamples"] = summary(weighting, 2)
    times: dict[str, list[float]] = {name: [] for name in jobs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in jobs.values():  # warm-up
            fn()
        for _ in range(ROUNDS):  # interleaved: every job sees the same machine load
            for name, fn in jobs.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    ref = min(times["reference"])
    print(f"reference: numpy bootstrap of the mean interaction only   min {ref:.3f} s")
    for weighting in ("empirical", "equal-target"):
        best = min(times[weighting])
        fixed = min(times[f"{weighting}, 2 resamples"])
        print(f"asv.summarize ({weighting:<12}) {T} traj x {k} transitions, {B:,} resamples: "
              f"min {best:.3f} s, median {statistics.median(times[weighting]):.3f} s "
              f"(target <= 2 s), {best / ref:.2f}x reference; fixed cost incl. the BCa "
              f"jackknife {fixed:.3f} s ({fixed / best:.0%})")


if __name__ == "__main__":
    main()
