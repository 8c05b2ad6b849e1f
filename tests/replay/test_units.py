"""The replay execution engine: units run, written as sealed runs, and resumed."""

from __future__ import annotations

import asyncio
import contextvars
import doctest
import hashlib
import importlib
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import RunStart, Score, WindowExit
from agentlog.replay import (
    ExecutionOptions,
    RetryPolicy,
    RunSummary,
    Unit,
    UnitScore,
    arun_units,
    read_units,
    run_units,
    sealed_units,
)
from tests.replay import _unit_jobs as jobs

JOB = "tests.replay._unit_jobs:score_states"


def _units(n: int, **payload: Any) -> list[Unit]:
    return [Unit(f"u{i:03d}", {"x": i, **payload},
                 {"source_run": "r1", "window": i, "channel": "quote"}) for i in range(n)]


def _scores(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {k: [(s.name, s.value, s.channel, s.layout, s.wave, s.transition, s.state_hash)
                for s in u.scores] for k, u in read_units(out).items() if u.status == "ok"}


@pytest.fixture(autouse=True)
def _clear_failures() -> Any:
    jobs.FAIL.clear()
    yield
    jobs.FAIL.clear()


@pytest.mark.parametrize("name", ["agentlog.replay._executor", "agentlog.replay._units",
                                  "agentlog.retry"])
def test_docstring_examples_run(name: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_each_unit_is_one_sealed_run_with_its_provenance_and_joinable_scores(
        tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    summary = run_units(_units(3), JOB, out=out, execution=ExecutionOptions(progress=False),
                        output_meta={"experiment": "e1"})
    assert (summary.total, summary.done, summary.skipped, summary.failed) == (3, 3, 0, 0)
    assert al.verify(out).ok
    trace = al.read(out)
    assert len(trace.runs) == 3
    starts = sorted((r.start for r in trace.runs if r.start is not None),
                    key=lambda s: s.meta["agentlog.replay"]["unit"])
    assert all(isinstance(s, RunStart) and s.system == "agentlog.replay" for s in starts)
    assert starts[1].meta == {"experiment": "e1", "agentlog.replay": {
        "unit": "u001", "status": "ok", "attempts": 1, "job": JOB, "source_run": "r1",
        "window": 1, "channel": "quote"}}
    scores = [r for r in trace.records if isinstance(r, Score)]
    assert len(scores) == 6 and {s.window for s in scores} == {-1}
    one = next(s for s in scores if s.transition == 2 and s.state_hash == hashlib.sha256(
        b"state/2/1").digest())
    assert (one.name, one.channel, one.layout, one.wave) == ("margin", "quote", 0, 0)
    assert one.value == jobs._value(Unit("u002", {"x": 2}), 1)


def test_replaying_twice_into_one_output_runs_nothing_and_leaves_it_byte_identical(
        tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    run_units(_units(4), JOB, out=out, execution=ExecutionOptions(progress=False))
    before = out.read_bytes()
    again = run_units(_units(4), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (again.total, again.skipped, again.done, again.failed) == (4, 4, 0, 0)
    assert out.read_bytes() == before
    assert al.verify(out).ok


def test_a_rerun_with_more_units_runs_only_the_new_ones(tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    run_units(_units(5), JOB, out=out, execution=ExecutionOptions(progress=False))
    summary = run_units(_units(9), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (summary.skipped, summary.done) == (5, 4)
    assert sorted(read_units(out)) == [f"u{i:03d}" for i in range(9)]
    fresh = tmp_path / "fresh.zst"
    run_units(_units(9), JOB, out=fresh, execution=ExecutionOptions(progress=False))
    assert _scores(out) == _scores(fresh)
    assert len(al.read(out).runs) == 9  # nothing written twice


def test_failed_units_are_recorded_the_rest_complete_and_a_rerun_retries_only_them(
        tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    jobs.FAIL.update({"u001", "u003"})
    summary = run_units(_units(5), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (summary.done, summary.failed) == (3, 2)
    assert sorted(f.key for f in summary.failures) == ["u001", "u003"]
    failure = next(f for f in summary.failures if f.key == "u001")
    assert (failure.error_type, failure.attempts, failure.transient) == ("ValueError", 1, False)
    assert failure.message == "cannot score unit u001: bad state"
    assert al.verify(out).ok
    units = read_units(out)
    assert units["u001"].status == "failed" and units["u001"].scores == ()
    assert units["u001"].error_type == "ValueError"
    exits = [r for r in al.read(out).records if isinstance(r, WindowExit)]
    assert [(e.name, e.error_type) for e in exits] == [("agentlog.replay.unit", "ValueError")] * 2
    assert sealed_units(out) == {"u000", "u002", "u004"}

    jobs.FAIL.clear()
    again = run_units(_units(5), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (again.skipped, again.done, again.failed) == (3, 2, 0)
    assert read_units(out)["u001"].status == "ok"
    fresh = tmp_path / "fresh.zst"
    run_units(_units(5), JOB, out=fresh, execution=ExecutionOptions(progress=False))
    assert _scores(out) == _scores(fresh)


def test_a_failure_message_is_scrubbed_of_credentials_in_the_output_and_the_summary(
        tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    units = [Unit("u0", {"x": 0, "fail": True, "why": f"upstream said: invalid key {key}"})]
    summary = run_units(units, JOB, out=out, execution=ExecutionOptions(progress=False))
    assert summary.failed == 1
    assert key not in summary.failures[0].message
    assert "invalid key" in summary.failures[0].message
    assert key.encode() not in out.read_bytes()  # compressed frames: check decoded too
    assert key not in (read_units(out)["u0"].error_message or "")


def test_a_job_that_returns_something_else_than_scores_fails_only_its_unit(
        tmp_path: Path) -> None:
    def bad(unit: Unit, ctx: Any) -> Any:
        if unit.payload["x"] == 0:
            return [UnitScore("margin", float("nan"))]
        if unit.payload["x"] == 1:
            return {"margin": 1.0}
        return [UnitScore("margin", 1.0)]

    out = tmp_path / "out.zst"
    summary = run_units(_units(3), bad, out=out, execution=ExecutionOptions(progress=False))
    assert (summary.done, summary.failed) == (1, 2)
    messages = {f.key: f.message for f in summary.failures}
    assert "is nan" in messages["u000"] and "NaN or infinite" in messages["u000"]
    assert "must return a sequence of UnitScore; returned dict" in messages["u001"]


def test_at_most_concurrency_sync_jobs_run_at_once_and_that_many_do(tmp_path: Path) -> None:
    jobs.BARRIER["b"] = jobs.Barrier(4)
    summary = run_units(_units(12), "tests.replay._unit_jobs:sync_barrier",
                        out=tmp_path / "o.zst",
                        execution=ExecutionOptions(concurrency=4, progress=False))
    assert summary.done == 12
    assert jobs.BARRIER["b"].peak == 4


def test_sync_jobs_run_in_a_copy_of_the_callers_context(tmp_path: Path) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    def job(unit: Unit, ctx: Any) -> list[UnitScore]:
        seen.append(var.get())
        return []

    async def main() -> RunSummary:
        var.set("caller")
        return await arun_units(_units(2), job, out=tmp_path / "o.zst",
                                execution=ExecutionOptions(progress=False))

    assert asyncio.run(main()).done == 2
    assert seen == ["caller", "caller"]


def test_async_jobs_run_on_the_loop_and_give_the_same_output_as_sync_ones(
        tmp_path: Path) -> None:
    run_units(_units(6), JOB, out=tmp_path / "sync.zst", execution=ExecutionOptions(progress=False))
    run_units(_units(6), "tests.replay._unit_jobs:ascore_states", out=tmp_path / "async.zst",
              execution=ExecutionOptions(progress=False, concurrency=3))
    assert _scores(tmp_path / "sync.zst") == _scores(tmp_path / "async.zst")


def test_the_job_receives_its_payload_as_msgpack_data_whichever_executor(
        tmp_path: Path) -> None:
    got: list[Any] = []

    def job(unit: Unit, ctx: Any) -> list[UnitScore]:
        got.append((unit.payload, unit.provenance, ctx.key, ctx.attempt, ctx.cache))
        return []

    run_units([Unit("k", {"pair": (1, 2)}, {"p": 1})], job, out=tmp_path / "o.zst",
              execution=ExecutionOptions(progress=False))
    assert got == [({"pair": [1, 2]}, {"p": 1}, "k", 1, None)]


def test_cancelling_a_replay_writes_the_finished_units_and_a_rerun_completes_it(
        tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    units = [Unit(f"u{i}", {"x": i, "block": i % 2 == 1}) for i in range(6)]

    async def interrupted() -> None:
        jobs.BLOCK["b"] = b = jobs.Blocker()
        task = asyncio.create_task(arun_units(
            units, "tests.replay._unit_jobs:block_some", out=out,
            execution=ExecutionOptions(progress=False, concurrency=6)))
        while b.started < 3:  # every blocked unit is in flight, the others are done
            await b.some_started.wait()
            b.some_started.clear()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert al.verify(out).ok
    assert sealed_units(out) == {"u0", "u2", "u4"}

    async def resumed() -> RunSummary:
        jobs.BLOCK["b"] = b = jobs.Blocker()
        b.release.set()
        return await arun_units(units, "tests.replay._unit_jobs:block_some", out=out,
                                execution=ExecutionOptions(progress=False))

    summary = asyncio.run(resumed())
    assert (summary.skipped, summary.done) == (3, 3)
    assert al.verify(out).ok and len(read_units(out)) == 6


def test_run_units_refuses_to_run_inside_an_event_loop(tmp_path: Path) -> None:
    async def main() -> None:
        run_units(_units(1), JOB, out=tmp_path / "o.zst",
                  execution=ExecutionOptions(progress=False))

    with pytest.raises(RuntimeError, match=r"running event loop; use `await arun_units"):
        asyncio.run(main())


def test_the_summary_as_plain_data(tmp_path: Path) -> None:
    jobs.FAIL.add("u000")
    d = run_units(_units(2), JOB, out=tmp_path / "o.zst",
                  execution=ExecutionOptions(progress=False)).to_dict()
    assert {k: d[k] for k in ("total", "skipped", "done", "failed", "pending", "cache_hits",
                              "cache_misses", "live_calls", "retries", "interrupted")} == {
        "total": 2, "skipped": 0, "done": 1, "failed": 1, "pending": 0, "cache_hits": 0,
        "cache_misses": 0, "live_calls": 0, "retries": 0, "interrupted": False}
    assert d["failures"] == [{"key": "u000", "error_type": "ValueError",
                              "message": "cannot score unit u000: bad state", "attempts": 1,
                              "transient": False}]
    assert d["wall_s"] > 0


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("units", "error", "match"), [
    ([Unit("a"), Unit("a")], ValueError, r"unit key 'a' appears twice in `units`"),
    ([Unit("a", {"f": object()})], TypeError,
     r"unit 'a': `payload` and `provenance` must be plain msgpack data"),
    ([Unit("a", {}, {"status": "x"})], ValueError,
     r"`provenance` may not use the key\(s\) \['status'\]"),
    ([Unit("")], ValueError, r"unit 0: `key` must be a non-empty str"),
    (["a"], TypeError, r"`units` must hold agentlog.replay.Unit objects; item 0 is a str"),
    ([Unit("a", {1: 2})], TypeError, r"unit 'a': `payload` must be a mapping with str keys"),
])
def test_bad_units_are_refused_before_anything_is_written(
        tmp_path: Path, units: list[Any], error: type[Exception], match: str) -> None:
    out = tmp_path / "o.zst"
    with pytest.raises(error, match=match):
        run_units(units, JOB, out=out, execution=ExecutionOptions(progress=False))
    assert not out.exists()


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"job": "not a job"}, ValueError, r"`job` must be 'module:qualname'"),
    ({"job": "tests.replay.no_such_module:f"}, ImportError,
     r"cannot import module 'tests.replay.no_such_module' of job"),
    ({"job": "tests.replay._unit_jobs:nope"}, AttributeError,
     r"module 'tests.replay._unit_jobs' has no 'nope'"),
    ({"app": "tests.replay.no_such_app"}, ImportError,
     r"cannot import the app module 'tests.replay.no_such_app'.*Pass --app"),
    ({"frozen": True}, ValueError, r"`frozen=True` needs a model cache"),
])
def test_bad_arguments_are_refused_with_what_to_do(
        tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    out = tmp_path / "o.zst"
    args: dict[str, Any] = {"job": JOB, "out": out,
                            "execution": ExecutionOptions(progress=False), **kwargs}
    with pytest.raises(error, match=match):
        run_units(_units(1), **args)
    assert not out.exists()


def test_an_output_in_a_missing_folder_gets_it_and_a_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "new" / "folders" / "o.zst"  # made as record() makes a trace's folder
    summary = run_units(_units(1), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert summary.done == 1 and al.verify(out).ok
    with pytest.raises(IsADirectoryError, match=r"is a folder; name the output trace file"):
        run_units(_units(1), JOB, out=tmp_path, execution=ExecutionOptions(progress=False))


def test_an_output_that_is_not_a_trace_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    out.write_bytes(b"not a trace at all")
    with pytest.raises(al.TraceFormatError):
        run_units(_units(1), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert out.read_bytes() == b"not a trace at all"


def test_units_may_be_any_iterable_and_an_empty_one_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    summary = run_units(iter([]), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (summary.total, summary.done) == (0, 0) and not out.exists()
    assert run_units((u for u in _units(2)), JOB, out=out,
                     execution=ExecutionOptions(progress=False)).done == 2


def test_read_units_of_a_missing_output_is_empty(tmp_path: Path) -> None:
    assert read_units(tmp_path / "none.zst") == {}
    assert sealed_units(tmp_path / "none.zst") == set()


def test_a_job_whose_name_cannot_be_imported_cannot_go_to_ray(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"has no importable 'module:qualname'"):
        run_units(_units(1), lambda u, c: [], out=tmp_path / "o.zst",
                  execution=ExecutionOptions(executor="ray", progress=False))


def test_retry_policy_travels_as_plain_data() -> None:
    assert RetryPolicy(3, 0.1, 2.0, seed=5).to_wire() == (3, 0.1, 2.0, 5)


def test_importing_the_engine_imports_neither_ray_nor_rich() -> None:
    import subprocess
    import sys

    code = ("import sys, agentlog.replay; from agentlog.replay import run_units; "
            "print([m for m in ('ray', 'rich') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


class Abort(BaseException):
    """Not an Exception: a job's way of stopping the whole program, not failing a unit."""


def test_a_job_raising_a_base_exception_stops_the_replay_with_the_finished_units_written(
        tmp_path: Path) -> None:
    out = tmp_path / "o.zst"

    def job(unit: Unit, ctx: Any) -> list[UnitScore]:
        if unit.key == "u005":
            raise Abort("stop everything")
        return [UnitScore("v", 1.0)]

    with pytest.raises(Abort, match="stop everything"):
        run_units(_units(6), job, out=out,
                  execution=ExecutionOptions(concurrency=1, progress=False))
    assert al.verify(out).ok
    assert sealed_units(out) == {f"u{i:03d}" for i in range(5)}
    summary = run_units(_units(6), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (summary.skipped, summary.done) == (5, 1)
