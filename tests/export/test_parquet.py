"""Traces as a Parquet dataset: the same rows as ``Trace.to_arrow``, partitioned, streamed,
incremental, with its provenance in each file."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import agentlog as al  # noqa: E402
from agentlog.dataset import SCHEMA_VERSION, TABLES, read_table, to_parquet  # noqa: E402
from tests.cli._cli import invoke  # noqa: E402
from tests.conftest import DemoRun  # noqa: E402


def _expected(paths: list[Path], kind: str) -> dict[str, list[object]]:
    """What the dataset must hold: each file's ``to_arrow`` rows, with run ids."""
    rows: dict[str, list[object]] = {}
    for path in paths:
        trace = al.read(path)
        table = trace.to_arrow(kind)  # type: ignore[arg-type]
        ids = {r.run: r.run_id for r in trace.runs}
        who = {r.run: r.start for r in trace.runs}
        data = table.to_pydict()
        data["run_id"] = [ids[r] for r in data["run"]]
        data["system"] = [who[r].system for r in data["run"]]
        data["task"] = [who[r].task for r in data["run"]]
        for name, values in data.items():
            rows.setdefault(name, []).extend(values)
    return rows


def _sorted_rows(data: dict[str, list[object]], keys: tuple[str, ...]) -> list[tuple[object, ...]]:
    names = sorted(data)
    width = len(next(iter(data.values()))) if data else 0
    rows = [tuple(data[n][i] for n in names) for i in range(width)]
    at = [names.index(k) for k in keys]
    return sorted(rows, key=lambda r: tuple(repr(r[i]) for i in at))


def _record(path: Path, *, system: str, task: str | None, seed: int, n: int = 3) -> None:
    @al.window("step")
    def step(i: int) -> int:
        al.select([0.2, 0.3, 0.5], ["a", "b", "c"], name="tool")
        al.score("quality", i / 10)
        return i

    with al.record(path, system=system, task=task, seed=seed, mode="a"):
        for i in range(n):
            step(i)



def _distinct(table: object) -> set[tuple[object, ...]]:
    """A table's distinct rows (a pool a batch repeats counts once)."""
    return {tuple(row.values()) for row in table.to_pylist()}  # type: ignore[attr-defined]

def test_every_table_holds_the_rows_to_arrow_gives_bit_for_bit(demo_run: DemoRun,
                                                                tmp_path: Path) -> None:
    paths = sorted(demo_run.out.rglob("*.zst"))
    result = to_parquet(demo_run.out, tmp_path / "ds")
    assert result.files == len(paths) and result.runs_present == 0
    assert result.runs_added == sum(len(al.read(p).runs) for p in paths)
    for kind in TABLES:
        if kind == "pools":  # not a to_arrow table: test_pools_hold_...
            continue
        got = read_table(tmp_path / "ds", kind).to_pydict()
        want = _expected(paths, kind)
        if kind == "runs":
            assert set(got.pop("source")) <= {os.fspath(p) for p in paths}
            got.pop("source_sha256")
        assert set(got) == set(want), kind
        keys = ("run_id", "window") if "window" in want else ("run_id",)
        # Floats compared as Python floats: equal means the same bits (NaN aside, none here).
        assert _sorted_rows(got, keys) == _sorted_rows(want, keys), kind
        assert result.rows[kind] == len(next(iter(want.values()), [])), kind


def test_small_batches_give_the_same_dataset_in_more_files(demo_run: DemoRun,
                                                           tmp_path: Path) -> None:
    folder = sorted(p for p in demo_run.out.iterdir() if p.is_dir())[0]
    whole = to_parquet(folder, tmp_path / "whole")
    small = to_parquet(folder, tmp_path / "small", batch_rows=50)
    # Each batch writes the pools its runs name: a pool shared by batches repeats.
    assert {k: v for k, v in small.rows.items() if k != "pools"} == {
        k: v for k, v in whole.rows.items() if k != "pools"}
    batches = {p.name.split("-")[1] for p in (tmp_path / "small" / "runs").rglob("*.parquet")}
    assert len(batches) > 1  # memory held one batch at a time
    for kind in TABLES:
        a = read_table(tmp_path / "whole", kind).drop_columns(
            ["source"] if kind == "runs" else [])
        b = read_table(tmp_path / "small", kind).drop_columns(
            ["source"] if kind == "runs" else [])
        if kind == "pools":  # each batch writes the pools its runs name
            assert b.num_rows >= a.num_rows
            assert _distinct(b) == _distinct(a)
            continue
        keys = [("run_id", "ascending")] + ([("window", "ascending")]
                                            if "window" in a.column_names else [])
        assert a.sort_by(keys).equals(b.sort_by(keys)), kind


