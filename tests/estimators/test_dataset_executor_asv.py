"""``asv.from_dataset(..., executor=...)``: the per-run stage as a group-by on ``run_id`` and
the collection on the driver give ``asv.from_traces``'s ``AsvData`` and first error, bit for
bit, locally and on Ray Data.

The dataset is generated here: the bundled deep-research agent's runs without scores, a
channel replay of them in two waves (its output in ``replay/``, which a folder reads before
the sources in ``runs/``), and runs scored at record time (``scored/``), exported in small
batches. The Ray tests reuse ``tests/estimators/test_ray_executor.py``'s cluster fixture (a
head and two worker nodes) and are ``slow``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.dataset import read_table
from agentlog.estimators import asv
from tests.cli._cli import invoke
from tests.estimators.test_ray_executor import cluster  # noqa: F401 - the shared fixture

pa = pytest.importorskip("pyarrow")

CHANNELS = ("direct", "quote")
APP = "agentlog.examples.deep_research"


def _record(folder: Path) -> Path:
    from agentlog.examples.deep_research import run_study, task_ids
    from agentlog.replay import ExecutionOptions, replay_channels

    sources = run_study(folder / "runs", tasks=task_ids(2), seeds=(0, 1), evaluate=False)
    run_study(folder / "scored", tasks=task_ids(2), seeds=(5,), evaluate=True)
    (folder / "replay").mkdir()
    replay_channels(sources, list(CHANNELS), window="retrieval",
                    out=folder / "replay" / "asv.zst", app=APP, waves=2,
                    execution=ExecutionOptions(progress=False))
    return folder


def _export(folder: Path, out: Path) -> Path:
    from agentlog.dataset import to_parquet

    to_parquet(sorted(folder.rglob("*.zst")), out, batch_rows=50)
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("asv-traces"))


@pytest.fixture(scope="module")
def dataset(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _export(traces, tmp_path_factory.mktemp("asv-dataset") / "ds")


def _assert_same(a: asv.AsvData, b: asv.AsvData) -> None:
    assert (b.channels, b.transitions, b.window_names) == (a.channels, a.transitions,
                                                           a.window_names)
    assert (b.layouts, b.waves, sorted(b.per_layout)) == (a.layouts, a.waves,
                                                          sorted(a.per_layout))
    pairs = [(a.trajectory, b.trajectory), (a.target, b.target),
             *((a.corners[w], b.corners[w]) for w in a.waves),
             *((a.per_layout[k], b.per_layout[k]) for k in a.per_layout)]
    for want, got in pairs:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


def test_the_local_stage_gives_the_trace_paths_data(traces: Path, dataset: Path) -> None:
    a = asv.from_traces(traces, channels=CHANNELS)
    _assert_same(a, asv.from_dataset(dataset, channels=CHANNELS))
    assert a.waves == [0, 1] and len(set(a.window_names)) == 1
    assert len(a.transitions) == len(set(a.transitions)) > 10
    assert np.isfinite(a.corners[0]).all() and np.isnan(a.corners[1]).any()  # wave 1: replay
    for kwargs in ({"window": "retrieval", "score": ("margin", "margin")},
                   {"trajectory_key": "ranking", "target_key": "ranking"}):
        _assert_same(asv.from_traces(traces, channels=CHANNELS, **kwargs),
                     asv.from_dataset(dataset, channels=CHANNELS, **kwargs))
    assert asv.channel_scores(dataset) == asv.channel_scores(traces)
    tables = {name: read_table(dataset, name) for name in ("runs", "windows", "scores")}
    _assert_same(a, asv.from_dataset(tables, channels=CHANNELS))


def test_a_replay_read_before_its_sources_joins_their_transitions(traces: Path) -> None:
    """A folder reads ``replay/`` before ``runs/``: each replayed transition is the one its
    source run records (not a second, unscored one), in the source's place, as when the
    sources are read first."""
    replay = traces / "replay" / "asv.zst"
    sources = [p for p in sorted(traces.rglob("*.zst")) if p != replay]
    first = asv.from_traces([*sources, replay], channels=CHANNELS)
    _assert_same(first, asv.from_traces(traces, channels=CHANNELS))


def test_one_partition_at_a_time_gives_the_same_bits(
        traces: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local stage reading one Hive partition of the dataset folder at a time (its
    groups of partitions made as small as they go) gives the trace path's data."""
    from agentlog.estimators import _executor

    assert len(list(_executor.partition_groups(dataset, 1))) > 1
    monkeypatch.setattr(_executor, "GROUP_RUNS", 1)
    _assert_same(asv.from_traces(traces, channels=CHANNELS),
                 asv.from_dataset(dataset, channels=CHANNELS))


