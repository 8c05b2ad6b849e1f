"""replay_channels: raw per-layout/per-wave scores of frozen states, with full provenance."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import asv
from agentlog.records import decode_artifact, encode_artifact
from agentlog.registry import registry
from agentlog.replay import (
    ExecutionOptions,
    NotRegisteredError,
    ScoreContext,
    State,
    Unit,
    WindowNotFoundError,
    areplay_channels,
    get_channel,
    get_scorer,
    plan_channel_units,
    read_units,
    replay_channels,
    request_key,
    run_units,
)
from tests.adapters._trace_text import trace_plaintext

APP = __name__  # this module registers the test channels below


@al.window("chrep-step")
def step(x: float) -> float:
    return 2.0 * x


@al.scorer("chrep-value")
def value_scorer(state: State, view: str | None, layout: int) -> float:
    base = state.value["x"] if state.before else state.value
    return float(base) + (0.0 if view is None else float(len(view))) + 0.01 * layout


@al.channel("chrep-direct", scorer="chrep-value", layouts=2, model="none")
def direct_view(state: State) -> None:
    return None


@al.channel("chrep-quote", scorer="chrep-value", layouts=3)
def quote_view(state: State) -> str:
    return "q" * (1 if state.before else 2)


@al.scorer("chrep-fragile")
def fragile(state: State, view: str | None, layout: int) -> float:
    if state.entry["x"] == 3.0:
        raise RuntimeError("this scorer cannot read x=3")
    return 1.0


@al.channel("chrep-fragile", scorer="chrep-fragile")
def fragile_view(state: State) -> None:
    return None


@al.scorer("chrep-async")
async def async_scorer(state: State, view: str | None, layout: int) -> float:
    await asyncio.sleep(0)
    return value_scorer(state, view, layout)


@al.channel("chrep-async", scorer="chrep-async", layouts=2, model="none")
def async_view(state: State) -> None:
    return None


@al.scorer("chrep-ctx")
def context_scorer(state: State, view: str | None, layout: int, *,
                   context: ScoreContext) -> float:
    assert context.layout == layout and context.unit
    return float(len(context.channel.template or "")) + 100.0 * context.wave


@al.channel("chrep-ctx", scorer="chrep-ctx", template="TEMPLATE")
def ctx_view(state: State) -> None:
    return None


@al.scorer("chrep-model")
def model_scorer(state: State, view: str | None, layout: int, *,
                 context: ScoreContext) -> float:
    assert context.cache is not None, "the replay hands its cache to the scorer"
    key = request_key("openai.chat", {"model": "tiny", "messages": [
        {"role": "user", "content": repr(state.value)}], "temperature": 0})
    answer = context.cache.call(key, lambda: {"margin": 0.5 if state.before else 1.5})
    return float(answer.response["margin"])


@al.channel("chrep-model", scorer="chrep-model", model="tiny")
def model_view(state: State) -> None:
    return None


@al.channel("chrep-badview", scorer="chrep-value")
def bad_view(state: State) -> Any:
    return 42


def _record(path: Path, xs: list[float], *, task: str = "t") -> Path:
    with al.record(path, seed=3, task=task, system="sys", meta={"target": "up"}):
        for x in xs:
            step(x)
    return path


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return _record(tmp_path / "src.zst", [1.0, 2.0, 3.0])


def _replay(trace: Path | list[Path], out: Path, channels: list[str], **kw: Any) -> Any:
    return replay_channels(trace, channels, window="chrep-step", out=out, app=APP,
                           execution=ExecutionOptions(progress=False), **kw)


def _face_values(out: Path) -> dict[tuple[str, int, int, str], float]:
    """(channel, layout, wave, corner) per window id -> value, read from the output."""
    got: dict[tuple[str, int, int, str], float] = {}
    for unit in read_units(out).values():
        assert unit.status == "ok", unit.error_message
        p = unit.provenance
        for s in unit.scores:
            corner = "x-" if s.state_hash == bytes.fromhex(p["entry_hash"]) else "x+"
            got[(s.channel or "", s.layout or 0, s.wave or 0,
                 f"{p['window_id']}{corner}")] = s.value
    return got


def test_every_transition_channel_layout_and_wave_is_one_unit_scoring_both_states(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    summary = _replay(trace, out, ["chrep-direct", "chrep-quote"], waves=2)
    # 3 transitions x (2 + 3 layouts) x 2 waves
    assert (summary.total, summary.done, summary.failed, summary.skipped) == (30, 30, 0, 0)
    windows = [w for w in al.read(trace).windows() if w.name == "chrep-step"]
    got = _face_values(out)
    assert len(got) == 60
    for w in windows:
        x = w.entry_value()["x"]
        for wave in (0, 1):
            for layout in (0, 1):
                assert got[("chrep-direct", layout, wave, f"{w.window}x-")] == x + 0.01 * layout
                assert got[("chrep-direct", layout, wave, f"{w.window}x+")] == \
                    2 * x + 0.01 * layout
            for layout in (0, 1, 2):
                assert got[("chrep-quote", layout, wave, f"{w.window}x-")] == \
                    x + 1 + 0.01 * layout
                assert got[("chrep-quote", layout, wave, f"{w.window}x+")] == \
                    2 * x + 2 + 0.01 * layout


def test_each_unit_carries_full_provenance(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(trace, out, ["chrep-direct"])
    src = al.read(trace)
    start = src.runs[0].start
    windows = {w.window: w for w in src.windows() if w.name == "chrep-step"}
    ch, sc = get_channel("chrep-direct"), get_scorer("chrep-value")
    units = read_units(out)
    assert len(units) == 6
    for key, unit in units.items():
        p = unit.provenance
        w = windows[p["window_id"]]
        assert p["source_trace"] == hashlib.sha256(trace.read_bytes()).hexdigest()
        assert p["source_file"] == "src.zst"
        assert (p["source_run"], p["source_system"], p["source_task"], p["source_seed"],
                p["source_meta"]) == (start.run_id, "sys", "t", 3, {"target": "up"})
        assert (p["window"], p["entry_hash"], p["exit_hash"]) == (
            "chrep-step", w.enter.entry_hash.hex(), w.exit.exit_hash.hex())
        assert (p["channel"], p["channel_id"], p["channel_hash"]) == ("chrep-direct", ch.id,
                                                                      ch.hash)
        assert (p["scorer"], p["scorer_id"], p["scorer_hash"]) == ("chrep-value", sc.id,
                                                                   sc.hash)
        assert (p["wave"], p["model"]) == (0, "none") and p["layout"] in (0, 1)
        assert unit.job == "agentlog.replay:score_channel_unit"
        assert [(s.name, s.channel, s.layout, s.wave, s.transition, s.state_hash)
                for s in unit.scores] == [
            ("chrep-value", "chrep-direct", p["layout"], 0, w.window, w.enter.entry_hash),
            ("chrep-value", "chrep-direct", p["layout"], 0, w.window, w.exit.exit_hash)]
        identity = ["agentlog.channel-replay/1", start.run_id, w.window, w.enter.entry_hash,
                    w.exit.exit_hash, "chrep-direct", ch.hash, sc.hash, p["layout"], 0]
        assert key == hashlib.sha256(encode_artifact(identity)).hexdigest()


def test_replaying_twice_does_no_work_the_second_time_and_the_output_verifies(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    first = _replay(trace, out, ["chrep-direct", "chrep-quote"])
    data = out.read_bytes()
    second = _replay(trace, out, ["chrep-direct", "chrep-quote"])
    assert (first.done, second.total, second.skipped, second.done) == (15, 15, 15, 0)
    assert out.read_bytes() == data
    assert al.verify(out).ok


def test_a_new_wave_or_layout_count_adds_only_the_new_units(trace: Path,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(trace, out, ["chrep-direct"], layouts=1)
    more = _replay(trace, out, ["chrep-direct"], waves=2)
    assert (more.total, more.skipped, more.done) == (12, 3, 9)
    units = read_units(out).values()
    assert sorted({(u.provenance["layout"], u.provenance["wave"]) for u in units}) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]


def test_a_scorer_that_raises_fails_those_units_only_and_the_summary_counts_them(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    summary = _replay(trace, out, ["chrep-fragile", "chrep-direct"])
    assert (summary.total, summary.done, summary.failed) == (9, 8, 1)
    (failure,) = summary.failures
    assert failure.error_type == "RuntimeError"
    assert failure.message == "this scorer cannot read x=3"
    units = read_units(out)
    assert units[failure.key].status == "failed"
    assert units[failure.key].provenance["channel"] == "chrep-fragile"


def test_an_undecodable_state_fails_its_unit_only(trace: Path, tmp_path: Path) -> None:
    units = plan_channel_units(trace, ["chrep-direct"], window="chrep-step", layouts=1)
    broken = Unit(units[1].key, {**units[1].payload, "exit": b"\xc1"}, units[1].provenance)
    summary = run_units([units[0], broken, units[2]],
                        "agentlog.replay:score_channel_unit",
                        out=tmp_path / "out.zst", app=APP,
                        execution=ExecutionOptions(progress=False))
    assert (summary.done, summary.failed) == (2, 1)
    (failure,) = summary.failures
    assert failure.key == broken.key and failure.error_type == "StateDecodeError"
    assert "the exit (x⁺) does not decode" in failure.message


def test_a_worker_with_another_version_of_the_channel_fails_the_unit(
        trace: Path, tmp_path: Path) -> None:
    units = plan_channel_units(trace, ["chrep-direct"], window="chrep-step", layouts=1)
    stale = [Unit(u.key, {**u.payload, "channel_hash": "0" * 64}, u.provenance)
             for u in units[:1]]
    summary = run_units(stale, "agentlog.replay:score_channel_unit",
                        out=tmp_path / "out.zst", app=APP,
                        execution=ExecutionOptions(progress=False))
    (failure,) = summary.failures
    assert failure.error_type == "ChannelVersionError"
    assert "channel 'chrep-direct' here has version" in failure.message
    assert "Run every worker with the same version of the app module" in failure.message


def test_a_view_that_returns_neither_str_nor_none_fails_its_units(trace: Path,
                                                                  tmp_path: Path) -> None:
    summary = _replay(trace, tmp_path / "out.zst", ["chrep-badview"])
    assert summary.failed == 3 and summary.done == 0
    assert summary.failures[0].message == ("channel 'chrep-badview': view(before state) must "
                                           "return a str or None (no added view); returned "
                                           "int")


def test_the_scorer_context_gives_the_channel_template_and_the_wave(trace: Path,
                                                                    tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    _replay(trace, out, ["chrep-ctx"], waves=2)
    values = sorted({(s.wave, s.value) for u in read_units(out).values() for s in u.scores})
    assert values == [(0, 8.0), (1, 108.0)]


def test_async_scorers_give_the_same_scores_as_sync_ones(trace: Path, tmp_path: Path) -> None:
    _replay(trace, tmp_path / "sync.zst", ["chrep-direct"])
    asyncio.run(areplay_channels(trace, ["chrep-async"], window="chrep-step",
                                 out=tmp_path / "async.zst", app=APP,
                                 execution=ExecutionOptions(progress=False)))
    sync = {k[1:]: v for k, v in _face_values(tmp_path / "sync.zst").items()}
    asyn = {k[1:]: v for k, v in _face_values(tmp_path / "async.zst").items()}
    assert sync == asyn and len(sync) == 12


def test_a_frozen_replay_serves_model_calls_from_the_cache_and_a_miss_fails_the_unit(
        trace: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    live = _replay(trace, tmp_path / "a.zst", ["chrep-model"], cache=cache)
    assert (live.done, live.cache_misses, live.cache_hits) == (3, 6, 0)
    again = _replay(trace, tmp_path / "b.zst", ["chrep-model"], cache=cache, frozen=True)
    assert (again.done, again.cache_hits, again.cache_misses, again.live_calls) == (3, 6, 0, 0)
    assert _face_values(tmp_path / "a.zst") == _face_values(tmp_path / "b.zst")
    other = _record(tmp_path / "other.zst", [9.0])
    missed = _replay(other, tmp_path / "c.zst", ["chrep-model"], cache=cache, frozen=True)
    assert missed.failed == 1 and missed.failures[0].error_type == "CacheMiss"


def test_unknown_channel_or_window_is_refused_before_anything_is_written(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.zst"
    with pytest.raises(NotRegisteredError, match=r"no channel named 'chrep-nope' is "
                                                 r"registered .*--app MODULE"):
        _replay(trace, out, ["chrep-direct", "chrep-nope"])
    with pytest.raises(WindowNotFoundError, match=r"no completed instance of window "
                                                  r"'retrieval' in the traces; windows "
                                                  r"present: chrep-step"):
        replay_channels(trace, ["chrep-direct"], window="retrieval", out=out, app=APP,
                        execution=ExecutionOptions(progress=False))
    with pytest.raises(ValueError, match=r"`waves` must be an int >= 1"):
        _replay(trace, out, ["chrep-direct"], waves=0)
    with pytest.raises(ValueError, match=r"`channels` must name at least one"):
        _replay(trace, out, [])
    assert not out.exists()


def test_unit_keys_are_stable_and_change_with_the_channel_version(trace: Path) -> None:
    a = [u.key for u in plan_channel_units(trace, ["chrep-quote"], window="chrep-step")]
    b = [u.key for u in plan_channel_units(trace, ["chrep-quote"], window="chrep-step")]
    assert a == b and len(set(a)) == 9
    reg = registry("channel")
    entry = reg.get("chrep-quote")
    try:
        al.channel("chrep-quote", scorer="chrep-value", layouts=3, extra=1)(quote_view)
        c = [u.key for u in plan_channel_units(trace, ["chrep-quote"], window="chrep-step")]
        assert set(c).isdisjoint(a)
    finally:
        reg.register("chrep-quote", entry.obj, entry.params)
    assert get_channel("chrep-quote").hash == entry.hash


# ------------------------------------------------- the bundled agent: replay = record time


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Path], Path]]:
    from agentlog.examples.deep_research import run_study, task_ids

    folder = tmp_path_factory.mktemp("study")
    paths = run_study(folder / "runs", tasks=task_ids(4), seeds=(0, 1), evaluate=True)
    out = folder / "asv.zst"
    replay_channels(paths, ["direct", "quote"], window="retrieval", out=out,
                    app="agentlog.examples.deep_research",
                    execution=ExecutionOptions(progress=False))
    yield paths, out


def test_replayed_scores_equal_the_record_time_evaluators_exactly(
        study: tuple[list[Path], Path]) -> None:
    paths, out = study
    recorded = asv.from_traces(paths, channels=("direct", "quote"), window="retrieval")
    replayed = asv.from_traces(out, channels=("direct", "quote"))
    assert sorted(replayed.transitions) == sorted(recorded.transitions)
    where = {k: i for i, k in enumerate(recorded.transitions)}
    perm = [where[k] for k in replayed.transitions]
    assert np.array_equal(replayed.corners[0], recorded.corners[0][perm])
    assert np.array_equal(replayed.trajectory, recorded.trajectory[perm])
    assert np.array_equal(replayed.target, recorded.target[perm])
    assert replayed.layouts == recorded.layouts == {"direct": (0, 1, 2, 3),
                                                     "quote": (0, 1, 2, 3)}
    for key, arr in recorded.per_layout.items():
        assert np.array_equal(replayed.per_layout[key], arr[perm])


def test_the_quote_view_quotes_stance_labels_of_the_state(
        study: tuple[list[Path], Path]) -> None:
    paths, _ = study
    from agentlog.replay.lowlevel import frozen_transitions

    t = next(frozen_transitions(paths[0], window="retrieval"))
    quote = get_channel("quote")
    before, after = quote.view(t.before()), quote.view(t.after())
    assert before is not None and after is not None
    assert len(before.split("; ")) == 3
    opened = t.after().value["opened"]
    assert [p.split(": ")[0] for p in after.split("; ")] == opened
    assert get_channel("direct").view(t.before()) is None


def test_the_replayed_face_does_not_depend_on_the_units_finishing_order(
        study: tuple[list[Path], Path], tmp_path: Path) -> None:
    paths, out = study
    units = plan_channel_units(paths, ["direct", "quote"], window="retrieval")
    shuffled = tmp_path / "shuffled.zst"
    rng = np.random.default_rng(0)
    order = rng.permutation(len(units))
    run_units([units[i] for i in order], "agentlog.replay:score_channel_unit",
              out=shuffled, app="agentlog.examples.deep_research",
              execution=ExecutionOptions(progress=False))
    a = asv.from_traces(out, channels=("direct", "quote"))
    b = asv.from_traces(shuffled, channels=("direct", "quote"))
    assert a.transitions == b.transitions
    assert np.array_equal(a.corners[0], b.corners[0])
    assert np.array_equal(a.trajectory, b.trajectory)


def test_reading_the_source_and_its_replay_together_counts_each_transition_once(
        study: tuple[list[Path], Path], tmp_path: Path) -> None:
    from agentlog.examples.deep_research import run_study, task_ids

    bare = run_study(tmp_path / "bare", tasks=task_ids(2), seeds=(0,), evaluate=False)
    out = tmp_path / "out.zst"
    replay_channels(bare, ["direct", "quote"], window="retrieval", out=out,
                    app="agentlog.examples.deep_research",
                    execution=ExecutionOptions(progress=False))
    both = asv.from_traces([*bare, out], channels=("direct", "quote"), window="retrieval")
    alone = asv.from_traces(out, channels=("direct", "quote"))
    assert len(both.transitions) == len(alone.transitions) == 4
    assert np.isfinite(both.corners[0]).all()
    where = {k: i for i, k in enumerate(both.transitions)}
    assert np.array_equal(both.corners[0][[where[k] for k in alone.transitions]],
                          alone.corners[0])


def test_record_time_scores_and_a_replay_of_the_same_wave_are_two_acquisitions(
        study: tuple[list[Path], Path]) -> None:
    paths, out = study
    with pytest.raises(ValueError, match=r"is scored twice on channel 'direct'.*give repeated "
                                         r"acquisitions distinct waves \(a replay's output and "
                                         r"the record-time scores"):
        asv.from_traces([*paths, out], channels=("direct", "quote"), window="retrieval")


def test_an_edited_replay_provenance_is_refused(tmp_path: Path) -> None:
    with al.record(tmp_path / "fake.zst", seed=1, meta={"agentlog.replay": {
            "kind": "agentlog.channel-replay/1", "unit": "k"}}):
        al.score("margin", 1.0, channel="direct")
    with pytest.raises(ValueError, match=r"is a channel-replay unit whose provenance is "
                                         r"incomplete \(KeyError"):
        asv.from_traces(tmp_path / "fake.zst", channels=("direct", "quote"))


def test_payloads_hold_only_plain_data(trace: Path) -> None:
    (unit, *_) = plan_channel_units(trace, ["chrep-direct"], window="chrep-step")
    assert decode_artifact(unit.payload["entry"]) == {"x": 1.0}
    assert dataclasses.is_dataclass(unit)


PRIVATE_PATH = re.compile(rb"agentlog\.(?:[a-z]+\.)?_[a-z_]+")  # a private module's path


def test_no_private_module_path_is_written_into_the_output(trace: Path, tmp_path: Path) -> None:
    """Job ids used to be written as agentlog.replay._channel_replay:score_channel_unit."""
    out = tmp_path / "out.zst"
    _replay(trace, out, ["chrep-direct"])
    assert PRIVATE_PATH.findall(trace_plaintext(out)) == []
    assert {u.job for u in read_units(out).values()} == {"agentlog.replay:score_channel_unit"}
    assert PRIVATE_PATH.search(b"agentlog.replay._channel_replay:score_channel_unit")


def test_two_channels_of_one_version_are_refused_with_the_fix(trace: Path,
                                                              tmp_path: Path) -> None:
    """Two lambdas on one line share their id and source, so their channels share a
    version: their units would collide. Refused before any work, naming the fix."""
    names = ("chrep-twin-a", "chrep-twin-b")
    for name, view in zip(names, (lambda s: None, lambda s: "other view"), strict=True):
        al.channel(name, scorer="chrep-value", model="none")(view)
    try:
        with pytest.raises(ValueError, match=r"have the same version.*its own named function"):
            replay_channels(trace, list(names), window="chrep-step",
                            out=tmp_path / "out.zst", app=APP)
        assert not (tmp_path / "out.zst").exists()
    finally:
        for name in names:
            registry("channel").unregister(name)
