"""CESS throughput: ``cess.estimate`` over 1,000,000 trajectories and a clustered bootstrap.

Run: ``python tests/benchmarks/bench_cess.py [--trajectories N] [--profile] [--no-check]``.
Not collected by pytest. Prints one line per measurement with its target and a reference
measured in the same run, and exits non-zero when a target is missed (``--no-check`` to
only print).

Workloads (deterministic, seeded):

* ``cess.estimate``: 1,000,000 trajectories × K = 10 rounds, pool N = 30; each trajectory
  stops after a uniform 1..10 rounds, later rounds are NaN (stopped trajectories). Target
  ≤ 1 s. Reference: a bare numpy pass over the same arrays,
  ``np.nansum(y / (N * p * s), axis=1)`` (sequential IPW and nothing else: no validation,
  no DR, no diagnostics). ``--profile`` times every line of ``estimate`` and of its input
  validation once (a ``sys.settrace`` line timer; the lines are numpy calls of 10-100 ms,
  so the tracer's microseconds per line do not matter) and prints the costliest lines.
* Question-clustered bootstrap: 200 questions × 6 runs, 4 estimator columns (the shape of
  [SSC]'s 1,200 MS2 trajectories), 10,000 resamples with ``cess.cluster_bootstrap``.
  Target ≤ 1 s. Reference: the same resampling in plain numpy with index draws
  (``per_question[rng.integers(0, Q, (B, Q))].mean(axis=1)``).

Timings are the min and median of ``--repeat`` runs after one warm-up run (the first pass
over 80 MB arrays pays page faults that later passes do not).

``--against OLD_CESS_PY`` (e.g. ``git show <commit>:estimators/_cess.py > /tmp/old.py``)
also times that copy of ``_cess.py`` on the same arrays, rounds interleaved with the
current one, checks that both give the same numbers and hash, and prints the median of the
paired ratios (an A/B that both sides see under the same load).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import numpy as np
from numpy.typing import NDArray

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _timing import line as _line
from _timing import timed

from agentlog.estimators import _cess, cess


def line(label: str, t: tuple[float, float], target: float | None = None,
         ref: tuple[float, float] | None = None, ref_label: str = "") -> bool:
    return _line(label, t, target, ref, ref_label, width=52, unit="s")


F = NDArray[np.float64]
N_POOL = 30
K = 10


def trajectories(n: int, seed: int = 0) -> tuple[F, F, F, F, F]:
    """``(y, p, s, m_chosen, m_bar)``: n trajectories, K rounds, NaN after each stop."""
    rng = np.random.default_rng(seed)
    T = rng.integers(1, K + 1, n)
    observed = np.arange(K)[None, :] < T[:, None]
    y = np.where(observed, rng.uniform(-1, 1, (n, K)), np.nan)
    p = np.where(observed, rng.uniform(0.01, 1, (n, K)), np.nan)
    c = rng.uniform(0.0, 0.3, (n, K))
    c[:, 0] = 0.0
    s = np.where(observed, np.cumprod(1 - c, axis=1), np.nan)
    m = np.where(observed, rng.uniform(-0.5, 0.5, (n, K)), np.nan)
    m_bar = rng.uniform(-0.5, 0.5, n)
    return y, p, s, m, m_bar


def profile_lines(fn: Callable[[], object], codes: set[CodeType], top: int = 14) -> None:
    """Time every line of the functions whose code objects are ``codes`` over one call."""
    cost: dict[tuple[str, int], float] = defaultdict(float)
    last: dict[int, tuple[tuple[str, int], float]] = {}

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        now = time.perf_counter()
        key = id(frame)
        if key in last:
            where, t0 = last[key]
            cost[where] += now - t0
        if event == "line":
            last[key] = ((frame.f_code.co_name, frame.f_lineno), time.perf_counter())
        elif event == "return":
            last.pop(key, None)
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if event == "call" and frame.f_code in codes else None

    source = Path(_cess.__file__).read_text().splitlines()
    sys.settrace(tracer)
    try:
        t0 = time.perf_counter()
        fn()
        total = time.perf_counter() - t0
    finally:
        sys.settrace(None)
    print(f"\nline costs of one traced cess.estimate call ({total:.3f} s traced, time spent in "
          "a called function counts on the calling line):")
    for (name, lineno), t in sorted(cost.items(), key=lambda kv: -kv[1])[:top]:
        text = source[lineno - 1].strip()
        print(f"  {t:7.3f} s  {100 * t / total:5.1f} %  _cess.py:{lineno:<4} {name:<13} "
              f"{text[:70]}")


def bench_estimate(n: int, repeat: int, profile: bool) -> bool:
    y, p, s, m, m_bar = trajectories(n)
    n_stopped = int(np.isnan(y[:, -1]).sum())
    print(f"cess.estimate: {n:,} trajectories × K = {K} (N = {N_POOL}), "
          f"{n_stopped:,} stopped early (NaN-padded), {np.isfinite(y).sum():,} observed rounds")

    def run_estimate() -> object:
        return cess.estimate(y, p, s, m, m_bar, N_POOL, budget=K, lam=0.5)

    def run_reference() -> object:
        return np.nansum(y / (N_POOL * p * s), axis=1)

    ref = timed(run_reference, repeat)
    est = timed(run_estimate, repeat)
    line("  reference: np.nansum(y / (N p s), axis=1)", ref, None)
    ok = line("  cess.estimate (validation, 5 estimators, diagnostics)", est, 1.0, ref,
              "the reference")
    res = cess.estimate(y, p, s, m, m_bar, N_POOL, budget=K, lam=0.5)
    assert np.allclose(res.ipw * K, np.nansum(y / (N_POOL * p * s), axis=1), rtol=1e-12,
                       atol=1e-12), "estimate and the reference disagree"
    if profile:
        profile_lines(run_estimate, {_cess.estimate.__code__, _cess._estimate_iv.__code__,
                                     _cess.inputs_hash.__code__})
    return ok


def bench_against(n: int, repeat: int, old_path: str) -> None:
    """Interleaved A/B of ``cess.estimate`` against an older copy of ``_cess.py``."""
    import importlib.util
    import statistics

    spec = importlib.util.spec_from_file_location("agentlog_old_cess", old_path)
    assert spec is not None and spec.loader is not None, old_path
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old  # dataclasses look their module up
    spec.loader.exec_module(old)
    y, p, s, m, m_bar = trajectories(n)

    def run(mod: Any) -> Any:
        return mod.estimate(y, p, s, m, m_bar, N_POOL, budget=K, lam=0.5)

    a, b = run(old), run(_cess)
    for f in ("opened_mean", "outcome_regression", "ipw", "dr_raw", "estimate", "ess",
              "max_weight", "min_ps", "n_rounds"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.inputs_hash == b.inputs_hash, "the inputs hash changed"
    times: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(repeat):
        for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
            t0 = time.perf_counter()
            run(old if name == "old" else _cess)
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(f"  {name + ' _cess.py' if name == 'old' else 'this _cess.py':<50} min "
              f"{min(ts):8.3f} s   median {statistics.median(ts):8.3f} s")
    ratio = statistics.median(x / o for x, o in zip(times["new"], times["old"], strict=True))
    print(f"  this / old: median of {repeat} paired ratios {ratio:.3f} (same numbers, same "
          "hash)")


def bench_bootstrap(Q: int, R: int, resamples: int, repeat: int) -> bool:
    rng = np.random.default_rng(1)
    values = rng.normal(size=(Q * R, 4))
    clusters = np.repeat(np.array([f"q{i:03d}" for i in range(Q)]), R)
    print(f"\nquestion-clustered bootstrap: {Q} questions × {R} runs, {values.shape[1]} "
          f"columns, {resamples:,} resamples")

    def run_bootstrap() -> object:
        return cess.cluster_bootstrap(values, clusters, n_resamples=resamples, seed=0)

    def run_plain() -> F:
        per_q = values.reshape(Q, R, -1).mean(axis=1)  # runs are grouped by question here
        idx = np.random.default_rng(0).integers(0, Q, (resamples, Q))
        out: F = per_q[idx].mean(axis=1)
        return out

    ref = timed(run_plain, repeat)
    boot = timed(run_bootstrap, repeat)
    line("  reference: plain numpy index resampling", ref, None)
    ok = line("  cess.cluster_bootstrap", boot, 1.0, ref, "the reference")
    out = cess.cluster_bootstrap(values, clusters, n_resamples=resamples, seed=0)
    # Different draws, same distribution: the two standard errors agree to Monte Carlo error.
    se_plain = run_plain().std(axis=0, ddof=1)
    assert np.allclose(out.standard_error, se_plain, rtol=0.05), (out.standard_error, se_plain)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=1_000_000)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--runs-per-question", type=int, default=6)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="time each line of estimate")
    ap.add_argument("--no-check", action="store_true", help="exit 0 even when a target is missed")
    ap.add_argument("--against", metavar="OLD_CESS_PY", help="A/B against this _cess.py copy")
    args = ap.parse_args(argv)
    ok = bench_estimate(args.trajectories, args.repeat, args.profile)
    if args.against:
        bench_against(args.trajectories, max(args.repeat, 6), args.against)
    ok &= bench_bootstrap(args.questions, args.runs_per_question, args.resamples, args.repeat)
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
