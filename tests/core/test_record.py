"""record(): runs nest, share files, work with async with, validate their arguments."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import RunEnd, RunStart, WindowEnter
from agentlog.testing import capture_spans, record_in_memory
from tests.conftest import of_type


@al.window("leaf")
def leaf(x: int) -> int:
    return x + 1


def test_runs_nest_with_their_parent_and_restore_the_outer_context(tmp_path: Path) -> None:
    outer_path, inner_path = tmp_path / "outer.zst", tmp_path / "inner.zst"
    with al.record(outer_path, system="outer", seed=1) as outer:
        leaf(1)
        with al.record(inner_path, system="inner", seed=2) as inner:
            assert al.current_run() is inner
            leaf(2)
        assert al.current_run() is outer
        leaf(3)
    assert al.current_run() is None
    (inner_start,) = of_type(al.read(inner_path), RunStart)
    assert inner_start.parent_run == outer.run_id
    assert len(of_type(al.read(outer_path), WindowEnter)) == 2
    assert al.verify(outer_path).ok and al.verify(inner_path).ok


def test_two_runs_may_share_one_file_and_stay_apart(trace_path: Path) -> None:
    with al.record(trace_path, system="a", seed=1):
        leaf(1)
        with al.record(trace_path, system="b", seed=2):
            leaf(2)
            leaf(3)
    trace = al.read(trace_path)
    assert [r.system for r in of_type(trace, RunStart)] == ["a", "b"]
    assert sorted(len(r.windows) for r in trace.runs) == [1, 2]
    assert len(of_type(trace, RunEnd)) == 2
    assert al.verify(trace_path).ok


def test_async_with_records_a_run(trace_path: Path) -> None:
    async def main() -> None:
        async with al.record(trace_path, seed=5):
            leaf(1)

    asyncio.run(main())
    assert [w.name for w in al.read(trace_path).windows()] == ["leaf"]


def test_a_run_whose_body_raises_ends_with_its_error_recorded(trace_path: Path) -> None:
    with pytest.raises(RuntimeError, match="agent crashed"), al.record(trace_path, seed=1):
        raise RuntimeError("agent crashed")
    (end,) = of_type(al.read(trace_path), RunEnd)
    assert end.status == 1 and end.error_type == "RuntimeError"


def test_record_validates_its_arguments(trace_path: Path) -> None:
    with pytest.raises(ValueError, match="`durability` must be 'frame', 'window' or 'fsync'"):
        al.record(trace_path, durability="always")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`seed` must be an int; found str"):
        al.record(trace_path, seed="7")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`seed` must be in \[0, 2\*\*64\)"):
        al.record(trace_path, seed=-1)
    with pytest.raises(al.ArtifactEncodingError, match=r"record\(meta=\.\.\.\)"):
        al.record(trace_path, meta={"conn": object()})


def test_testing_helpers_capture_spans_and_give_back_the_trace() -> None:
    with capture_spans() as spans, record_in_memory(system="t", seed=3) as rec:
        leaf(1)
    assert [s.name for s in spans.spans] == ["agentlog.window.leaf", "invoke_agent t"]
    assert rec.trace.runs[0].start.system == "t"
    assert rec.run.seed == 3


def test_scores_outside_any_window_belong_to_the_run(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        al.score("accuracy", 0.5)
    (score,) = al.read(trace_path).scores()
    assert score.window == -1 and score.value == 0.5
    with pytest.raises(TypeError, match="must be a real number; found str"), al.record(
        trace_path, seed=1
    ):
        al.score("accuracy", "high")  # type: ignore[arg-type]


def test_without_a_recorder_generators_and_coroutines_are_untouched() -> None:
    @al.window("gen")
    def gen(n: int):  # type: ignore[no-untyped-def]
        got = yield from range(n)
        return got

    @al.window("coro")
    async def coro(x: int) -> int:
        return x * 3

    assert list(gen(3)) == [0, 1, 2]
    assert asyncio.run(coro(2)) == 6


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_score_is_refused_and_nothing_is_written(
    trace_path: Path, bad: float
) -> None:
    with al.record(trace_path, seed=1):
        al.score("accuracy", 0.25)
        with pytest.raises(ValueError, match=r"`value` of score 'accuracy' must be finite; "
                           r"found (nan|inf|-inf)\. .*record a number"):
            al.score("accuracy", bad)
    assert [s.value for s in al.read(trace_path).scores()] == [0.25]
    al.score("accuracy", bad)  # without a recorder: the documented no-op


def test_run_ids_are_random_version_4_uuids_in_hex(tmp_path: Path) -> None:
    import uuid

    from agentlog._recorder import new_run_id

    ids = [new_run_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for run_id in ids[:200]:
        parsed = uuid.UUID(hex=run_id)
        assert parsed.hex == run_id and len(run_id) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # Every other bit varies: no position of the 122 random bits is stuck at one value.
    bits = [int(run_id, 16) for run_id in ids]
    fixed = (0xF << 76) | (0x3 << 62)  # the version nibble and the variant's two bits
    stuck = [i for i in range(128) if not fixed >> i & 1
             and len({b >> i & 1 for b in bits}) == 1]
    assert stuck == []
    with al.record(tmp_path / "t.zst", seed=1) as run:
        pass
    assert uuid.UUID(hex=run.run_id).version == 4
