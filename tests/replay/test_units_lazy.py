"""run_units takes its units lazily: O(concurrency) encoded payloads, whatever the input.

A ``Sequence`` is checked whole first (bad units and repeated keys fail before anything
runs), then encoded unit by unit as slots free up; any other iterable is read once, and
its bad unit fails the call when it is reached, after the units before it are written.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import (
    ExecutionOptions,
    State,
    Unit,
    UnitContext,
    UnitScore,
    arun_units,
    iter_channel_units,
    plan_channel_units,
    read_units,
    replay_channels,
    run_units,
)
from agentlog.replay import _executor as executor
from agentlog.replay._progress import Progress
from tests.replay import _unit_jobs as jobs

JOB = "tests.replay._unit_jobs:score_states"
APP = __name__


def _unit(i: int, **payload: Any) -> Unit:
    return Unit(f"u{i:04d}", {"x": i, "blob": bytes(64), **payload}, {"window": i})


class Counted:
    """A one-shot generator of units that counts what it has yielded."""

    def __init__(self, n: int, *, extra: dict[int, Any] | None = None) -> None:
        self.n = n
        self.extra = extra or {}  # position -> what to yield there instead
        self.yielded = 0

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.n):
            self.yielded += 1
            yield self.extra.get(i, _unit(i))


class Watch:
    """A sync job that notes, at each start, how far the input was read ahead of it."""

    def __init__(self, read: Any) -> None:
        self.read = read  # () -> units taken from the input so far
        self.lock = threading.Lock()
        self.completed = 0
        self.ahead: list[int] = []
        self.keys: list[str] = []

    def __call__(self, unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
        with self.lock:
            self.ahead.append(self.read() - self.completed)
            self.keys.append(unit.key)
        try:
            return jobs.score_states(unit, ctx)
        finally:
            with self.lock:
                self.completed += 1


def _scores(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {k: [(s.name, s.value, s.layout, s.transition, s.state_hash) for s in u.scores]
            for k, u in read_units(out).items()}


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_generator_is_read_only_as_far_as_the_free_slots(tmp_path: Path,
                                                            concurrency: int) -> None:
    source = Counted(300)
    watch = Watch(lambda: source.yielded)
    summary = run_units(source, watch, out=tmp_path / "o.zst",
                        execution=ExecutionOptions(concurrency=concurrency, progress=False))
    assert (summary.total, summary.done, summary.skipped) == (300, 300, 0)
    # A unit is taken when a slot is free: the units taken but not finished are the ones
    # running plus the one waiting for the next slot (all 300 when read up front).
    assert max(watch.ahead) <= concurrency + 1
    assert watch.ahead[0] <= concurrency + 1


def test_an_async_job_reads_a_generator_lazily_too(tmp_path: Path) -> None:
    source = Counted(200)
    ahead: list[int] = []
    done = 0

    async def job(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
        nonlocal done
        ahead.append(source.yielded - done)
        await asyncio.sleep(0)
        done += 1
        return jobs.score_states(unit, ctx)

    summary = asyncio.run(arun_units(source, job, out=tmp_path / "o.zst",
                                     execution=ExecutionOptions(concurrency=3, progress=False)))
    assert summary.done == 200 and max(ahead) <= 4


def test_a_list_is_checked_whole_then_encoded_as_slots_free_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    encode = executor.encode_unit

    def counting(unit: Unit, index: int) -> bytes:
        nonlocal calls
        calls += 1
        return encode(unit, index)

    monkeypatch.setattr(executor, "encode_unit", counting)
    units = [_unit(i) for i in range(250)]
    watch = Watch(lambda: calls - len(units))  # the check pass encodes each unit once
    summary = run_units(units, watch, out=tmp_path / "o.zst",
                        execution=ExecutionOptions(concurrency=2, progress=False))
    assert summary.done == 250 and calls == 500
    assert max(watch.ahead) <= 3


@pytest.mark.parametrize("kind", ["list", "generator"])
def test_resume_skips_sealed_units_and_leaves_the_file_byte_identical(
        tmp_path: Path, kind: str) -> None:
    out = tmp_path / "o.zst"

    def units(n: int) -> Any:
        return [_unit(i) for i in range(n)] if kind == "list" else Counted(n)

    first = run_units(units(30), JOB, out=out,
                      execution=ExecutionOptions(concurrency=3, progress=False))
    assert (first.total, first.skipped, first.done) == (30, 0, 30)
    more = run_units(units(50), JOB, out=out,
                     execution=ExecutionOptions(concurrency=3, progress=False))
    assert (more.total, more.skipped, more.done, more.pending) == (50, 30, 20, 0)
    before = out.read_bytes()
    again = run_units(units(50), JOB, out=out,
                      execution=ExecutionOptions(concurrency=3, progress=False))
    assert (again.total, again.skipped, again.done, again.failed) == (50, 50, 0, 0)
    assert out.read_bytes() == before
    whole = tmp_path / "whole.zst"
    run_units([_unit(i) for i in range(50)], JOB, out=whole,
              execution=ExecutionOptions(progress=False))
    assert _scores(out) == _scores(whole)


def test_a_repeated_key_in_a_list_fails_before_anything_runs(tmp_path: Path) -> None:
    units = [_unit(i) for i in range(20)] + [_unit(7)]
    watch = Watch(lambda: 0)
    with pytest.raises(ValueError, match=r"unit key 'u0007' appears twice in `units`"):
        run_units(units, watch, out=tmp_path / "o.zst", execution=ExecutionOptions(progress=False))
    assert watch.keys == [] and not (tmp_path / "o.zst").exists()


def test_a_repeated_key_in_a_generator_fails_there_after_writing_the_units_before_it(
        tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    source = Counted(40, extra={25: _unit(7)})
    watch = Watch(lambda: source.yielded)
    with pytest.raises(ValueError, match=r"unit key 'u0007' appears twice in `units`"):
        run_units(source, watch, out=out, execution=ExecutionOptions(concurrency=4, progress=False))
    assert source.yielded == 26  # nothing read past the repeated key
    assert sorted(watch.keys) == [f"u{i:04d}" for i in range(25)]
    assert sorted(read_units(out)) == [f"u{i:04d}" for i in range(25)]
    assert al.verify(out).ok
    # Fixed, the re-run does only the rest.
    again = run_units(Counted(40), JOB, out=out, execution=ExecutionOptions(progress=False))
    assert (again.total, again.skipped, again.done) == (40, 25, 15)


def test_a_bad_unit_in_a_list_fails_before_anything_runs(tmp_path: Path) -> None:
    units: list[Any] = [_unit(i) for i in range(10)] + [_unit(10, obj=object())]
    watch = Watch(lambda: 0)
    with pytest.raises(TypeError, match=r"unit 'u0010': `payload` and `provenance` must "
                                        r"be plain msgpack data"):
        run_units(units, watch, out=tmp_path / "o.zst", execution=ExecutionOptions(progress=False))
    with pytest.raises(TypeError, match=r"item 3 is a int"):
        run_units([*units[:3], 5], watch, out=tmp_path / "o.zst",
                  execution=ExecutionOptions(progress=False))
    assert watch.keys == [] and not (tmp_path / "o.zst").exists()


def test_a_bad_unit_in_a_generator_fails_when_reached_with_the_units_before_written(
        tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    source = Counted(30, extra={12: _unit(12, obj=object())})
    watch = Watch(lambda: source.yielded)
    with pytest.raises(TypeError, match=r"unit 'u0012': `payload` and `provenance` must "
                                        r"be plain msgpack data"):
        run_units(source, watch, out=out, execution=ExecutionOptions(concurrency=3, progress=False))
    assert sorted(read_units(out)) == sorted(watch.keys) == [f"u{i:04d}" for i in range(12)]
    first_bad = Counted(5, extra={0: "not a unit"})
    with pytest.raises(TypeError, match=r"item 0 is a str"):
        run_units(first_bad, watch, out=tmp_path / "other.zst",
                  execution=ExecutionOptions(progress=False))
    assert not (tmp_path / "other.zst").exists()


def test_an_error_the_generator_raises_stops_the_replay_after_the_units_before_it(
        tmp_path: Path) -> None:
    out = tmp_path / "o.zst"

    def units() -> Iterator[Unit]:
        yield from (_unit(i) for i in range(9))
        raise OSError("trace src.zst: truncated frame at byte 4096")

    with pytest.raises(OSError, match=r"truncated frame at byte 4096"):
        run_units(units(), JOB, out=out, execution=ExecutionOptions(concurrency=2, progress=False))
    assert sorted(read_units(out)) == [f"u{i:04d}" for i in range(9)]
    assert al.verify(out).ok


def test_an_empty_or_fully_sealed_generator_opens_no_cache(tmp_path: Path) -> None:
    out = tmp_path / "o.zst"
    empty = run_units(iter(()), JOB, out=out,
                      execution=ExecutionOptions(progress=False), cache=tmp_path / "c.sqlite")
    assert (empty.total, empty.done) == (0, 0) and not out.exists()
    run_units(Counted(5), JOB, out=out, execution=ExecutionOptions(progress=False))
    done = run_units(Counted(5), JOB, out=out,
                     execution=ExecutionOptions(progress=False), cache=tmp_path / "c.sqlite")
    assert (done.total, done.skipped) == (5, 5)
    assert not (tmp_path / "c.sqlite").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_of_an_iterator_is_a_running_count() -> None:
    stream = _Terminal()
    bar = Progress(None, enabled=True, stream=stream)
    assert bar.enabled
    bar.advance(3, 1)
    bar.close()
    assert "3/?" in stream.getvalue() and "1 failed" in stream.getvalue()
    assert not Progress(0, enabled=True, stream=_Terminal()).enabled


# ---------------------------------------------------------------------------- channels


@al.window("lazy-step")
def step(x: float) -> float:
    return x + 1.0


@al.scorer("lazy-value")
def value(state: State, view: str | None, layout: int) -> float:
    v = state.value["x"] if state.before else state.value
    return float(v) + 0.25 * layout


@al.channel("lazy-direct", scorer="lazy-value", layouts=3)
def direct(state: State) -> None:
    return None


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "src.zst"
    with al.record(path, seed=1, task="t"):
        for x in range(6):
            step(float(x))
    return path


def test_iter_channel_units_streams_the_planned_units_and_checks_its_arguments_at_once(
        trace: Path) -> None:
    it = iter_channel_units(trace, ["lazy-direct"], window="lazy-step", waves=2)
    assert not isinstance(it, Sequence)
    planned = plan_channel_units(trace, ["lazy-direct"], window="lazy-step", waves=2)
    assert len(planned) == 6 * 3 * 2
    assert [(u.key, u.payload, u.provenance) for u in it] == [
        (u.key, u.payload, u.provenance) for u in planned]
    with pytest.raises(ValueError, match=r"`waves` must be an int >= 1"):
        iter_channel_units(trace, ["lazy-direct"], window="lazy-step", waves=0)


def test_a_channel_replay_counts_total_and_skipped_units_right_on_resume(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    first = replay_channels(trace, ["lazy-direct"], window="lazy-step", out=out, app=APP,
                            layouts=2, execution=ExecutionOptions(progress=False))
    assert (first.total, first.skipped, first.done, first.failed) == (12, 0, 12, 0)
    wider = replay_channels(trace, ["lazy-direct"], window="lazy-step", out=out, app=APP,
                            execution=ExecutionOptions(progress=False))
    assert (wider.total, wider.skipped, wider.done) == (18, 12, 6)
    before = out.read_bytes()
    again = replay_channels(trace, ["lazy-direct"], window="lazy-step", out=out, app=APP,
                            execution=ExecutionOptions(progress=False))
    assert (again.total, again.skipped, again.done) == (18, 18, 0)
    assert out.read_bytes() == before


def test_a_channel_replay_of_a_missing_window_writes_nothing(trace: Path,
                                                              tmp_path: Path) -> None:
    from agentlog.replay import WindowNotFoundError

    out = tmp_path / "out.zst"
    with pytest.raises(WindowNotFoundError, match=r"no completed instance of window "
                                                  r"'lazy-nope'.*lazy-step"):
        replay_channels(trace, ["lazy-direct"], window="lazy-nope", out=out, app=APP,
                        execution=ExecutionOptions(progress=False))
    assert not out.exists()


def test_rederiving_a_channel_replay_streams_its_plan(
        trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.replay import _channel_replay as chrep
    from agentlog.replay import rederive_channel_replay

    out = tmp_path / "out.zst"
    replay_channels(trace, ["lazy-direct"], window="lazy-step", out=out, app=APP,
                    execution=ExecutionOptions(progress=False))
    made = 0
    unit, derive = chrep._unit, chrep._derive_again
    ahead: list[int] = []

    def counting(*args: Any) -> Unit:
        nonlocal made
        made += 1
        return unit(*args)

    def noting(u: Unit, ctx: UnitContext) -> list[UnitScore]:
        ahead.append(made - len(ahead))
        return derive(u, ctx)

    monkeypatch.setattr(chrep, "_unit", counting)
    monkeypatch.setattr(chrep, "_derive_again", noting)
    checked = rederive_channel_replay(trace, out, app=APP)
    assert (checked.planned, checked.rederived, checked.mismatched) == (18, 18, 0)
    assert ahead == [1] * 18  # each unit planned just before it is derived again
