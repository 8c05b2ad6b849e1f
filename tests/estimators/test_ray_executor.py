"""``executor="ray"`` gives the local executor's results, bit for bit.

The Ray tests run on a cluster this module starts with ``ray.cluster_utils.Cluster``: a head
and two worker nodes of one CPU and a 100 MiB object store each, shut down after the module
(when the session's own Ray runtime is already up, ``tests/replay`` having run first, they
use it instead: one process holds one Ray runtime). The dataset is the default demo's
variants (``demo_run``) exported to Parquet. Ray is in the ``dev`` extra, so CI has it;
elsewhere those tests skip with the install command.

The tests without a cluster pin what makes both executors agree: replicate blocks that do
not depend on how they are split into tasks, and a per-run stage whose batches may split a
run and come in any order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import certify, reliability, use_ray
from tests.cli._cli import invoke
from tests.conftest import DemoRun

pa = pytest.importorskip("pyarrow")


# ---------------------------------------------------------------- without a cluster


def test_executor_names_local_or_ray(tmp_path: Path) -> None:
    plan = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.1\n')
    match = r"`executor` must be one of 'local', 'ray'; found 'spark'"
    with pytest.raises(ValueError, match=match):
        certify.from_dataset(tmp_path, plan=plan, executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        certify.certify({"a": [0.1, 0.2], "b": [0.3, 0.4]}, clusters=[0, 1], plan=plan,
                        executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        reliability.from_dataset(tmp_path, executor="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        reliability.summary([0.1, 0.2], executor="spark")  # type: ignore[call-overload]


def test_ray_reads_a_dataset_folder_not_tables_and_says_so_before_starting_ray() -> None:
    plan = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.1\n')
    tables = {"runs": pa.table({"run_id": ["r"]}), "scores": pa.table({"run_id": ["r"]})}
    with pytest.raises(ValueError, match=r"executor='ray' reads the dataset in Ray's "
                                         r"workers: pass the dataset folder"):
        certify.from_dataset(tables, plan=plan, executor="ray")
    with pytest.raises(ValueError, match=r"pass the dataset folder .*found dict"):
        reliability.from_dataset(tables, executor="ray")


def test_executor_ray_without_ray_names_the_install_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(al.MissingDependencyError, match=r"pip install 'agentlog\[ray\]'"):
        reliability.summary([0.1, 0.5, 0.2] * 10, executor="ray")
    with pytest.raises(al.MissingDependencyError, match=r"executor='ray' needs Ray"), \
            use_ray():
        pass


def test_a_bootstrap_block_does_not_depend_on_how_blocks_are_split_into_tasks() -> None:
    """A private piece: ``_size_means`` over blocks 0..n equals its blocks one by one (what
    Ray tasks over any ranges compute), for small cells and for wide ones."""
    from agentlog.estimators._cell_bootstrap import _size_means, _SizeDraws
    from agentlog.estimators._executor import rows_per_block

    rng = np.random.default_rng(3)
    for size, n_resamples in ((7, 1000), (20_000, 450)):  # 256 and 209 draws per block
        job = _SizeDraws(rng.normal(size=(3, size)), seed=11, n_resamples=n_resamples)
        blocks = -(-n_resamples // rows_per_block(size))
        whole = _size_means(job, 0, blocks)
        assert whole.shape == (3, n_resamples) and blocks > 1
        parts = np.concatenate([_size_means(job, j, j + 1) for j in range(blocks)], axis=1)
        np.testing.assert_array_equal(whole, parts)


def test_a_sign_flip_block_does_not_depend_on_how_blocks_are_split_into_tasks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A private piece: the calibration's blocks, computed as ``map_blocks`` hands them to
    Ray tasks (one range per block), give the local board's calibration bit for bit."""
    from agentlog.estimators import _calibration

    rng = np.random.default_rng(0)
    task = rng.normal(0, 0.1, 40)
    scores = {s: mu + task + rng.normal(0, 0.05, 40)
              for s, mu in {"a": 0.7, "b": 0.5, "c": 0.48}.items()}
    plan = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.05\n'
                                  '[conditions]\nshared_entry = true\n'
                                  '[calibration]\nn_resamples = 700\nseed = 4\n')
    local = certify.certify(scores, clusters=np.arange(40) // 2, plan=plan).to_dict()

    def one_task_per_block(fn: Callable[[Any, int, int], Any], work: Any,
                           executor: str) -> list[list[Any]]:
        return [[fn(shared, j, j + 1) for j in range(n)] for shared, n in work]

    monkeypatch.setattr(_calibration, "map_blocks", one_task_per_block)
    split = certify.certify(scores, clusters=np.arange(40) // 2, plan=plan).to_dict()
    assert split == local and local["calibration"]["n_resamples"] == 700


def _record_runs(folder: Path) -> list[Path]:
    """Two systems on 12 tasks, each run scoring its readout twice on the plan's channel and
    once on another (runs of several rows, so a batch boundary can split them)."""
    files = []
    for s, mu in (("a", 0.7), ("b", 0.4)):
        for t in range(12):
            path = folder / f"{s}-{t:02d}.zst"
            with al.record(path, system=s, task=f"q{t:02d}", seed=t, meta={"cluster": t // 2}):
                al.score("f1", mu + t / 100, channel="direct")
                al.score("f1", 99.0, channel="other")
                al.score("f1", mu - t / 300, channel="direct")
                al.score("done", 1.0)
            files.append(path)
    return files


def test_the_per_run_stage_gives_the_same_bits_however_the_rows_are_batched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private piece: ``scan`` handing the per-run functions one row at a time, last row
    first (as Ray blocks may split runs and come in any order) changes nothing."""
    from agentlog.dataset import to_parquet
    from agentlog.estimators import _executor, _inputs, _terminal_scores

    to_parquet(_record_runs(tmp_path), tmp_path / "ds")
    plan = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.05\n'
                                  'channel = "direct"\n')
    data = certify.from_dataset(tmp_path / "ds", plan=plan)
    runs = reliability.from_dataset(tmp_path / "ds")

    def row_by_row(dataset: Any, name: str, columns: list[str], fn: Callable[..., Any],
                   kwargs: Any, executor: str) -> Iterator[Any]:
        table = _executor.read_columns(dataset, name, columns)
        for i in reversed(range(table.num_rows)):
            yield fn(table.slice(i, 1), **kwargs)

    monkeypatch.setattr(_inputs, "scan", row_by_row)
    monkeypatch.setattr(_terminal_scores, "scan", row_by_row)
    split = certify.from_dataset(tmp_path / "ds", plan=plan)
    for s in data.systems:
        np.testing.assert_array_equal(split.scores[s], data.scores[s])
    assert (split.systems, split.tasks, split.clusters, split.input_hashes) == (
        data.systems, data.tasks, data.clusters, data.input_hashes)
    np.testing.assert_array_equal(data.scores["a"][:, 0],
                                  [np.mean([0.7 + t / 100, 0.7 - t / 300]) for t in range(12)])
    assert reliability.from_dataset(tmp_path / "ds") == runs
    assert {(r.values["f1"], r.counts["f1"]) for r in runs if r.system == "b"} == {
        (0.4 - t / 300, 3) for t in range(12)}


# ---------------------------------------------------------------- on a Ray cluster

@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head and two worker nodes, one CPU and a 100 MiB object store each."""
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:  # pragma: no cover - CI installs the dev extra, which has Ray
        if os.environ.get("CI"):
            raise
        pytest.skip("Ray is not installed: pip install -e '.[dev]' (or 'agentlog[ray]')")
    if ray.is_initialized():  # the session's runtime (tests/replay ran first): use it
        yield ray
        return
    nodes: Any = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": 100 * 1024**2, "include_dashboard": False})
    try:
        for _ in range(2):
            nodes.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
        nodes.wait_for_nodes()
        assert len(nodes.list_all_nodes()) == 3
        # As the CLI's own runtime: workers' output stays in Ray's logs, off the
        # commands' stdout that the tests parse.
        ray.init(address=nodes.address, log_to_driver=False)
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        nodes.shutdown()


@pytest.fixture(scope="module")
def demo_dataset(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentlog.dataset import to_parquet

    out = tmp_path_factory.mktemp("ray-parquet") / "variants"
    to_parquet(demo_run.out / "variants", out)
    return out


@pytest.mark.slow
def test_certify_on_ray_gives_the_local_board_bit_for_bit(
        cluster: Any, demo_run: DemoRun, demo_dataset: Path) -> None:
    plan = certify.Plan.from_toml(demo_run.out / "plan.toml")
    assert plan.window == "retrieval"  # admissibility reads the entries, from the traces
    entries = certify.EntryTable.from_traces(demo_run.out / "variants", window=plan.window,
                                             select=plan.select)
    local = certify.from_dataset(demo_dataset, plan=plan, entries=entries)
    remote = certify.from_dataset(demo_dataset, plan=plan, entries=entries, executor="ray")
    assert (remote.systems, remote.tasks, remote.clusters, remote.input_hashes,
            remote.n_runs, remote.n_failed_runs) == (
        local.systems, local.tasks, local.clusters, local.input_hashes, local.n_runs,
        local.n_failed_runs)
    for s in local.systems:
        np.testing.assert_array_equal(remote.scores[s], local.scores[s])
        np.testing.assert_array_equal(remote.failed[s], local.failed[s])
    board = certify.certify(local, plan=plan).to_dict()
    assert certify.certify(remote, plan=plan, executor="ray").to_dict() == board
    assert board["calibration"]["n_resamples"] == 2000 and board["counts"]["certified"] > 0


@pytest.mark.slow
def test_reliability_on_ray_gives_the_local_runs_and_intervals_bit_for_bit(
        cluster: Any, demo_dataset: Path) -> None:
    local = reliability.from_dataset(demo_dataset)
    assert reliability.from_dataset(demo_dataset, executor="ray") == local
    scored = [r for r in local if "abs_error" in r.values]
    values = [r.values["abs_error"] for r in scored]
    groups = [r.system for r in scored]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", al.DegenerateDataWarning)  # small groups: not tested
        a = reliability.summary(values, groups=groups, n_resamples=3000, seed=2)
        b = reliability.summary(values, groups=groups, n_resamples=3000, seed=2,
                                executor="ray")
    np.testing.assert_array_equal(a.bootstrap_distribution, b.bootstrap_distribution)
    assert a.table() == b.table() and len(a) > 1


@pytest.mark.slow
def test_the_cli_with_executor_ray_prints_the_local_json(
        cluster: Any, demo_run: DemoRun, demo_dataset: Path) -> None:
    """The same JSON but for the executor it names; Ray's own messages (its raylet prints
    "(raylet) WARNING: …" to stdout) never reach the command's stdout."""
    plan = demo_run.out / "plan.toml"
    for args, where in ((("certify", demo_dataset, "--plan", plan), "inputs"),
                        (("estimate", "reliability", demo_dataset, "--by", "system",
                          "--score", "abs_error", "--lower-is-better"), "settings")):
        local = invoke(*args, "--json")
        remote = invoke(*args, "--json", "--executor", "ray")
        assert local.exit_code == 0, local.output
        assert remote.exit_code == 0, remote.output
        assert remote.stdout.startswith("{\n"), remote.stdout[:1500]
        a, b = json.loads(local.stdout), json.loads(remote.stdout)
        assert (a[where].pop("executor"), b[where].pop("executor")) == ("local", "ray")
        assert a == b


@pytest.mark.slow
def test_use_ray_joins_ray_address_and_leaves_that_cluster_running(cluster: Any) -> None:
    """A process that names the cluster in RAY_ADDRESS joins it, and disconnects at the end
    of the block without stopping it; a runtime this process holds is left as it is."""
    address = cluster.get_runtime_context().gcs_address
    child = ("import ray\n"
             "from agentlog.estimators import reliability, use_ray\n"
             "with use_ray():\n"
             "    nodes = len([n for n in ray.nodes() if n['Alive']])\n"
             "    r = reliability.summary([0.1, 0.5, 0.2] * 10, executor='ray')\n"
             "print(nodes, ray.is_initialized(), r.n)\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "RAY_ADDRESS": address})
    assert done.returncode == 0, done.stderr
    nodes, initialized, n = done.stdout.split()
    assert (int(nodes), initialized, n) == (len([x for x in cluster.nodes() if x["Alive"]]),
                                            "False", "30")
    with use_ray():
        pass
    assert cluster.is_initialized()  # ours: not shut down by use_ray


@pytest.mark.slow
def test_without_an_address_a_local_runtime_is_started_for_the_call_and_shut_down() -> None:
    """In a fresh process (this one holds the test cluster): an estimator called with
    executor="ray" outside use_ray starts a new local runtime, never the cluster another
    process left behind, and shuts it down when it returns."""
    child = ("import ray\n"
             "from agentlog.estimators import reliability\n"
             "r = reliability.summary([0.1, 0.5, 0.2] * 10, executor='ray')\n"
             "print(r.n, ray.is_initialized())\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30", "False"]
