"""Acceptance: common random numbers under ``Reverse()``; ``ForceRecorded`` on the demo."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog.examples.deep_research import run_study, task_ids
from agentlog.records import Continuation, Selection, WindowView
from agentlog.reentry import steering
from agentlog.replay import reenter_arguments, resume_streams, window_function
from agentlog.replay.interventions import ForceRecorded, Reverse, Steer
from agentlog.replay.lowlevel import stream_offsets

POOL = [f"doc-{i:02d}" for i in range(12)]
N_STEPS = 60


@al.window("crn_agent")
def crn_agent(task: str, n_steps: int) -> list[str]:
    """A ranking agent whose pool comes in a new order at every step."""
    rng = np.random.default_rng(zlib.crc32(task.encode()))
    ranks = np.arange(len(POOL), 0, -1, dtype=np.float64)
    probs = ranks / ranks.sum()  # the listed-first candidate is the likeliest
    picks: list[str] = []
    for _ in range(n_steps):
        order = [POOL[i] for i in rng.permutation(len(POOL))]
        picks.append(order[al.select(probs, candidates=order, name="doc")])
    return picks


def draws_by_doc(trace: al.Trace, window: int) -> dict[int, dict[str, float]]:
    """step -> {document id: its Gumbel draw} of the window's selections."""
    out: dict[int, dict[str, float]] = {}
    for sel in trace.selections("doc"):
        if sel.window == window:
            out[sel.step] = dict(zip(trace.candidates(sel), trace.draws(sel).tolist(),
                                     strict=True))
    return out


def reenter(view: WindowView, out: Path, steer: Steer,
            change: Any = None) -> Any:
    """Re-enter ``view`` under ``steer``; ``change(args, kwargs)`` may alter the call."""
    start = view.trace.runs[view.run].start
    assert start is not None
    args, kwargs = reenter_arguments(view)
    if change is not None:
        args, kwargs = change(args, kwargs)
    with al.record(out, seed=start.seed, mode="w", generator=start.generator), \
            resume_streams(stream_offsets(view)), steering(steer):
        return window_function(view)(*args, **kwargs)


@pytest.mark.parametrize("task", ["t-a", "t-b", "t-c"])
def test_under_reverse_each_document_gets_its_recorded_draw_at_each_step(
        tmp_path: Path, task: str) -> None:
    src = tmp_path / "src.zst"
    with al.record(src, seed=zlib.crc32(task.encode()) % 1000, mode="w"):
        for _ in range(5):  # the window opens at doc step 5
            al.select([0.5, 0.5], name="doc")
        crn_agent(task, N_STEPS)
    source = al.read(src)
    (view,) = source.windows("crn_agent")
    reenter(view, tmp_path / "rev.zst", Reverse())
    replay = al.read(tmp_path / "rev.zst")
    (again,) = replay.windows("crn_agent")
    recorded, reversed_ = draws_by_doc(source, view.window), draws_by_doc(replay, again.window)
    assert sorted(recorded) == sorted(reversed_) == list(range(5, 5 + N_STEPS))
    for step in recorded:
        assert reversed_[step] == recorded[step]  # same document, same step: same draw
    orders = {tuple(source.candidates(s)) for s in source.selections("doc") if s.window == 0}
    assert len(orders) > N_STEPS // 2  # the pool order did change from step to step
    # ... while the intervention did act: the reversed vector changes many choices
    rec_sel = [s for s in source.selections("doc") if s.window == view.window]
    rev_sel = [s for s in replay.selections("doc") if s.window == again.window]
    assert all(np.array_equal(replay.policy_probs(b), source.probs(a))  # type: ignore[arg-type]
               and np.array_equal(replay.probs(b), source.probs(a)[::-1])
               for a, b in zip(rec_sel, rev_sel, strict=True))
    assert sum(a.choice != b.choice for a, b in zip(rec_sel, rev_sel, strict=True)) > 10


# --------------------------------------------------------------------- ForceRecorded


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    paths: list[Path] = run_study(tmp_path_factory.mktemp("demo"), tasks=task_ids(3),
                                  rankings=("agent", "reversed", "uniform"), seeds=(0, 1))
    return paths