def test_exporting_again_adds_only_new_runs(tmp_path: Path) -> None:
    first = tmp_path / "a.zst"
    _record(first, system="s1", task="t1", seed=1)
    assert to_parquet(first, tmp_path / "ds").runs_added == 1
    _record(first, system="s1", task="t2", seed=2)  # appended to the same file
    second = tmp_path / "b.zst"
    _record(second, system="s2", task="t1", seed=3)
    again = to_parquet([first, second], tmp_path / "ds")
    assert (again.runs_added, again.runs_present) == (2, 1)
    runs = read_table(tmp_path / "ds", "runs")
    assert runs.num_rows == 3 and len(set(runs.column("run_id").to_pylist())) == 3
    assert read_table(tmp_path / "ds", "selections").num_rows == 9
    # A copy of a file holds the same runs: nothing is added twice.
    shutil.copy(second, tmp_path / "copy.zst")
    assert to_parquet(tmp_path / "copy.zst", tmp_path / "ds").runs_added == 0


def test_a_re_recorded_file_is_named_with_its_stale_runs(tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    _record(path, system="s", task="t", seed=1)
    _record(path, system="s", task="t", seed=2)
    to_parquet(path, tmp_path / "ds")
    path.unlink()
    _record(path, system="s", task="t", seed=1)  # a notebook cell run again
    with pytest.warns(al.InstrumentationWarning, match="2 run.* no longer in it"):
        result = to_parquet(path, tmp_path / "ds")
    assert result.stale == {os.fspath(path): 2} and result.runs_added == 1


def test_the_parts_of_a_killed_export_are_removed_before_the_next_writes(
        tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    _record(path, system="s", task="t", seed=1)
    to_parquet(path, tmp_path / "ds")
    part = next((tmp_path / "ds" / "windows").rglob("*.parquet"))
    orphan = part.with_name("part-deadbeef-0.parquet")  # a batch whose runs never landed
    shutil.copy(part, orphan)
    to_parquet(path, tmp_path / "ds")
    assert not orphan.exists()
    assert read_table(tmp_path / "ds", "windows").num_rows == 3


def test_partitions_keep_any_system_and_task_and_files_name_their_sources(
        tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    _record(path, system="team/agent v2", task=None, seed=1)
    _record(path, system="team/agent v2", task="q%1/x", seed=2)
    to_parquet(path, tmp_path / "ds")
    runs = read_table(tmp_path / "ds", "runs").sort_by("seed").to_pydict()
    assert runs["system"] == ["team/agent v2"] * 2 and runs["task"] == [None, "q%1/x"]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert runs["source_sha256"] == [digest, digest]
    for part in (tmp_path / "ds" / "selections").rglob("*.parquet"):
        meta = pq.read_metadata(part).metadata
        assert meta[b"agentlog.dataset_schema"] == str(SCHEMA_VERSION).encode()
        assert meta[b"agentlog.version"] == al.__version__.encode()
        assert json.loads(meta[b"agentlog.sources"]) == [
            {"path": os.fspath(path), "sha256": digest, "format_version": 2}]
        columns = pq.ParquetFile(part).metadata.row_group(0)
        encodings = {columns.column(i).path_in_schema: columns.column(i).encodings
                     for i in range(columns.num_columns)}
        assert "BYTE_STREAM_SPLIT" in encodings["probs.list.element"]
        assert columns.column(0).compression == "ZSTD"


def test_duckdb_reads_the_dataset_as_pyarrow_does(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    for seed in range(4):
        _record(tmp_path / "t.zst", system=f"s{seed % 2}", task=f"t{seed}", seed=seed)
    to_parquet(tmp_path / "t.zst", tmp_path / "ds")
    got = duckdb.sql(
        f"select system, count(*), sum(value) from read_parquet('{tmp_path}/ds/scores/**/"
        "*.parquet', hive_partitioning = true) group by system order by system").fetchall()
    scores = read_table(tmp_path / "ds", "scores").to_pydict()
    for system, n, total in got:
        values = [v for s, v in zip(scores["system"], scores["value"], strict=True)
                  if s == system]
        assert n == len(values) == 6 and total == pytest.approx(sum(values), rel=1e-15)


def test_one_export_at_a_time_writes_a_dataset(tmp_path: Path) -> None:
    _record(tmp_path / "a.zst", system="s", task="t", seed=1)
    (tmp_path / "ds").mkdir()
    fd = os.open(tmp_path / "ds" / ".agentlog-export.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(al.TracePathError, match="another export is writing"):
            to_parquet(tmp_path / "a.zst", tmp_path / "ds")
    finally:
        os.close(fd)
    assert to_parquet(tmp_path / "a.zst", tmp_path / "ds").runs_added == 1


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    _record(tmp_path / "a.zst", system="s", task="t", seed=1)
    with pytest.raises(ValueError, match="`batch_rows` must be a positive int"):
        to_parquet(tmp_path / "a.zst", tmp_path / "ds", batch_rows=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(al.TracePathError, match="must be a folder"):
        to_parquet(tmp_path / "a.zst", tmp_path / "file")
    with pytest.raises(ValueError, match="not an agentlog Parquet dataset"):
        read_table(tmp_path, "runs")
    with pytest.raises(ValueError, match="`table` must be one of"):
        read_table(tmp_path / "ds", "spans")


def test_the_cli_exports_and_reports_what_it_added(tmp_path: Path) -> None:
    _record(tmp_path / "a.zst", system="s", task="t", seed=1)
    result = invoke("export", tmp_path / "a.zst", "--format", "parquet", "--out",
                    tmp_path / "ds")
    assert result.exit_code == 0, result.output
    assert "1 runs added" in result.output and "3 selections" in result.output
    again = invoke("export", tmp_path / "a.zst", "--format", "parquet", "--out",
                   tmp_path / "ds")
    assert again.exit_code == 0 and "0 runs added" in again.output
    assert "1 already there" in again.output
    missing = invoke("export", tmp_path / "a.zst", "--format", "parquet")
    assert missing.exit_code == 2 and "--out DIR" in missing.output
    (tmp_path / "f").write_text("x")
    a_file = invoke("export", tmp_path / "a.zst", "--format", "parquet", "--out",
                    tmp_path / "f")
    assert a_file.exit_code == 2 and "is a file" in a_file.output
    assert "Traceback" not in a_file.output


def test_estimate_reliability_gives_the_same_numbers_from_the_dataset(
        demo_run: DemoRun, tmp_path: Path) -> None:
    to_parquet(demo_run.out, tmp_path / "ds")
    scores = read_table(tmp_path / "ds", "scores")
    score = sorted(set(scores.column("name").to_pylist()))[0]
    args = ["--score", score, "--by", "system,task", "--resamples", "300", "--json"]
    from_traces = invoke("estimate", "reliability", demo_run.out, *args)
    from_dataset = invoke("estimate", "reliability", tmp_path / "ds", *args)
    assert from_traces.exit_code == 0, from_traces.output
    assert from_dataset.exit_code == 0, from_dataset.output
    a, b = json.loads(from_traces.output), json.loads(from_dataset.output)
    a.pop("settings"), b.pop("settings")
    assert a == b and len(a["groups"]) > 1


def test_terminal_table_holds_each_runs_last_score_in_trace_order(tmp_path: Path) -> None:
    """Columns, not a Python object per run: per run (in path order, then run order) the
    last terminal Score of each name and how many it records; a run without one has NaN
    and 0; the tables given as a mapping (here DuckDB relations) give the same."""
    import numpy as np

    from agentlog.estimators import reliability

    with al.record(tmp_path / "b.zst", system="s", task="t", seed=0):
        al.score("f1", 0.2)
        al.score("g", 3.0)
        al.score("f1", 0.7)
    with al.record(tmp_path / "b.zst", system="s", task="u", seed=1, mode="a"):
        pass
    with al.record(tmp_path / "a.zst", system="r", task="t", seed=2):
        al.score("f1", 1.0)
    to_parquet([tmp_path / "b.zst", tmp_path / "a.zst"], tmp_path / "ds")
    table = reliability.terminal_table(tmp_path / "ds")
    assert [(Path(s).name, r) for s, r in zip(table.runs.column("source").to_pylist(),
                                              table.runs.column("run").to_pylist(),
                                              strict=True)] == [("a.zst", 0), ("b.zst", 0),
                                                                ("b.zst", 1)]
    assert table.names() == {"f1": 2, "g": 1}
    value, count = table.values("f1")
    np.testing.assert_array_equal(value, [1.0, 0.7, np.nan])
    np.testing.assert_array_equal(count, [1, 2, 0])
    np.testing.assert_array_equal(table.values("g")[0], [np.nan, 3.0, np.nan])
    np.testing.assert_array_equal(table.values("absent")[1], [0, 0, 0])
    runs = reliability.from_dataset(tmp_path / "ds")
    assert [r.values for r in runs] == [{"f1": 1.0}, {"f1": 0.7, "g": 3.0}, {}]
    assert [r.counts for r in runs] == [{"f1": 1}, {"f1": 2, "g": 1}, {}]

    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    relations = {name: con.from_arrow(read_table(tmp_path / "ds", name))
                 for name in ("runs", "scores")}
    again = reliability.terminal_table(relations)
    assert again.runs.equals(table.runs) and again.scores.equals(table.scores)
