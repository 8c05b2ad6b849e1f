"""16 threads and 1,000 asyncio tasks record at once: nothing lost, nothing misattributed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np

import agentlog as al
from agentlog.context import copy_context_executor
from agentlog.records import RunStart, Score, Selection, WindowEnter, WindowExit
from tests.conftest import of_type


@al.window("work")
def work(worker: int, i: int) -> int:
    al.select([0.25] * 4, candidates=["a", "b", "c", "d"], name="doc")
    al.score("worker", worker)
    return worker * 10_000 + i


@al.window("awork")
async def awork(task: int) -> int:
    await asyncio.sleep(0)
    al.select([0.5, 0.5], name="doc")
    await asyncio.sleep(0)
    al.score("task", task)
    return task


def test_sixteen_threads_each_in_its_own_run_lose_and_mix_nothing(trace_path: Path) -> None:
    n_threads, n_calls = 16, 200
    barrier = threading.Barrier(n_threads)

    def body(worker: int) -> None:
        with al.record(trace_path, system=f"w{worker}", seed=worker):
            barrier.wait()
            for i in range(n_calls):
                assert work(worker, i) == worker * 10_000 + i

    threads = [threading.Thread(target=body, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trace = al.read(trace_path)
    system_of = {r.run: int(r.system[1:]) for r in of_type(trace, RunStart)}
    assert len(system_of) == n_threads
    enters = {(e.run, e.window): e for e in of_type(trace, WindowEnter)}
    assert len(enters) == n_threads * n_calls
    for s in of_type(trace, Score):
        assert s.value == system_of[s.run] and (s.run, s.window) in enters
    for ex in of_type(trace, WindowExit):
        worker = system_of[ex.run]
        assert (ex.run, ex.window) in enters
        assert al._encoding.decode(ex.exit) // 10_000 == worker
    sels = of_type(trace, Selection)
    assert len(sels) == n_threads * n_calls
    for run in system_of:
        assert sorted(s.step for s in sels if s.run == run) == list(range(n_calls))
    assert al.verify(trace_path).ok


def test_threads_of_a_pool_stay_in_the_submitters_run_and_window(trace_path: Path) -> None:
    @al.window("parent")
    def parent() -> list[int]:
        with copy_context_executor(max_workers=4) as pool:
            return list(pool.map(lambda i: work(99, i), range(32)))

    with al.record(trace_path, seed=1):
        assert len(parent()) == 32
    trace = al.read(trace_path)
    enters = of_type(trace, WindowEnter)
    top = next(e for e in enters if e.name == "parent")
    assert sum(e.parent == top.window for e in enters if e.name == "work") == 32
    assert al.verify(trace_path).ok


def test_a_thousand_asyncio_tasks_are_each_attributed_to_their_window(
    trace_path: Path,
) -> None:
    async def main() -> list[int]:
        return list(await asyncio.gather(*(awork(t) for t in range(1000))))

    with al.record(trace_path, seed=3):
        assert asyncio.run(main()) == list(range(1000))
    trace = al.read(trace_path)
    enters = {e.window: al._encoding.decode(e.entry)["task"] for e in of_type(trace, WindowEnter)}
    scores = of_type(trace, Score)
    assert len(enters) == len(scores) == 1000
    for s in scores:
        assert enters[s.window] == s.value
    sels = of_type(trace, Selection)
    assert sorted(s.step for s in sels) == list(range(1000))
    assert len({s.window for s in sels}) == 1000
    assert np.all([s.n == 2 for s in sels])
    assert al.verify(trace_path).ok


def test_threads_counting_into_one_window_lose_no_count(trace_path: Path) -> None:
    # A window that fans its tool calls and selections out to a pool: every thread counts
    # into the same WindowState, and the run's totals come from the records in the file.
    @al.tool("lookup")
    def lookup(i: int) -> int:
        return i

    def work(k: int) -> None:
        for i in range(100):
            lookup(i)
            al.select([0.5, 0.5], candidates=["a", "b"], name=f"s{k}")
            al.proceed(0.5, name=f"p{k}")

    @al.window("fan")
    def fan() -> None:
        with copy_context_executor(max_workers=8) as pool:
            list(pool.map(work, range(8)))

    with al.record(trace_path, seed=1):
        fan()
    trace = al.read(trace_path)
    (exit_,) = of_type(trace, WindowExit)
    assert exit_.tool_calls == 800 and exit_.selections == 800
    end = trace.records[-1]
    assert (end.n_windows, end.n_selections, end.n_continuations) == (1, 800, 800)
    assert al.verify(trace_path).ok
