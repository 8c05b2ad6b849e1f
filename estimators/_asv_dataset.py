"""``asv.from_dataset``'s per-run stage: a group-by on ``run_id`` over a Parquet dataset.

Each run's ``runs``, ``windows`` and ``scores`` rows are rebuilt into its records
(``agentlog.dataset.iter_runs`` of the run's rows) and reduced as ``asv.from_traces``
reduces a run (``_asv_trace._reduce``): one row per run with the windows it adds, the
channel scores it holds, its channels, a replayed unit's source transition, the
``(channel, window, score name)`` cells of ``channel_scores``, or its error as text. The
group-by runs over Arrow tables in this process (a chunk of runs' records at a time) or on
Ray Data (``_executor.group_runs``).

A run's reduction is a function of that run alone; placing a channel replay's scores on
their source transitions joins runs (a unit's scores belong to another run's window), so it
is done on the driver: ``stage_parts`` gives the rows back as ``_RunPart``s in
``run_order``, which ``from_traces``'s collection (``_asv_trace._Collection``) adds up, and
``stage_cells`` folds their cells. Both raise a run's error where ``from_traces`` would
meet it: the first in run order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agentlog.records import RunStart

from ._asv_trace import END_BYTES, _add_cells, _Placed, _reduce, _Replayed, _run_cells, _RunPart
from ._executor import Executor, check_tables, executing, run_chunks, whole_run_stage

_KINDS = ("windows", "scores")
#: Stage rows made into Python objects at once on the driver.
_CHUNK_ROWS = 4096


def _stage_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("source", pa.string()), ("run", pa.int64()), ("run_id", pa.string()),
        ("error", pa.string()),
        # the start that labels the run's transitions (a replayed unit's: its source's)
        ("start_run", pa.int64()), ("start_run_id", pa.string()), ("system", pa.string()),
        ("seed", pa.int64()), ("task", pa.string()), ("meta", pa.string()),
        # a replayed unit's source transition (null: a recorded run)
        ("rep_window", pa.string()), ("rep_window_id", pa.int64()),
        ("rep_entry", pa.binary()), ("rep_exit", pa.binary()), ("rep_file", pa.string()),
        ("windows", pa.list_(pa.struct([
            ("window", pa.int64()), ("name", pa.string()), ("entry_hash", pa.binary()),
            ("exit_hash", pa.binary())]))),
        ("channels", pa.list_(pa.string())),
        ("scores", pa.list_(pa.struct([  # _Placed's fields: corners read, no state hash
            ("transition", pa.int64()), ("corner", pa.int8()), ("value", pa.float64()),
            ("channel", pa.string()), ("layout", pa.int64()), ("wave", pa.int64()),
            ("problem", pa.string())]))),
        ("cells", pa.list_(pa.struct([
            ("channel", pa.string()), ("window", pa.string()), ("name", pa.string())]))),
    ])


def per_run_stage(dataset: str | os.PathLike[str] | Mapping[str, Any], *,
                  channels: tuple[str, ...], wanted: Mapping[str, str] | None,
                  window: str | None, cells: bool, executor: Executor) -> Any:
    """One row per run of ``dataset`` (``_stage_schema``), in ``run_order``: the reduction
    of ``_reduce`` (none without ``channels``) and, with ``cells``, its
    ``channel_scores`` cells."""
    check_tables(dataset, ("runs", *_KINDS))
    kwargs = {"channels": tuple(channels), "wanted": None if wanted is None else dict(wanted),
              "window": window, "cells": cells}
    with executing(executor):
        return whole_run_stage(dataset, _KINDS, _asv_stage, kwargs, _stage_schema(), executor)


def _asv_stage(parts: Mapping[str, Any], *, channels: tuple[str, ...],
               wanted: Mapping[str, str] | None, window: str | None, cells: bool) -> Any:
    """The per-run stage over the rows of whole runs (``parts``: ``runs``, and ``windows``
    and ``scores`` where the dataset has them), a chunk of runs at a time."""
    import pyarrow as pa

    from agentlog.dataset import iter_runs

    kinds = tuple(k for k in _KINDS if k in parts)
    schema = _stage_schema()
    out = [schema.empty_table()]
    for chunk in run_chunks(parts, kinds):
        out.append(pa.table(_stage_rows(iter_runs(chunk, kinds), channels=channels,
                                        wanted=wanted, window=window, cells=cells),
                            schema=schema))
    return pa.concat_tables(out)


def _stage_rows(runs: Iterable[Any], *, channels: tuple[str, ...],
                wanted: Mapping[str, str] | None, window: str | None, cells: bool
                ) -> dict[str, list[Any]]:
    """``_reduce`` (and ``_run_cells``) of ``runs`` (``TraceRun``s), as the columns of
    ``_stage_schema``; a run's error goes in its row, never raised."""
    cols: dict[str, list[Any]] = {name: [] for name in _stage_schema().names}
    for trace, run in runs:
        row: dict[str, Any] = {"source": trace.path, "run": run.run,
                               "run_id": run.start.run_id}
        try:
            if cells:
                row["cells"] = [{"channel": c, "window": w, "name": n}
                                for c, w, n in sorted(_run_cells(trace.path, run))]
            if channels:
                row.update(_part_row(_reduce(trace.path, run, channels=channels,
                                             wanted=wanted, window=window), row["run_id"]))
        except ValueError as exc:  # a replayed unit's provenance: the only error of a run
            row = {**row, "error": str(exc), "cells": None}
        for name, values in cols.items():
            values.append(row.get(name))
    return cols


