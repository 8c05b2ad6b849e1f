"""Estimators from a Parquet dataset: the runs rebuilt from its tables
(``agentlog.dataset.iter_runs``), and ``cess`` and ``asv`` giving the same arrays as from
the traces the dataset was exported from, bit for bit."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import agentlog as al  # noqa: E402
from agentlog._steering import Steer, steering  # noqa: E402
from agentlog.dataset import (  # noqa: E402
    iter_runs,
    partitioned_by,
    read_table,
    run_order,
    to_parquet,
)
from agentlog.estimators import asv, cess  # noqa: E402
from agentlog.records import Continuation, Score, Selection, WindowEnter  # noqa: E402
from agentlog.records import iter_runs as trace_runs  # noqa: E402
from tests.cli._cli import invoke  # noqa: E402
from tests.conftest import DemoRun  # noqa: E402

REBUILT = (Selection, Continuation, Score, WindowEnter)


def _kept(record: object) -> object:
    if isinstance(record, WindowEnter):
        return (record.window, record.name, record.parent, record.t_ns, record.entry_hash,
                record.after, record.thread)
    return record


@pytest.fixture(scope="module")
def demo_dataset(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every trace the demo wrote, as one dataset, in small batches (pools repeat)."""
    out = tmp_path_factory.mktemp("dataset") / "ds"
    to_parquet(demo_run.out, out, batch_rows=500)
    return out



def _distinct(table: object) -> set[tuple[object, ...]]:
    """A table's distinct rows (a pool a batch repeats counts once)."""
    return {tuple(row.values()) for row in table.to_pylist()}  # type: ignore[attr-defined]

def test_every_run_is_rebuilt_with_its_records_in_file_order(demo_run: DemoRun,
                                                            demo_dataset: Path) -> None:
    rebuilt = {(r.trace.path, r.run.run): r for r in iter_runs(demo_dataset)}
    n = 0
    for trace, run in trace_runs(demo_run.out):
        got = rebuilt.pop((trace.path, run.run))
        want = [r for r in run.records if isinstance(r, REBUILT)]
        assert got.run.records[0].run_id == run.start.run_id
        assert (got.run.end is None) == (run.end is None)
        # Window entries keep their hashes, not their states: compared by what they keep.
        assert [_kept(r) for r in got.run.records if isinstance(r, REBUILT)] == [
            _kept(r) for r in want]
        assert [(w.window, w.name, w.entry_hash, w.exit_hash, w.failed)
                for w in got.run.windows] == [(w.window, w.name, w.entry_hash, w.exit_hash,
                                               w.failed) for w in run.windows]
        for rec in want:
            if isinstance(rec, Selection):  # its pool reads back through the trace
                assert got.trace.candidates(rec) == trace.candidates(rec)
        start = got.run.start
        assert (start.system, start.task, start.seed, start.meta) == (
            run.start.system, run.start.task, run.start.seed, run.start.meta)
        n += 1
    assert n > 1000 and not rebuilt


def test_pools_hold_each_pool_the_partitions_selections_name(demo_run: DemoRun,
                                                            tmp_path: Path) -> None:
    to_parquet(demo_run.out, tmp_path / "ds")
    pools = read_table(tmp_path / "ds", "pools").to_pydict()
    held = set(zip(pools["pool"], pools["system"], pools["task"], strict=True))
    assert len(held) == len(pools["pool"])  # once per partition within an export
    want: dict[tuple[bytes, str, str | None], bytes] = {}
    for trace, run in trace_runs(demo_run.out):
        for rec in run.records:
            if isinstance(rec, Selection):
                want[(rec.pool, run.start.system, run.start.task)] = trace.blob(rec.pool)
    got = {(h, s, t): ids for h, ids, s, t in zip(
        pools["pool"], pools["ids"], pools["system"], pools["task"], strict=True)}
    assert got == want and len(want) > 10