def test_force_recorded_replays_every_demo_trace_with_zero_divergences(
        demo: list[Path], tmp_path: Path) -> None:
    draws = 0
    for i, path in enumerate(demo):
        source = al.read(path)
        (view,) = source.windows("retrieval")
        steer = ForceRecorded(view)
        reenter(view, tmp_path / f"r{i}.zst", steer)
        assert steer.unreplayed() == []
        replay = al.read(tmp_path / f"r{i}.zst")
        (again,) = replay.windows("retrieval")
        assert (again.entry_hash, again.exit_hash) == (view.entry_hash, view.exit_hash)
        for kind in (Selection, Continuation):
            mine = [msgspec.structs.replace(r, t_ns=0) for r in source.records
                    if type(r) is kind]
            theirs = [msgspec.structs.replace(r, t_ns=0) for r in replay.records
                      if type(r) is kind]
            assert theirs == mine  # bit for bit: probabilities, draws, choices, decisions
            draws += len(mine)
        assert al.verify(tmp_path / f"r{i}.zst").ok
    assert draws > 3 * len(demo)


def flipped(path: Path, kind: type, nth: int, **change: Any) -> tuple[WindowView, int, Any]:
    """The retrieval window of ``path`` read into memory with one record changed (a copy:
    the file is untouched); returns the view, the record's index and the record."""
    trace = al.read(path)
    (view,) = trace.windows("retrieval")
    records = trace.runs[view.run].records
    index = [i for i, r in enumerate(records) if type(r) is kind][nth]
    records[index] = msgspec.structs.replace(records[index], **change)
    return view, index, records[index]


def test_a_flipped_recorded_choice_diverges_at_that_record(
        demo: list[Path], tmp_path: Path) -> None:
    trace = al.read(demo[0])
    sel = trace.selections("doc")[1]
    other = (sel.choice + 1) % sel.n
    view, index, _ = flipped(demo[0], Selection, 1, choice=other)
    ids = trace.candidates(sel)
    with pytest.raises(al.ReplayDivergenceError,
                       match=rf"at record #{index} of the run \(select 'doc' step {sel.step}\): "
                             rf"choice recorded {other} \('{ids[other]}'\), replayed "
                             rf"{sel.choice} \('{ids[sel.choice]}'\)") as err:
        reenter(view, tmp_path / "r.zst", ForceRecorded(view))
    e = err.value
    assert (e.record, e.stream, e.step, e.field) == (index, "doc", sel.step, "choice")


def test_a_flipped_recorded_draw_or_decision_diverges_at_that_record(
        demo: list[Path], tmp_path: Path) -> None:
    trace = al.read(demo[0])
    sel = trace.selections("doc")[0]
    draws = trace.draws(sel).copy()
    draws[3] += 1e-9
    view, index, _ = flipped(demo[0], Selection, 0, draws=draws.tobytes())
    doc = trace.candidates(sel)[3]
    with pytest.raises(al.ReplayDivergenceError,
                       match=rf"record #{index} .*Gumbel draw of '{doc}' recorded"):
        reenter(view, tmp_path / "r.zst", ForceRecorded(view))
    cont = trace.continuations("stop")[0]
    view, index, _ = flipped(demo[0], Continuation, 0, decision=not cont.decision)
    with pytest.raises(al.ReplayDivergenceError,
                       match=rf"record #{index} of the run \(proceed 'stop' step 0\): decision "
                             rf"recorded {not cont.decision}, replayed {cont.decision}"):
        reenter(view, tmp_path / "r.zst", ForceRecorded(view))