def _part_row(part: _RunPart, run_id: str) -> dict[str, Any]:
    """A ``_RunPart`` of run ``run_id`` (that has its start), as stage columns: only
    ``END_BYTES`` of each window's hashes, all the collection compares."""
    start, rep = part.start, part.rep
    assert start is not None  # every run of a dataset has its start
    row: dict[str, Any] = {
        "start_run": start.run, "system": start.system,
        # a replayed unit's source's id; null for the run's own (its run_id)
        "start_run_id": None if start.run_id == run_id else start.run_id,
        "seed": start.seed, "task": start.task, "meta": json.dumps(start.meta),
        "windows": [{"window": w, "name": n, "entry_hash": a[:END_BYTES],
                     "exit_hash": None if b is None else b[:END_BYTES]}
                    for w, n, a, b in part.windows],
        "channels": sorted(part.channels),
        "scores": [score._asdict() for score in part.scores]}
    if rep is not None:
        row.update(rep_window=rep.window, rep_window_id=rep.key[1], rep_entry=rep.entry_hash,
                   rep_exit=rep.exit_hash, rep_file=rep.source_file)
    return row


def _rows(stage: Any, columns: list[str]) -> Iterator[dict[str, Any]]:
    """The rows of ``stage`` (``columns`` of it) as dicts, in order, a slice at a time."""
    selected = stage.select(columns)
    for lo in range(0, selected.num_rows, _CHUNK_ROWS):
        yield from selected.slice(lo, _CHUNK_ROWS).to_pylist()


def stage_cells(stage: Any) -> dict[str, dict[str, set[str]]]:
    """``channel_scores`` of the stage's runs (``ValueError``: the first run's error in run
    order)."""
    out: dict[str, dict[str, set[str]]] = {}
    for row in _rows(stage, ["error", "cells"]):
        if row["error"] is not None:
            raise ValueError(row["error"])
        _add_cells(out, ((c["channel"], c["window"], c["name"]) for c in row["cells"]))
    return out


def replayed_keys(stage: Any) -> set[tuple[str, int]]:
    """The ``(source run id, window id)`` of every transition a replayed unit of the stage
    names: those whose ends ``_Collection`` keeps to check the unit against its source."""
    import pyarrow.compute as pc

    units = stage.filter(pc.is_valid(stage.column("rep_window_id")))
    sources = pc.coalesce(units.column("start_run_id"), units.column("run_id"))
    return set(zip(sources.to_pylist(),
                   units.column("rep_window_id").to_pylist(), strict=True))


def stage_parts(stage: Any) -> Iterator[_RunPart]:
    """The stage's rows as the ``_RunPart``s ``_reduce`` gave, in run order; a run's error
    is raised when its turn comes."""
    for row in _rows(stage, [n for n in stage.column_names if n != "cells"]):
        if row["error"] is not None:
            raise ValueError(row["error"])
        start = RunStart(
            run=row["start_run"], run_id=row["start_run_id"] or row["run_id"],
            system=row["system"],
            seed=row["seed"], task=row["task"], meta=json.loads(row["meta"]), t_ns=0,
            generator="", agentlog_version="")
        rep = None
        if row["rep_window_id"] is not None:
            rep = _Replayed((start.run_id, row["rep_window_id"]), row["rep_window"], start,
                            row["rep_entry"], row["rep_exit"], row["rep_file"])
        yield _RunPart(
            row["source"], start, rep,
            tuple((w["window"], w["name"], w["entry_hash"], w["exit_hash"])
                  for w in row["windows"]),
            frozenset(row["channels"]),
            tuple(_Placed(**score) for score in row["scores"]))