def _top_level(demo_run: DemoRun, tmp_path: Path) -> tuple[list[Path], Path]:
    """The demo's main traces (the CESS design: one document stream, a stop stream)."""
    paths = sorted(demo_run.out.glob("*.zst"))
    to_parquet(paths, tmp_path / "ds", batch_rows=300)
    return paths, tmp_path / "ds"


def test_cess_from_a_dataset_equals_cess_from_its_traces(demo_run: DemoRun,
                                                        tmp_path: Path) -> None:
    paths, dataset = _top_level(demo_run, tmp_path)
    tables = {"outcomes": demo_run.out / "outcomes.csv",
              "predictions": demo_run.out / "predictions.csv"}
    for budget, replacement in ((5, "auto"), (2, "with")):
        a = cess.from_traces(paths, budget=budget, replacement=replacement, **tables)
        b = cess.from_dataset(dataset, budget=budget, replacement=replacement, **tables)
        for name in ("y", "p", "s", "m_chosen", "m_bar", "n_pool", "rho", "theta_star",
                     "in_support"):
            assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
        for name in ("run_id", "path", "task", "system", "condition", "seed", "cluster",
                     "replicate", "replacement"):
            assert getattr(a, name) == getattr(b, name), name
        ea, eb = a.estimate(lam=1.0), b.estimate(lam=1.0)
        assert np.array_equal(ea.dr_raw, eb.dr_raw) and len(a) == len(paths) * 1


class Pin(Steer):
    name = "pin"

    def select(self, stream: str, step: int, probs: object, ids: tuple[object, ...]) -> int:
        return 1


def test_cess_from_a_dataset_keeps_the_trace_paths_refusals(tmp_path: Path) -> None:
    """A forced choice has no propensity: refused from the dataset as from the trace."""
    path = tmp_path / "forced.zst"
    with al.record(path, system="s", task="t", seed=1), steering(Pin()):
        al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    to_parquet(path, tmp_path / "ds")
    kwargs = {"outcomes": {"a": 1.0, "b": 0.0}, "predictions": {"a": 0.5, "b": 0.5},
              "budget": 1, "stop_stream": None}
    with pytest.raises(ValueError, match="forced by steer 'pin'") as from_trace:
        cess.from_traces(path, **kwargs)
    with pytest.raises(ValueError, match="forced by steer 'pin'") as from_dataset:
        cess.from_dataset(tmp_path / "ds", **kwargs)
    assert str(from_trace.value) == str(from_dataset.value)


def test_asv_from_a_dataset_equals_asv_from_its_traces(demo_run: DemoRun,
                                                      tmp_path: Path) -> None:
    replay = demo_run.out / "replay" / "asv.zst"
    paths = [*sorted(demo_run.out.glob("*.zst")), replay]
    to_parquet(paths, tmp_path / "ds", batch_rows=400)
    a = asv.from_traces(paths, channels=("direct", "quote"))
    b = asv.from_dataset(tmp_path / "ds", channels=("direct", "quote"))
    assert a.transitions == b.transitions and len(a.transitions) > 10
    assert a.window_names == b.window_names
    assert np.array_equal(a.trajectory, b.trajectory) and np.array_equal(a.target, b.target)
    assert a.layouts == b.layouts and sorted(a.per_layout) == sorted(b.per_layout)
    for wave, corners in a.corners.items():
        assert np.array_equal(corners, b.corners[wave], equal_nan=True)
    assert np.array_equal(a.face().interaction, b.face().interaction)


def test_runs_are_put_back_in_the_order_a_folder_is_read() -> None:
    keys = [run_order("b/x.zst", 0), run_order("a-b/x.zst", 1), run_order("a/y.zst", 2),
            run_order("a/y.zst", 0)]
    # Paths sort part by part, as sorted(Path.rglob()) does: "a/..." before "a-b/...".
    assert sorted(keys) == [run_order("a/y.zst", 0), run_order("a/y.zst", 2),
                            run_order("a-b/x.zst", 1), run_order("b/x.zst", 0)]