def test_a_replay_with_another_seed_or_vector_diverges_at_the_first_draw(
        demo: list[Path], tmp_path: Path) -> None:
    source = al.read(demo[0])
    (view,) = source.windows("retrieval")
    args, kwargs = reenter_arguments(view)
    first = source.selections("doc")[0]
    generator = first.generator
    with al.record(tmp_path / "r.zst", seed=12345, mode="w", generator=generator), \
            steering(ForceRecorded(view)), \
            pytest.raises(al.ReplayDivergenceError, match=r"select 'doc' step 0\): Gumbel draw"):
        window_function(view)(*args, **kwargs)

    def other_ranking(a: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        ranking = "uniform" if a[1] != "uniform" else "agent"
        return (a[0], ranking, *a[2:]), kw

    with pytest.raises(al.ReplayDivergenceError, match=r"step 0\): candidates recorded \["
                                                       r"'q0-d\d\d', ") as err:
        reenter(view, tmp_path / "r.zst", ForceRecorded(view), change=other_ranking)
    assert (err.value.stream, err.value.step, err.value.field) == ("doc", first.step,
                                                                   "candidates")


@al.window("vec_agent")
def vec_agent(p: list[float]) -> int:
    return al.select(p, candidates=["x", "y", "z"], name="doc")


def test_another_probability_vector_diverges_naming_the_candidate(tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=1):
        vec_agent([0.2, 0.3, 0.5])
    (view,) = al.read(tmp_path / "a.zst").windows("vec_agent")
    with pytest.raises(al.ReplayDivergenceError, match=r"probability of 'y' recorded 0\.3, "
                                                       r"replayed 0\.4"):
        reenter(view, tmp_path / "r.zst", ForceRecorded(view),
                change=lambda a, kw: (([0.2, 0.4, 0.4],), kw))


def test_a_draw_the_recording_never_made_diverges(tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=1):
        crn_agent("t-a", 2)
    (view,) = al.read(tmp_path / "a.zst").windows("crn_agent")
    with pytest.raises(al.ReplayDivergenceError, match=r"\(select 'doc' step 2\): the draw "
                                                       r"recorded nothing \(the recording "
                                                       r"never drew"):
        reenter(view, tmp_path / "r.zst", ForceRecorded(view),
                change=lambda a, kw: ((a[0], a[1] + 1), kw))
    steer = ForceRecorded(view)
    reenter(view, tmp_path / "r.zst", steer, change=lambda a, kw: ((a[0], 1), kw))
    assert steer.unreplayed() == [("select", "doc", 1)]


def test_a_replay_run_on_another_noise_generator_is_named_as_the_divergence(
        demo: list[Path], tmp_path: Path) -> None:
    """The demo agent records with generator /1; a replay run opened with the default /3
    would draw other noise: the first selection says so, naming the fix."""
    source = al.read(demo[0])
    (view,) = source.windows("retrieval")
    start = source.runs[view.run].start
    assert start is not None and start.generator != "fmix64-gumbel/3"
    args, kwargs = reenter_arguments(view)
    expected = (r"noise generator recorded fmix64-gumbel/1, replayed fmix64-gumbel/3 "
                r"\(open the replay's run with al.record\(..., "
                r"generator='fmix64-gumbel/1'\)\)")
    with pytest.raises(al.ReplayDivergenceError, match=expected), \
            al.record(tmp_path / "r.zst", seed=start.seed, mode="w"), \
            resume_streams(stream_offsets(view)), steering(ForceRecorded(view)):
        window_function(view)(*args, **kwargs)


@al.window("stop_agent")
def stop_agent(budget: int) -> list[str]:
    """Up to ``budget`` picks from POOL, asking at each round whether to go on."""
    picks: list[str] = []
    for t in range(budget):
        if t and not al.proceed(0.7, name="stop"):
            break
        picks.append(POOL[al.select([1 / len(POOL)] * len(POOL), candidates=POOL,
                                    name="doc")])
    return picks


def test_a_run_of_generator_3_replays_with_its_task_and_diverges_without_it(
        tmp_path: Path) -> None:
    """/3 folds the task into the noise: a re-entry with the source's seed, task and
    generator reproduces every recorded draw, choice and stop; one without the task is
    told which task to open its run with."""
    src = tmp_path / "src.zst"
    with al.record(src, seed=7, task="q-001", mode="w"):
        al.select([0.5, 0.5], name="doc")  # the window opens at doc step 1
        recorded = stop_agent(8)
    source = al.read(src)
    (view,) = source.windows("stop_agent")
    start = source.runs[view.run].start
    assert start is not None and start.generator == "fmix64-gumbel/3"
    args, kwargs = reenter_arguments(view)
    steer = ForceRecorded(view)
    with al.record(tmp_path / "r.zst", seed=start.seed, task=start.task, mode="w",
                   generator=start.generator), resume_streams(view), steering(steer):
        assert window_function(view)(*args, **kwargs) == recorded
    assert steer.unreplayed() == []
    replay = al.read(tmp_path / "r.zst")
    for kind in (Selection, Continuation):
        mine = [msgspec.structs.replace(r, t_ns=0) for r in source.records
                if type(r) is kind and r.window == view.window]
        theirs = [msgspec.structs.replace(r, t_ns=0, window=view.window)
                  for r in replay.records if type(r) is kind]
        assert theirs == mine and mine  # draws, choices and stop decisions, bit for bit
    # resume_streams(view) refuses the run before any draw ...
    with pytest.raises(ValueError, match=r"records task None, but the window was recorded "
                                         r"for task 'q-001'.*al.record\(..., task='q-001'\)"), \
            al.record(tmp_path / "r2.zst", seed=start.seed, mode="w"), resume_streams(view):
        pass
    # ... and ForceRecorded, given only the offsets, names the task at the first draw.
    with pytest.raises(al.ReplayDivergenceError,
                       match=r"\(select 'doc' step 1\): task recorded 'q-001', replayed None "
                             r"\(the task is part of the noise: open the replay's run with "
                             r"al.record\(..., task='q-001'\)\)"), \
            al.record(tmp_path / "r3.zst", seed=start.seed, mode="w"), \
            resume_streams(stream_offsets(view)), steering(ForceRecorded(view)):
        window_function(view)(*args, **kwargs)
