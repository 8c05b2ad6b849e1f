"""Caller-thread CPU per call of ``select`` and of windows: an A/B that survives a loaded machine.

Run: ``python tests/benchmarks/bench_cpu_ab.py select`` or ``... windows`` (prints one JSON
object: ``{row: [min µs, median µs, reference min µs, reference median µs]}``; asserts
nothing). On a shared machine wall-clock batches measure the scheduler; CPU time
(``time.thread_time`` of the calling thread, ``time.process_time`` for the rows that
include the writer's threads) does not. Each row alternates batches of the call with
batches of its reference in one process.

A/B of two checkouts, processes alternating (the script uses only the public API)::

    for r in 1 2 3 4 5; do for tree in /tmp/old /tmp/new; do
        (cd /tmp && PYTHONPATH=$tree python $OLDPWD/tests/benchmarks/bench_cpu_ab.py select)
    done; done

``select`` rows: a cached pool at N = 10, N = 32 (the largest vector ``select`` draws
without numpy passes) and N = 1,000 against numpy's Gumbel-max of the same size (caller
thread; then all threads, the writer flushed inside the clock), and a fresh pool of 1,000
new ids per call against the cached pool's ``select``.
``windows`` rows: a positional call, a keyword call and an awaited coroutine window,
each against its undecorated twin.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import agentlog as al

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir

Row = list[float]


def _summary(own: list[float], ref: list[float]) -> Row:
    return [min(own), statistics.median(own), min(ref), statistics.median(ref)]


def _batch(fn: Callable[[], object], number: int, clock: Callable[[], float] = time.thread_time,
           flush: bool = False) -> float:
    t0 = clock()
    for _ in range(number):
        fn()
    if flush:
        al.flush()
    return (clock() - t0) / number * 1e6


def select_rows(folder: str) -> dict[str, Row]:
    rng = np.random.default_rng(0)
    out: dict[str, Row] = {}
    with al.record(os.path.join(folder, "s.zst"), seed=1):
        for n, number in ((10, 4000), (32, 3000), (1000, 1000)):
            ids = [f"doc-{i:04d}" for i in range(n)]
            p = rng.dirichlet(np.ones(n))

            def own(p: Any = p, ids: list[str] = ids) -> int:
                return al.select(p, candidates=ids, name="d")

            def ref(p: Any = p, n: int = n) -> int:
                return int(np.argmax(np.log(p) + rng.gumbel(size=n)))

            mine, theirs = [], []
            for _ in range(9):
                al.flush()
                mine.append(_batch(own, number))
                theirs.append(_batch(ref, number))
            out[f"N={n}"] = _summary(mine, theirs)
            mine, theirs = [], []
            for _ in range(7):
                al.flush()
                mine.append(_batch(own, number, time.process_time, flush=True))
                theirs.append(_batch(ref, number, time.process_time))
            out[f"N={n}, all threads (writer included)"] = _summary(mine, theirs)
        n = 1000
        p = rng.dirichlet(np.ones(n))
        base = 0
        mine, theirs = [], []
        for _ in range(5):
            al.flush()
            pools = iter([[f"d{base + j * n + i}" for i in range(n)] for j in range(100)])
            base += 100 * n
            mine.append(_batch(lambda pools=pools: al.select(p, candidates=next(pools),
                                                              name="f"), 100))
            al.flush()
            cached = [f"d{i}" for i in range(n)]
            theirs.append(_batch(lambda cached=cached: al.select(p, candidates=cached,
                                                                 name="c"), 100))
        out["fresh N=1000 vs cached"] = _summary(mine, theirs)
    return out


def bare(q: str, k: int = 3) -> int:
    return k


async def abare(q: str, k: int = 3) -> int:
    return k


def _async_batch(fn: Callable[..., Any], number: int) -> float:
    async def loop() -> float:
        t0 = time.thread_time()
        for _ in range(number):
            await fn("q", k=4)
        return (time.thread_time() - t0) / number * 1e6

    return asyncio.run(loop())


def window_rows(folder: str) -> dict[str, Row]:
    w = al.window("b")(bare)
    aw = al.window("ab")(abare)
    out: dict[str, Row] = {}
    with al.record(os.path.join(folder, "w.zst"), seed=1):
        for label, ref, own in (("positional", lambda: bare("q", 4), lambda: w("q", 4)),
                                ("keyword", lambda: bare("q", k=4), lambda: w("q", k=4))):
            mine, theirs = [], []
            for _ in range(9):
                al.flush()
                mine.append(_batch(own, 5000))
                theirs.append(_batch(ref, 5000))
            out[label] = _summary(mine, theirs)
        mine, theirs = [], []
        for _ in range(9):
            al.flush()
            mine.append(_async_batch(aw, 5000))
            theirs.append(_async_batch(abare, 5000))
        out["async (keyword)"] = _summary(mine, theirs)
    return out


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "select"
    if which not in ("select", "windows"):
        raise SystemExit("usage: bench_cpu_ab.py select|windows")
    with bench_dir("agentlog-bench-cpu-") as folder:
        rows = select_rows(folder) if which == "select" else window_rows(folder)
    print(json.dumps({"load": os.getloadavg()[0], "rows": rows}))


if __name__ == "__main__":
    main()
