"""Replay engine throughput: a cached scorer, a 50 ms scorer over concurrency, Ray overhead.

Run: ``python tests/benchmarks/bench_replay.py [--units N] [--rounds R] [--no-ray]``
(prints a table; asserts nothing; its temp files are removed at the end).

Targets (issue 13): with a cached scorer, at least 2,000 scored states per second locally
on 2 cores; with a scorer that sleeps 50 ms, throughput grows with ``concurrency`` up to
64; the Ray executor's overhead per unit.

* **cached scorer**: each unit scores two states (x− and x+), each through one hit of a
  warmed SQLite ``ModelCache`` (``ctx.cached``), as a channel scorer with a frozen cache
  does. Reference, measured in the same run with rounds interleaved: the same job called
  in a plain loop (no engine, no output), so the ratio is what the engine adds: the
  thread pool, the event loop and writing every unit as a sealed run.
* **50 ms scorer**: a sync job that sleeps 50 ms; units per second against the ideal
  ``concurrency / 0.05``.
* **Ray**: a trivial job on a local cluster (``num_cpus=2``) against the local executor;
  the difference per unit is the overhead. The cluster's start is timed apart.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from _tempdir import bench_dir  # noqa: E402

from agentlog.replay import (  # noqa: E402
    ExecutionOptions,
    ModelCache,
    RetryPolicy,
    Unit,
    UnitContext,
    UnitScore,
    request_key,
    run_units,
)

_KEYS = {}


def _key(x: int, corner: int) -> object:
    k = _KEYS.get((x, corner))
    if k is None:
        k = _KEYS[(x, corner)] = request_key("openai.chat", {
            "model": "m", "temperature": 0,
            "messages": [{"role": "user", "content": f"state {x}/{corner}: which option?"}]})
    return k


def cached_scorer(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """Two states per unit, each read through one cache hit."""
    x = int(unit.payload["x"])
    out = []
    for corner in (0, 1):
        result = ctx.cached(_key(x, corner), lambda: {"margin": 0.0})  # type: ignore[arg-type]
        out.append(UnitScore("margin", float(result.response["margin"]), channel="quote",
                             layout=0, wave=0, transition=x,
                             state_hash=hashlib.sha256(f"{x}/{corner}".encode()).digest()))
    return out


def sleepy_scorer(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    time.sleep(0.05)
    return [UnitScore("margin", float(unit.payload["x"]))]


def trivial(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    return [UnitScore("margin", float(unit.payload["x"]), transition=int(unit.payload["x"]))]


def _units(n: int, tag: str = "") -> list[Unit]:
    return [Unit(f"{tag}{i:06d}", {"x": i}, {"source_run": "r", "window": i})
            for i in range(n)]


def bench_cached(tmp: Path, n: int, rounds: int, concurrency: int) -> None:
    cache_path = tmp / "cache.sqlite3"
    with ModelCache(cache_path) as warm:
        for i in range(n):
            for corner in (0, 1):
                warm.call(_key(i, corner), lambda: {"margin": 0.25})  # type: ignore[arg-type]
    units = _units(n)
    bare, engine = [], []
    with ModelCache(cache_path, mode="read-only") as cache:
        for r in range(rounds):
            t0 = time.perf_counter()
            for u in units:
                cached_scorer(u, UnitContext(u.key, 1, cache, frozen=True))
            bare.append(time.perf_counter() - t0)
            out = tmp / f"cached-{r}.zst"
            t0 = time.perf_counter()
            s = run_units(units, cached_scorer, out=out, cache=cache_path, frozen=True,
                          execution=ExecutionOptions(concurrency=concurrency, progress=False))
            engine.append(time.perf_counter() - t0)
            assert s.done == n and s.cache_hits == 2 * n, s
            out.unlink()
    states = 2 * n
    print(f"cached scorer, {n} units = {states} states, concurrency {concurrency}, "
          f"{rounds} interleaved rounds")
    for label, xs in (("bare job loop (reference)", bare), ("run_units, frozen cache", engine)):
        print(f"  {label:<34} {states / min(xs):9,.0f} states/s best   "
              f"{states / statistics.median(xs):9,.0f} median")
    print(f"  engine / bare time: {min(engine) / min(bare):.2f}× (best), "
          f"{statistics.median(engine) / statistics.median(bare):.2f}× (median); "
          f"engine cost per unit beyond the job: "
          f"{(min(engine) - min(bare)) / n * 1e6:.0f} µs")


def bench_sleepy(tmp: Path, concurrencies: Sequence[int]) -> None:
    print("50 ms scorer: units/s by concurrency (ideal = concurrency / 0.05 s)")
    for c in concurrencies:
        n = max(20, 10 * c)
        out = tmp / f"sleepy-{c}.zst"
        t0 = time.perf_counter()
        s = run_units(_units(n), sleepy_scorer, out=out,
                      execution=ExecutionOptions(concurrency=c, progress=False,
                                                 retry=RetryPolicy(max_attempts=1)))
        wall = time.perf_counter() - t0
        assert s.done == n
        rate = n / wall
        print(f"  concurrency {c:>3}: {n:>4} units in {wall:6.2f} s = {rate:8.1f} units/s "
              f"({rate / (c / 0.05) * 100:5.1f} % of ideal {c / 0.05:.0f})")
        out.unlink()


def bench_ray(tmp: Path, n: int, rounds: int) -> None:
    try:
        import ray
    except ImportError:
        print("Ray: not installed (pip install 'agentlog[ray]'), skipped")
        return
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "tests" / "benchmarks"), os.environ.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t0
    job = "bench_replay:trivial"
    local, remote = [], []
    try:
        for r in range(rounds):
            for executor, xs in (("local", local), ("ray", remote)):
                out = tmp / f"ray-{executor}-{r}.zst"
                t0 = time.perf_counter()
                s = run_units(_units(n), job, out=out,
                              execution=ExecutionOptions(executor=executor, concurrency=2,
                                                         progress=False))
                xs.append(time.perf_counter() - t0)
                assert s.done == n
                out.unlink()
    finally:
        ray.shutdown()
    print(f"Ray: local cluster start {start:.1f} s; trivial job, {n} units, concurrency 2, "
          f"{rounds} interleaved rounds")
    print(f"  local executor {min(local) / n * 1e6:8.0f} µs/unit best, "
          f"{statistics.median(local) / n * 1e6:8.0f} median")
    print(f"  ray executor   {min(remote) / n * 1e6:8.0f} µs/unit best, "
          f"{statistics.median(remote) / n * 1e6:8.0f} median")
    print(f"  Ray overhead per unit: {(min(remote) - min(local)) / n * 1e6:.0f} µs (best), "
          f"{(statistics.median(remote) - statistics.median(local)) / n * 1e6:.0f} µs "
          f"(median); ray / local time {min(remote) / min(local):.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    with bench_dir("agentlog-bench-replay-") as folder:
        tmp = Path(folder)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}")
        bench_cached(tmp, args.units, args.rounds, args.concurrency)
        bench_sleepy(tmp, (1, 4, 16, 64))
        if not args.no_ray:
            bench_ray(tmp, args.units, max(2, args.rounds // 2))


if __name__ == "__main__":
    main()
