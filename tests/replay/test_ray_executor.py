"""The Ray executor gives the same output as the local one (content, not timestamps).

Runs on the session's small local cluster (``num_cpus=2``, ``tests/conftest.py``). Ray is
in the ``dev`` extra, so CI has it; elsewhere the tests skip with the install command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import RunStart, Score, WindowExit
from agentlog.replay import ExecutionOptions, ModelCache, Unit, read_units, run_units, sealed_units

# The session's local cluster (tests/conftest.py); without Ray the tests skip.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]


def _units(n: int) -> list[Unit]:
    return [Unit(f"t{i:03d}", {"x": i, "layout": i % 4, "fail": i % 37 == 5,
                               "why": f"state {i} cannot be decoded"},
                 {"source_trace": "ab" * 32, "source_run": "run-1", "window": i,
                  "channel": "quote", "channel_hash": "cd" * 32})
            for i in range(n)]


def _content(out: Path) -> list[tuple[Any, ...]]:
    """Every record that matters, by unit key, without timestamps, run ids or indices."""
    rows: list[tuple[Any, ...]] = []
    for run in al.read(out).runs:
        assert isinstance(run.start, RunStart) and run.end is not None
        key = run.start.meta["agentlog.replay"]["unit"]
        rows.append((key, "meta", run.start.system, repr(sorted(run.start.meta.items()))))
        for r in run.records:
            if isinstance(r, Score):
                rows.append((key, "score", r.window, r.name, r.value, r.channel, r.layout,
                             r.wave, r.transition, r.state_hash))
            elif isinstance(r, WindowExit):
                rows.append((key, "exit", r.name, r.status, r.error_type, r.error_message))
    return sorted(rows, key=repr)


def test_ray_and_local_executors_write_identical_scores_and_provenance_on_200_units(
        tmp_path: Path) -> None:
    local, remote = tmp_path / "local.zst", tmp_path / "ray.zst"
    a = run_units(_units(200), "tests.replay._unit_jobs:score_states", out=local,
                  execution=ExecutionOptions(progress=False, concurrency=4))
    b = run_units(_units(200), "tests.replay._unit_jobs:score_states", out=remote,
                  execution=ExecutionOptions(progress=False, concurrency=4, executor="ray"))
    assert (a.done, a.failed) == (b.done, b.failed) == (194, 6)
    assert sorted((f.key, f.error_type, f.message, f.attempts) for f in a.failures) == sorted(
        (f.key, f.error_type, f.message, f.attempts) for f in b.failures)
    assert _content(local) == _content(remote)
    assert al.verify(remote).ok


def test_a_ray_replay_resumes_like_a_local_one(tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    run_units(_units(20), "tests.replay._unit_jobs:ascore_states", out=out,
              execution=ExecutionOptions(progress=False))
    summary = run_units(_units(30), "tests.replay._unit_jobs:ascore_states", out=out,
                        execution=ExecutionOptions(progress=False, executor="ray"))
    assert (summary.skipped, summary.done, summary.failed) == (19, 10, 1)
    assert len(read_units(out)) == 30


def test_ray_workers_count_their_cache_calls_into_the_summary(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite3"
    units = [Unit(f"u{i}", {"x": i}) for i in range(12)]
    job = "tests.replay._unit_jobs:cached_score"
    first = run_units(units, job, out=tmp_path / "a.zst", cache=cache,
                      execution=ExecutionOptions(executor="ray", progress=False))
    assert (first.cache_hits, first.cache_misses, first.live_calls) == (0, 12, 12)
    frozen = run_units(units, job, out=tmp_path / "b.zst", cache=cache, frozen=True,
                       execution=ExecutionOptions(executor="ray", progress=False))
    assert (frozen.done, frozen.cache_hits, frozen.live_calls) == (12, 12, 0)


def test_an_in_memory_cache_cannot_go_to_ray_workers(tmp_path: Path) -> None:
    with ModelCache(":memory:") as cache, pytest.raises(
            ValueError, match=r"opens the model cache by path in every worker"):
        run_units([Unit("u0", {"x": 0})], "tests.replay._unit_jobs:cached_score",
                  out=tmp_path / "o.zst", cache=cache,
                  execution=ExecutionOptions(executor="ray", progress=False))


def test_a_job_the_workers_cannot_import_is_a_clear_error_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's folder is on the driver's path only: the workers cannot import the job."""
    folder = tmp_path / "driver_only"
    folder.mkdir()
    (folder / "driver_only_jobs.py").write_text(
        "from agentlog.replay import UnitScore\n"
        "def score(unit, ctx):\n"
        "    return [UnitScore('v', 1.0)]\n")
    monkeypatch.syspath_prepend(str(folder))
    out = tmp_path / "o.zst"
    with pytest.raises(al.ReplayError, match=r"a Ray task of the replay failed in its worker: "
                       r"ImportError: cannot import module 'driver_only_jobs'.*PYTHONPATH"):
        run_units([Unit(f"u{i}") for i in range(4)], "driver_only_jobs:score", out=out,
                  execution=ExecutionOptions(progress=False, executor="ray"))
    assert sealed_units(out) == set()
    assert run_units([Unit(f"u{i}") for i in range(4)], "driver_only_jobs:score", out=out,
                     execution=ExecutionOptions(progress=False)).done == 4


@pytest.mark.timeout(300)  # the hang guard of the wait for a first written batch
def test_cancelling_a_ray_replay_writes_the_finished_batches_and_a_rerun_completes_it(
        tmp_path: Path) -> None:
    import asyncio

    from agentlog.replay import arun_units

    out = tmp_path / "o.zst"
    units = [Unit(f"u{i:02d}", {"x": i, "sleep": 0.05}) for i in range(40)]
    job = "tests.replay._unit_jobs:slow_score"

    async def interrupted() -> None:
        task = asyncio.create_task(arun_units(units, job, out=out,
                                              execution=ExecutionOptions(progress=False,
                                                                         executor="ray",
                                                                         concurrency=2)))
        while not (out.exists() and sealed_units(out)):  # a batch came back and was written
            assert not task.done()
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert al.verify(out).ok
    assert 0 < len(sealed_units(out)) < 40
    summary = run_units(units, job, out=out,
                        execution=ExecutionOptions(progress=False, executor="ray"))
    assert summary.done + summary.skipped == 40 and summary.failed == 0
    reference = tmp_path / "ref.zst"
    run_units(units, job, out=reference, execution=ExecutionOptions(progress=False))
    assert {k: u.scores for k, u in read_units(out).items()} == {
        k: u.scores for k, u in read_units(reference).items()}
