"""``cess.from_dataset(..., executor=...)``: the per-run stage as a group-by on ``run_id``
gives ``cess.from_traces``'s arrays, labels, errors and warnings, bit for bit, locally and
on Ray Data.

The dataset is generated here: two systems on six tasks, runs that sample with and without
replacement, one whose support changes (a warning), one that crashed (dropped, a warning),
exported in small batches so a (system, task) partition holds several files. The Ray tests
reuse ``tests/estimators/test_ray_executor.py``'s cluster fixture (a head and two worker
nodes) and are ``slow``.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import cess
from tests.cli._cli import invoke
from tests.estimators.test_ray_executor import cluster  # noqa: F401 - the shared fixture

pa = pytest.importorskip("pyarrow")

IDS = ["a", "b", "c", "d"]
OUTCOMES = {"a": 0.9, "b": 0.2, "c": 0.5, "d": 0.1}
PREDICTIONS = {"a": 0.7, "b": 0.3, "c": 0.4, "d": 0.2}
ARRAYS = ("y", "p", "s", "m_chosen", "m_bar", "n_pool", "rho", "theta_star", "in_support")
LABELS = ("run_id", "path", "task", "system", "condition", "seed", "cluster", "replicate",
          "replacement")


class _Crash(Exception):
    pass


def _record(folder: Path) -> list[Path]:
    """Trace files of runs with a document stream ``doc`` and a stop stream ``stop``."""
    files = []
    for s, system in enumerate(("alpha", "beta")):
        path = folder / f"{system}.zst"
        for t in range(6):
            for seed in range(3):
                meta = {"ranking": ["bm25", "dense"][seed % 2], "cluster": t // 2,
                        "replicate": [seed, {"k": 0.5}]}
                with al.record(path, system=system, task=f"q{t}", seed=seed + 10 * s,
                               meta=meta, mode="a"):
                    probs = np.array([0.4, 0.3, 0.2, 0.1])
                    for _ in range(3):
                        i = al.select(probs, candidates=IDS, name="doc")
                        if (t + seed) % 2:  # without replacement: the opened one goes to 0
                            probs = probs.copy()
                            probs[i] = 0.0
                            probs = probs / probs.sum()
                        if not al.proceed(0.8, name="stop"):
                            break
        files.append(path)
    odd = folder / "odd.zst"
    with al.record(odd, system="alpha", task="q9", seed=1):  # its support changes
        al.select([0.5, 0.5, 0.0, 0.0], candidates=IDS, name="doc")
        al.select([0.0, 0.5, 0.5, 0.0], candidates=IDS, name="doc")
    with pytest.raises(_Crash), al.record(odd, system="beta", task="q9", seed=2, mode="a"):
        al.select([0.25] * 4, candidates=IDS, name="doc")
        raise _Crash
    files.append(odd)
    return files


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _record(tmp_path_factory.mktemp("cess-traces"))


@pytest.fixture(scope="module")
def dataset(traces: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentlog.dataset import to_parquet

    out = tmp_path_factory.mktemp("cess-dataset") / "ds"
    to_parquet(traces, out, batch_rows=60)
    return out


KW: dict[str, Any] = {"outcomes": OUTCOMES, "predictions": PREDICTIONS, "budget": 3}


def _read(call: Callable[[], cess.CessData]) -> tuple[cess.CessData, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = call()
    return data, [str(w.message) for w in caught]


def _assert_same(a: cess.CessData, b: cess.CessData) -> None:
    for name in ARRAYS:
        got, want = getattr(b, name), getattr(a, name)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), name
    for name in LABELS:
        assert getattr(b, name) == getattr(a, name), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", al.DegenerateDataWarning)  # ρ > 0: pinned above
        assert np.array_equal(a.estimate(lam=0.5).dr_raw, b.estimate(lam=0.5).dr_raw)


def test_the_local_group_by_gives_the_trace_paths_data_and_warnings(
        traces: list[Path], dataset: Path) -> None:
    a, warned_a = _read(lambda: cess.from_traces(traces, **KW))
    b, warned_b = _read(lambda: cess.from_dataset(dataset, **KW))
    _assert_same(a, b)
    assert warned_a == warned_b and len(warned_a) == 2  # the crashed run, the odd support
    assert len(a) == 2 * 6 * 3 + 1 and set(a.replacement) == {"with", "without"}
    assert (a.rho > 0).any()


@pytest.mark.parametrize("partition_by", [("system", "task"), ("system",), ()])
def test_the_local_stage_reads_a_group_of_partitions_at_a_time(
        traces: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        partition_by: tuple[str, ...]) -> None:
    """A dataset folder is read a group of whole partitions at a time (bounded memory);
    one partition a group gives the trace path's data and warnings, bit for bit."""
    from agentlog.dataset import read_table, to_parquet
    from agentlog.estimators import _executor

    out = tmp_path / "ds"
    to_parquet(traces, out, batch_rows=60, partition_by=partition_by)
    runs = read_table(out, "runs").to_pydict()
    n_parts = len(set(zip(*(runs[k] for k in partition_by), strict=True))) or 1
    assert n_parts > 1 or not partition_by
    assert len(list(_executor.partition_groups(out, 1))) == n_parts
    assert len(list(_executor.partition_groups(out, 10**9))) == 1
    a, warned_a = _read(lambda: cess.from_traces(traces, **KW))
    monkeypatch.setattr(_executor, "GROUP_RUNS", 1)
    reads: list[tuple[str, bool]] = []

    def read_table(*args: Any, **kwargs: Any) -> Any:
        reads.append((args[1], kwargs.get("filter") is not None))
        return read_table_of(*args, **kwargs)

    read_table_of = _executor.read_table
    monkeypatch.setattr(_executor, "read_table", read_table)
    b, warned_b = _read(lambda: cess.from_dataset(out, **KW))
    _assert_same(a, b)
    assert warned_a == warned_b
    # every table, the candidate pools included, read a group of partitions at a time
    pools = [filtered for table, filtered in reads if table == "pools"]
    assert len(pools) == n_parts and all(pools) == bool(partition_by)