def test_a_dataset_of_another_schema_version_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    with al.record(path, system="s", task="t", seed=1):
        al.score("f1", 0.5)
    to_parquet(path, tmp_path / "ds")
    (part,) = (tmp_path / "ds" / "runs").rglob("*.parquet")
    table = pq.read_table(part)
    meta = dict(table.schema.metadata)
    meta[b"agentlog.dataset_schema"] = b"1"
    pq.write_table(table.replace_schema_metadata(meta), part)
    for call in (lambda: read_table(tmp_path / "ds", "runs"),
                 lambda: list(iter_runs(tmp_path / "ds")),
                 lambda: to_parquet(path, tmp_path / "ds")):
        with pytest.raises(ValueError, match=r"schema version 1.*Export the traces afresh"):
            call()


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an agentlog Parquet dataset"):
        list(iter_runs(tmp_path))
    path = tmp_path / "a.zst"
    with al.record(path, system="s", task="t", seed=1):
        al.score("f1", 0.5)
    to_parquet(path, tmp_path / "ds")
    with pytest.raises(ValueError, match="`tables` must name some of"):
        list(iter_runs(tmp_path / "ds", ("llm_calls",)))
    with pytest.raises(ValueError, match=r"no runs with selections|unknown stream"):
        cess.from_dataset(tmp_path / "ds", outcomes={}, predictions={}, budget=1)
    shutil.rmtree(tmp_path / "ds" / "runs")
    with warnings.catch_warnings(), pytest.raises(ValueError, match="not an agentlog"):
        asv.from_dataset(tmp_path / "ds", channels=("a", "b"))


@pytest.mark.parametrize("layout", [("system",), ()])
def test_fewer_partitions_hold_the_same_tables_and_runs(demo_run: DemoRun, tmp_path: Path,
                                                        layout: tuple[str, ...]) -> None:
    paths, dataset = _top_level(demo_run, tmp_path)
    to_parquet(paths, tmp_path / "flat", batch_rows=300, partition_by=layout)
    assert partitioned_by(tmp_path / "flat") == layout
    parts = {p.parent.relative_to(tmp_path / "flat" / "runs")
             for p in (tmp_path / "flat" / "runs").rglob("*.parquet")}
    assert all(len(p.parts) == len(layout) for p in parts)
    for kind in ("runs", "selections", "scores", "pools"):
        a, b = read_table(dataset, kind), read_table(tmp_path / "flat", kind)
        if kind == "pools":
            assert _distinct(a) == _distinct(b)
            continue
        keys = [("run_id", "ascending")] + ([("seq", "ascending")]
                                            if "seq" in a.column_names else [])
        assert a.sort_by(keys).equals(b.sort_by(keys).select(a.column_names)), kind
    tables = {"outcomes": demo_run.out / "outcomes.csv",
              "predictions": demo_run.out / "predictions.csv", "budget": 5}
    x = cess.from_dataset(dataset, **tables)
    y = cess.from_dataset(tmp_path / "flat", **tables)
    assert np.array_equal(x.y, y.y, equal_nan=True) and x.run_id == y.run_id
    assert x.task == y.task and x.system == y.system