def test_one_run_per_call_in_any_order_gives_the_same_bits(
        dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private piece: ``group_runs`` handing the stage one run at a time, last run first
    (any split into whole runs, in any order, as Ray's blocks come back), changes nothing."""
    from agentlog.estimators import _executor

    whole = asv.from_dataset(dataset, channels=CHANNELS)
    group_runs = _executor.group_runs

    def last_run_first(data: Any, tables: Mapping[str, list[str]], fn: Callable[..., Any],
                       kwargs: Mapping[str, Any], executor: str) -> Iterator[Any]:
        (whole_runs,) = group_runs(data, tables, lambda parts: parts, {}, "local")
        runs = whole_runs["runs"]
        for i in reversed(range(runs.num_rows)):
            one = runs.slice(i, 1)
            yield fn({name: _executor.with_rows(rows, one).drop_columns(["row"])
                      for name, rows in whole_runs.items()}, **kwargs)

    monkeypatch.setattr(_executor, "group_runs", last_run_first)
    _assert_same(whole, asv.from_dataset(dataset, channels=CHANNELS))


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``a.zst``: a transition scored twice; ``b.zst``: a replayed unit whose provenance
    was edited; ``c.zst``: a clean scored transition."""
    folder = tmp_path_factory.mktemp("asv-faulty")

    @al.window("step")
    def step(x: int) -> int:
        return x + 1

    for name, times in (("a", 2), ("c", 1)):
        with al.record(folder / f"{name}.zst", seed=1, task="t", meta={"k": name}):
            step(1)
            ref = al.last_window("step")
            assert ref is not None
            for _ in range(times):
                for channel in CHANNELS:
                    al.score("m", 0.5, channel=channel, transition=ref.id,
                             state_hash=ref.entry_hash)
    with al.record(folder / "b.zst", seed=1, meta={"agentlog.replay": {
            "kind": "agentlog.channel-replay/1", "unit": "k"}}):
        al.score("m", 1.0, channel="direct")
    return folder, _export(folder, folder.parent / "faulty-ds")


def _error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ValueError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# Without window=, the cells pass meets b.zst's provenance first; with it, the collection
# meets a.zst's repeated cell (or its lack of a trajectory key) first.
ERRORS: tuple[tuple[dict[str, Any], str], ...] = (
    ({}, "b.zst: run 0 is a channel-replay unit whose provenance is incomplete"),
    ({"window": "step"}, "a.zst: transition 0 is scored twice on channel 'direct'"),
    ({"window": "step", "trajectory_key": "episode"}, "a.zst: run 0 has no meta key"),
    ({"window": "step", "score": "nope"}, "b.zst: run 0 is a channel-replay unit"),
)


def test_the_first_error_in_run_order_is_the_trace_paths(faulty: tuple[Path, Path]) -> None:
    traces, dataset = faulty
    for kwargs, expected in ERRORS:
        want = _error(asv.from_traces, traces, channels=CHANNELS, **kwargs)
        assert expected in want
        assert _error(asv.from_dataset, dataset, channels=CHANNELS, **kwargs) == want
    assert _error(asv.channel_scores, dataset) == _error(asv.channel_scores, traces)


def test_executor_is_named_and_ray_needs_a_folder_and_ray(
        dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"`executor` must be one of 'local', 'ray'"):
        asv.from_dataset(dataset, channels=CHANNELS, executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`executor` must be one of 'local', 'ray'"):
        asv.channel_scores(dataset, executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"pass the dataset folder .*found dict"):
        asv.from_dataset({"runs": pa.table({"run_id": ["r"]})}, channels=CHANNELS,
                         executor="ray")
    with pytest.raises(ValueError, match="`dataset` lacks the table"):
        asv.from_dataset({"runs": pa.table({"run_id": ["r"]})}, channels=CHANNELS)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    for call in (lambda: asv.from_dataset(dataset, channels=CHANNELS, executor="ray"),
                 lambda: asv.channel_scores(dataset, executor="ray")):
        with pytest.raises(al.MissingDependencyError, match=r"pip install 'agentlog\[ray\]'"):
            call()


ARGS = ["--channels", "direct,quote", "--resamples", "300", "--json"]


def test_the_cli_refuses_ray_without_a_dataset_or_without_ray(
        traces: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = {(traces, "--executor", "ray"): "pass the dataset folder",
               (dataset, "--ray-address", "auto"): "pass --executor ray too",
               (dataset, "--executor", "ray"): "pip install 'agentlog[ray]'"}
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
        for args, message in refused.items():
            done = invoke("estimate", "asv", *args, *ARGS)
            assert (done.exit_code, message in done.stderr) == (2, True), done.output
            assert "Traceback" not in done.output
    local = invoke("estimate", "asv", dataset, *ARGS)
    assert local.exit_code == 0, local.output
    assert json.loads(local.stdout)["settings"]["executor"] == "local"


@pytest.mark.slow
def test_asv_on_ray_gives_the_local_and_trace_data_bit_for_bit(
        cluster: Any, traces: Path, dataset: Path,  # noqa: F811
        faulty: tuple[Path, Path]) -> None:
    a = asv.from_traces(traces, channels=CHANNELS)
    _assert_same(a, asv.from_dataset(dataset, channels=CHANNELS, executor="ray"))
    # A run's error comes back from Ray's workers as text, raised in run order (the
    # collection's own errors are the driver's, as locally).
    folder, bad = faulty
    assert _error(asv.from_dataset, bad, channels=CHANNELS, executor="ray") == _error(
        asv.from_traces, folder, channels=CHANNELS)


@pytest.mark.slow
def test_the_cli_with_executor_ray_prints_the_local_json(
        cluster: Any, dataset: Path) -> None:  # noqa: F811
    local = invoke("estimate", "asv", dataset, *ARGS)
    remote = invoke("estimate", "asv", dataset, *ARGS, "--executor", "ray")
    assert local.exit_code == 0, local.output
    assert remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert (a["settings"].pop("executor"), b["settings"].pop("executor")) == ("local", "ray")
    assert a == b and a["retry"] is not None  # channel_scores on Ray: the same window


def _step_run(path: Path, *, other_score: bytes | None = None) -> tuple[Any, Any]:
    """One recorded run: window ``step`` scored on both channels at both ends, and, with
    ``other_score``, a window ``other`` scored once on ``direct`` naming that state. Its
    ``RunStart`` and the ``step`` window's ref."""
    from agentlog.records import iter_runs

    @al.window("step")
    def step(x: int) -> int:
        return x + 1

    @al.window("other")
    def other(x: int) -> int:
        return x * 2

    with al.record(path, seed=3, task="t"):
        step(1)
        ref = al.last_window("step")
        assert ref is not None
        for channel, (before, after) in zip(CHANNELS, ((0.1, 0.4), (0.2, 0.7)), strict=True):
            al.score("m", before, channel=channel, transition=ref.id,
                     state_hash=ref.entry_hash)
            al.score("m", after, channel=channel, transition=ref.id, state_hash=ref.exit_hash)
        if other_score is not None:
            other(2)
            second = al.last_window("other")
            assert second is not None
            al.score("m", 0.9, channel="direct", transition=second.id, state_hash=other_score)
    ((_, run),) = list(iter_runs(path))
    return run.start, ref


def _unit(path: Path, start: Any, ref: Any, *, entry: bytes) -> None:
    """A channel-replay unit of ``ref``'s transition (wave 1 on ``quote``), its provenance
    naming ``entry`` as the transition's entry state."""
    provenance = {
        "kind": "agentlog.channel-replay/1", "unit": "u", "source_run": start.run_id,
        "source_system": start.system, "source_seed": start.seed,
        "source_task": start.task, "source_meta": start.meta, "window": "step",
        "window_id": ref.id, "entry_hash": entry.hex(), "exit_hash": ref.exit_hash.hex(),
        "source_file": "src.zst"}
    with al.record(path, seed=0, meta={"agentlog.replay": provenance}):
        al.score("m", 0.3, channel="quote", transition=ref.id, state_hash=entry, wave=1)


def test_a_unit_that_replayed_other_states_than_its_source_is_refused(tmp_path: Path) -> None:
    """The corners are read within each run, so the driver keeps the ends only of the
    transitions a replayed unit names, and checks the unit's against its source's: a unit
    whose provenance names another entry state is refused whichever is read first, with the
    same message from the traces and from their dataset; a faithful unit joins its source."""
    src = tmp_path / "src.zst"
    start, ref = _step_run(src)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    _unit(good / "unit.zst", start, ref, entry=ref.entry_hash)
    _unit(bad / "unit.zst", start, ref, entry=bytes(32))
    joined = asv.from_traces([src, good / "unit.zst"], channels=CHANNELS)
    assert joined.transitions == [(start.run_id, ref.id)]
    assert np.allclose(joined.corners[0], [[0.1, 0.4, 0.2, 0.7]])
    assert joined.per_layout[1, "quote", 0][0, 0] == 0.3
    _assert_same(joined, asv.from_traces([good / "unit.zst", src], channels=CHANNELS))
    for first in ([src, bad / "unit.zst"], [bad / "unit.zst", src]):
        message = _error(asv.from_traces, first, channels=CHANNELS)
        assert "disagree on the states of transition" in message, message
        assert "Replay the channels again" in message
    for files in ([src, good / "unit.zst"], [src, bad / "unit.zst"]):
        folder = tmp_path / f"set-{files[1].parent.name}"
        folder.mkdir()
        for f in files:
            (folder / f.name).write_bytes(f.read_bytes())
        ds = _export(folder, tmp_path / f"ds-{files[1].parent.name}")
        if files[1].parent == good:
            _assert_same(asv.from_traces(folder, channels=CHANNELS),
                         asv.from_dataset(ds, channels=CHANNELS))
        else:
            assert (_error(asv.from_dataset, ds, channels=CHANNELS)
                    == _error(asv.from_traces, folder, channels=CHANNELS))


def test_a_bad_state_on_a_window_not_collected_is_passed_over_by_both_paths(
        tmp_path: Path) -> None:
    """The dataset's stage reads corners for every window before the default window is
    known; a score naming neither end of a window that is not collected stays unraised, as
    on the trace path, and one on the collected window raises the trace path's error."""
    folder = tmp_path / "traces"
    folder.mkdir()
    _step_run(folder / "a.zst", other_score=bytes(32))
    ds = _export(folder, tmp_path / "ds")
    data = asv.from_traces(folder, channels=CHANNELS)
    assert data.window_names == ["step"]
    _assert_same(data, asv.from_dataset(ds, channels=CHANNELS))
    message = _error(asv.from_traces, folder, channels=CHANNELS, window="other")
    assert "which is neither the entry nor the exit of that window" in message
    assert _error(asv.from_dataset, ds, channels=CHANNELS, window="other") == message