def test_one_run_per_call_in_any_order_gives_the_same_bits(
        traces: list[Path], dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private piece: ``group_runs`` handing the stage one run at a time, last run first
    (any split into whole runs, in any order, as Ray's blocks come back), changes nothing."""
    from agentlog.estimators import _executor

    whole, warned = _read(lambda: cess.from_dataset(dataset, **KW))

    def run_by_run(data: Any, tables: Mapping[str, list[str]], fn: Callable[..., Any],
                   kwargs: Mapping[str, Any], executor: str) -> Iterator[Any]:
        parts = {name: _executor.read_columns(data, name, columns)
                 for name, columns in tables.items()}
        for run_id in reversed(parts["runs"].column("run_id").to_pylist()):
            yield fn({name: t.filter(pa.compute.equal(t.column("run_id"), run_id))
                      if "run_id" in t.column_names else t  # pools: no run_id
                      for name, t in parts.items()}, **kwargs)

    monkeypatch.setattr(_executor, "group_runs", run_by_run)
    split, warned_split = _read(lambda: cess.from_dataset(dataset, **KW))
    _assert_same(whole, split)
    assert warned_split == warned


def test_ray_outputs_that_name_a_run_twice_are_refused() -> None:
    """A private piece: a run whose rows came back from two blocks of Ray's sort would
    count twice; the driver refuses it instead of estimating."""
    from agentlog.estimators._ray_executor import _check_whole_runs

    whole = [pa.table({"run_id": ["r1", "r2"]}), pa.table({"run_id": ["r3"]})]
    _check_whole_runs(whole)
    _check_whole_runs([])
    with pytest.raises(RuntimeError, match=r"split run 'r2' between two blocks.*"
                       r"executor='local'"):
        _check_whole_runs([*whole, pa.table({"run_id": ["r2"]})])


def test_the_first_error_in_run_order_is_the_trace_paths(
        traces: list[Path], dataset: Path) -> None:
    kwargs = {**KW, "outcomes": {k: v for k, v in OUTCOMES.items() if k != "c"}}
    with pytest.raises(ValueError, match="has no outcome") as from_traces:
        cess.from_traces(traces, **kwargs)
    with pytest.raises(ValueError, match="has no outcome") as from_dataset:
        cess.from_dataset(dataset, **kwargs)
    assert str(from_dataset.value) == str(from_traces.value)
    with pytest.raises(ValueError, match="unknown stream 'nope'") as from_traces:
        cess.from_traces(traces, **{**KW, "stream": "nope"})
    with pytest.raises(ValueError, match="unknown stream 'nope'") as from_dataset:
        cess.from_dataset(dataset, **{**KW, "stream": "nope"})
    assert str(from_dataset.value) == str(from_traces.value)


def test_executor_is_named_and_ray_needs_a_folder_and_ray(
        dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"`executor` must be one of 'local', 'ray'"):
        cess.from_dataset(dataset, executor="spark", **KW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"pass the dataset folder .*found dict"):
        cess.from_dataset({"runs": pa.table({"run_id": ["r"]})}, executor="ray", **KW)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(al.MissingDependencyError, match=r"pip install 'agentlog\[ray\]'"):
        cess.from_dataset(dataset, executor="ray", **KW)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    folder = tmp_path_factory.mktemp("cess-tables")
    for name, values in (("outcomes", OUTCOMES), ("predictions", PREDICTIONS)):
        (folder / f"{name}.csv").write_text(
            "candidate_id,value\n" + "".join(f"{k},{v}\n" for k, v in values.items()))
    return ["--outcomes", folder / "outcomes.csv", "--predictions",
            folder / "predictions.csv", "--budget", "3"]


def test_the_cli_refuses_ray_without_a_dataset_or_without_ray(
        traces: list[Path], dataset: Path, tables: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    done = invoke("estimate", "cess", *traces, *tables, "--executor", "ray")
    assert done.exit_code == 2 and "pass the dataset folder" in done.stderr
    done = invoke("estimate", "cess", dataset, *tables, "--ray-address", "auto")
    assert done.exit_code == 2 and "pass --executor ray too" in done.stderr
    monkeypatch.setitem(sys.modules, "ray", None)
    done = invoke("estimate", "cess", dataset, *tables, "--executor", "ray")
    assert done.exit_code == 2 and "pip install 'agentlog[ray]'" in done.stderr
    assert "Traceback" not in done.output


@pytest.mark.slow
def test_cess_on_ray_gives_the_local_and_trace_data_bit_for_bit(
        cluster: Any, traces: list[Path], dataset: Path) -> None:  # noqa: F811
    a, warned_a = _read(lambda: cess.from_traces(traces, **KW))
    b, warned_b = _read(lambda: cess.from_dataset(dataset, executor="ray", **KW))
    _assert_same(a, b)
    assert warned_a == warned_b and len(warned_a) == 2


@pytest.mark.slow
@pytest.mark.parametrize("partition_by", [("system",), ()])
def test_ray_reads_groups_of_partitions_or_sorts_an_unpartitioned_dataset(
        cluster: Any, traces: list[Path], tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, partition_by: tuple[str, ...]) -> None:
    """A partitioned dataset goes to Ray tasks a group of whole partitions each (here one
    partition a task), a dataset without partitions through Ray Data's sort by run id:
    both give the trace path's data, bit for bit."""
    from agentlog.dataset import to_parquet
    from agentlog.estimators import _executor

    out = tmp_path / "ds"
    to_parquet(traces, out, batch_rows=60, partition_by=partition_by)
    monkeypatch.setattr(_executor, "GROUP_RUNS", 1)
    groups = []
    group_rows = _executor.partition_group_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = group_rows(*args, **kwargs)
        groups.append(len(found[0]))
        return found

    monkeypatch.setattr(_executor, "partition_group_rows", counted)
    a, warned_a = _read(lambda: cess.from_traces(traces, **KW))
    b, warned_b = _read(lambda: cess.from_dataset(out, executor="ray", **KW))
    _assert_same(a, b)
    assert warned_a == warned_b
    assert groups == ([2] if partition_by else [])  # alpha and beta, a task each


@pytest.mark.slow
def test_the_cli_with_executor_ray_prints_the_local_json(
        cluster: Any, dataset: Path, tables: list[Any]) -> None:  # noqa: F811
    local = invoke("estimate", "cess", dataset, *tables, "--json")
    remote = invoke("estimate", "cess", dataset, *tables, "--json", "--executor", "ray")
    assert local.exit_code == 0, local.output
    assert remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert (a["settings"].pop("executor"), b["settings"].pop("executor")) == ("local", "ray")
    assert a == b


@pytest.mark.parametrize("partition_by", [("system", "task"), ("system",)])
def test_partition_groups_read_every_run_once_whatever_the_group_size(
        tmp_path: Path, partition_by: tuple[str, ...]) -> None:
    """Groups of contiguous partitions, a system split between two groups included, and a
    run without a task (the Hive null partition): each filter reads whole partitions, and
    the groups together read every run exactly once."""
    from agentlog.dataset import read_table, to_parquet
    from agentlog.estimators import _executor

    path = tmp_path / "runs.zst"
    tasks = {"alpha": ["q0", "q1", "q2", None], "beta": ["q0"], "gamma": ["q1", "q3"]}
    for system, names in tasks.items():
        for task in names:
            for seed in range(2):
                with al.record(path, system=system, task=task, seed=seed, mode="a"):
                    pass
    out = tmp_path / "ds"
    to_parquet([path], out, partition_by=partition_by)
    every = sorted(read_table(out, "runs", ["run_id"]).column("run_id").to_pylist())
    assert len(every) == 14
    for size in range(1, 16):
        read = [read_table(out, "runs", ["run_id", *partition_by], filter=where)
                for where in _executor.partition_groups(out, size)]
        ids = sorted(i for table in read for i in table.column("run_id").to_pylist())
        assert ids == every, size
        for table in read:  # whole partitions: each group holds at least `size` runs...
            assert table.num_rows >= min(size, 2)
        assert all(t.num_rows >= size for t in read[:-1])  # ...but the last