def test_an_export_keeps_the_datasets_partitioning(tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    with al.record(path, system="s", task="t", seed=1):
        al.score("f1", 0.5)
    to_parquet(path, tmp_path / "ds", partition_by=("system",))
    with pytest.raises(ValueError, match=r"partitioned by \['system'\].*new folder"):
        to_parquet(path, tmp_path / "ds", partition_by=("system", "task"))
    with pytest.raises(ValueError, match="`partition_by` must be one of"):
        to_parquet(path, tmp_path / "other", partition_by=("task",))
    with al.record(path, system="s", task="t2", seed=2, mode="a"):
        al.score("f1", 0.25)
    assert to_parquet(path, tmp_path / "ds").runs_added == 1  # its own layout, kept
    assert partitioned_by(tmp_path / "ds") == ("system",)
    assert sorted(read_table(tmp_path / "ds", "runs").column("task").to_pylist()) == [
        "t", "t2"]
    result = invoke("export", path, "--format", "parquet", "--out", tmp_path / "cli",
                    "--partition-by", "task")
    assert result.exit_code == 2 and "--partition-by must be" in result.stderr
    result = invoke("export", path, "--format", "parquet", "--out", tmp_path / "ds",
                    "--partition-by", "none")
    assert result.exit_code == 2 and "--partition-by" in result.stderr
    assert "Traceback" not in result.output


def _without_inputs(output: str) -> dict[str, object]:
    out = json.loads(output)
    out["settings"].pop("traces")
    return out


def test_estimate_cess_and_asv_take_a_dataset_and_print_the_same(demo_run: DemoRun,
                                                                 tmp_path: Path) -> None:
    paths, dataset = _top_level(demo_run, tmp_path)
    tables = ["--outcomes", demo_run.out / "outcomes.csv",
              "--predictions", demo_run.out / "predictions.csv", "--json"]
    a = invoke("estimate", "cess", *paths, *tables)
    b = invoke("estimate", "cess", dataset, *tables)
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    assert _without_inputs(a.output) == _without_inputs(b.output)
    replay = demo_run.out / "replay" / "asv.zst"
    to_parquet(replay, dataset)  # the channel replay's output joins its sources
    args = ["--channels", "direct,quote", "--resamples", "300", "--json"]
    a = invoke("estimate", "asv", *paths, replay, *args)
    b = invoke("estimate", "asv", dataset, *args)
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    assert _without_inputs(a.output) == _without_inputs(b.output)
    bad = invoke("estimate", "cess", dataset, *tables[:4], "--stream", "nope")
    assert bad.exit_code == 2 and "unknown stream 'nope'" in bad.stderr


def test_cess_and_asv_take_tables_selected_in_duckdb(demo_run: DemoRun,
                                                     tmp_path: Path) -> None:
    """The tables as DuckDB relations give what the folder gives; a relation filtered in
    SQL (one task) gives that task's rows of it."""
    duckdb = pytest.importorskip("duckdb")
    replay = demo_run.out / "replay" / "asv.zst"
    paths = [*sorted(demo_run.out.glob("*.zst")), replay]
    to_parquet(paths, tmp_path / "ds", batch_rows=400)
    con = duckdb.connect()
    relations = {name: con.from_arrow(read_table(tmp_path / "ds", name))
                 for name in ("runs", "windows", "selections", "continuations", "scores",
                              "pools")}
    a = asv.from_dataset(tmp_path / "ds", channels=("direct", "quote"))
    b = asv.from_dataset(relations, channels=("direct", "quote"))
    assert a.transitions == b.transitions and len(a.transitions) > 10
    assert np.array_equal(a.face().interaction, b.face().interaction)

    tables = {"outcomes": demo_run.out / "outcomes.csv",
              "predictions": demo_run.out / "predictions.csv", "budget": 5}
    (tmp_path / "top").mkdir()
    _, top = _top_level(demo_run, tmp_path / "top")  # the runs with selections
    relations = {name: con.from_arrow(read_table(top, name)) for name in relations}
    whole = cess.from_dataset(top, **tables)
    assert cess.from_dataset(relations, **tables).run_id == whole.run_id
    task = whole.task[0]
    one = cess.from_dataset({**relations, "runs": relations["runs"].filter(
        f"task = '{task}'")}, **tables)
    keep = [i for i, t in enumerate(whole.task) if t == task]
    assert one.run_id == tuple(whole.run_id[i] for i in keep)
    assert 0 < len(keep) < len(whole.task)
    assert np.array_equal(one.y, whole.y[keep], equal_nan=True)

    with pytest.raises(ValueError, match=r"lacks the table\(s\) \['pools'\]"):
        cess.from_dataset({k: v for k, v in relations.items() if k != "pools"}, **tables)
    with pytest.raises(ValueError, match=r"`dataset\['runs'\]` lacks the column\(s\) "
                                         r"\['system', 'task'\]"):
        list(iter_runs({"runs": read_table(tmp_path / "ds", "runs").drop_columns(
            ["system", "task"]), "scores": relations["scores"]}, ("scores",)))
