"""ASV summary timing: 10,000 trajectory-block resamples over 1,000 trajectories x 11
transitions (target <= 2 s), against a reference measured in the same run (a plain numpy
bootstrap of the mean interaction only). Run: ``python tests/benchmarks/bench_asv.py``."""

from __future__ import annotations

import time

import numpy as np

from agentlog.estimators import asv


def main() -> None:
    rng = np.random.default_rng(0)
    T, k, B = 1_000, 11, 10_000
    traj = np.repeat(np.arange(T), k)
    corners = rng.normal(size=(4, T * k))
    f = asv.face(*corners)
    target = traj % 100
    for weighting in ("empirical", "equal-target"):
        best = min(_timed(lambda w=weighting: asv.summarize(
            f, trajectory=traj, target=target, weighting=w, n_resamples=B, seed=1))
            for _ in range(3))
        print(f"asv.summarize ({weighting:<12}) {T} traj x {k} transitions, {B:,} resamples: "
              f"{best:.3f} s (target <= 2 s)")

    def reference() -> None:
        counts = rng.multinomial(T, np.full(T, 1 / T), size=B).astype(float)
        per_traj = np.bincount(traj, weights=f.interaction) / k
        _ = counts @ per_traj / T

    ref = min(_timed(reference) for _ in range(3))
    print(f"reference: numpy bootstrap of the mean interaction only      {ref:.3f} s")


def _timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
