"""ASV summary timing: 10,000 trajectory-block resamples over 1,000 trajectories x 11
transitions (target <= 2 s), against a reference measured in the same run (a plain numpy
bootstrap of the mean interaction only). Run: ``python tests/benchmarks/bench_asv.py``."""

from __future__ import annotations

import numpy as np
from _timing import timed

from agentlog.estimators import asv


def main() -> None:
    rng = np.random.default_rng(0)
    T, k, B = 1_000, 11, 10_000
    traj = np.repeat(np.arange(T), k)
    corners = rng.normal(size=(4, T * k))
    f = asv.face(*corners)
    target = traj % 100
    for weighting in ("empirical", "equal-target"):
        best, _ = timed(lambda w=weighting: asv.summarize(
            f, trajectory=traj, target=target, weighting=w, n_resamples=B, seed=1), 3)
        print(f"asv.summarize ({weighting:<12}) {T} traj x {k} transitions, {B:,} resamples: "
              f"{best:.3f} s (target <= 2 s)")

    def reference() -> None:
        counts = rng.multinomial(T, np.full(T, 1 / T), size=B).astype(float)
        per_traj = np.bincount(traj, weights=f.interaction) / k
        _ = counts @ per_traj / T

    ref, _ = timed(reference, 3)
    print(f"reference: numpy bootstrap of the mean interaction only      {ref:.3f} s")


if __name__ == "__main__":
    main()
