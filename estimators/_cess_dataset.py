"""``cess.from_dataset``'s per-run stage: a group-by on ``run_id`` over a Parquet dataset.

Each run's ``runs``, ``selections`` and ``continuations`` rows are rebuilt into its records
(``agentlog.dataset.iter_runs`` of the run's rows) and go through the per-run stage of
``cess.from_traces`` (``_add_run``), which gives one row per run: its CESS arrays, labels,
stream names, and its error or reason to be dropped as text. The group-by runs over Arrow
tables in this process (a chunk of runs' records at a time) or on Ray Data
(``_executor.group_runs``). ``from_stage`` then does on the driver, in ``run_order``, what
``from_traces`` does after its loop: the stream checks, the first error, the warnings and
the arrays, so that both give the same ``CessData``, messages and warnings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import Trace
from agentlog.records import Continuation, Selection

from ._cess_design import SamplingDesign
from ._cess_tables import _Table
from ._cess_trace import CessData, _add_run, _NoSelections, _Rows, finish
from ._executor import (
    Executor,
    check_tables,
    executing,
    run_chunks,
    whole_run_stage,
)
from ._shared_noise import SharedNoise

_OK, _DROPPED, _NO_SELECTIONS, _FAILED = 0, 1, 2, 3
_POOL_COLUMNS = ["pool", "ids", "system", "task"]


def _stage_schema() -> Any:
    import pyarrow as pa

    floats = pa.list_(pa.float64())
    return pa.schema([
        ("source", pa.string()), ("run", pa.int64()), ("run_id", pa.string()),
        ("parent_run", pa.string()), ("sel_names", pa.list_(pa.string())),
        ("cont_names", pa.list_(pa.string())), ("status", pa.int8()), ("message", pa.string()),
        ("task", pa.string()), ("system", pa.string()), ("seed", pa.int64()),
        ("generator", pa.string()), ("condition", pa.string()), ("cluster", pa.string()),
        ("replicate", pa.string()), ("y", floats), ("p", floats), ("s", floats),
        ("m", floats), ("in_support", pa.list_(pa.bool_())), ("m_bar", pa.float64()),
        ("n_pool", pa.int64()), ("rho", pa.float64()), ("theta", pa.float64()),
        ("form", pa.string()), ("where", pa.string()), ("design", pa.binary())])


def per_run_stage(dataset: str | os.PathLike[str] | Mapping[str, Any], *, outcomes: _Table,
                  predictions: _Table, pool: Mapping[str, Sequence[Any]] | None,
                  stream: str, stop_stream: str | None, budget: int, replacement: str,
                  unfinished: str, executor: Executor) -> Any:
    """One row per run of ``dataset`` (``_stage_schema``), in ``run_order``."""
    check_tables(dataset, ("runs", "selections", "continuations", "pools"))
    kwargs: dict[str, Any] = {
        "outcomes": outcomes, "predictions": predictions, "pool": pool, "stream": stream,
        "stop_stream": stop_stream, "budget": budget, "replacement": replacement,
        "unfinished": unfinished}
    # A partition holds the pools of its runs: read with them, a group at a time.
    with executing(executor):
        return whole_run_stage(dataset, ("selections", "continuations"), _cess_stage,
                               kwargs, _stage_schema(), executor,
                               partitioned={"pools": _POOL_COLUMNS})


def _cess_stage(parts: Mapping[str, Any], *, outcomes: _Table,
                predictions: _Table, pool: Mapping[str, Sequence[Any]] | None, stream: str,
                stop_stream: str | None, budget: int, replacement: str,
                unfinished: str) -> Any:
    """The per-run stage over the rows of whole runs (``parts``: ``runs``, and
    ``selections`` and ``continuations`` where the dataset has them, and the ``pools`` of
    their partitions, or every pool): a chunk of runs at a time, each run's rows found by
    its position in ``runs``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from agentlog.dataset import iter_runs

    pools = parts["pools"]
    kinds = tuple(k for k in ("selections", "continuations") if k in parts)
    schema = _stage_schema()
    out = [schema.empty_table()]
    for chunk in run_chunks(parts, kinds):
        if "selections" in chunk:
            used = pc.unique(chunk["selections"].column("pool"))
            chunk["pools"] = pools.filter(pc.is_in(pools.column("pool"), value_set=used))
        rows_of = _stage_rows(iter_runs(chunk, kinds), outcomes=outcomes,
                              predictions=predictions, pool=pool, stream=stream,
                              stop_stream=stop_stream, budget=budget,
                              replacement=replacement, unfinished=unfinished)
        out.append(pa.table(rows_of, schema=schema))
    return pa.concat_tables(out)


def _stage_rows(runs: Iterable[Any], *, outcomes: _Table, predictions: _Table,
                pool: Mapping[str, Sequence[Any]] | None, stream: str,
                stop_stream: str | None, budget: int, replacement: str,
                unfinished: str) -> dict[str, list[Any]]:
    """``_add_run`` over ``runs`` (``TraceRun``s), as the columns of ``_stage_schema``."""
    cols: dict[str, list[Any]] = {name: [] for name in _stage_schema().names}
    rows = _Rows()
    summary_cache: dict[Any, tuple[float, float]] = {}
    ids_cache: dict[bytes, tuple[Any, ...]] = {}
    current: Trace | None = None
    for trace, run in runs:
        if trace is not current:
            current, ids_cache = trace, {}
        start = run.start
        status, message = _OK, None
        flagged = len(rows.troubled)
        if unfinished == "drop" and (not run.complete or run.failed):
            status = _DROPPED
        else:
            try:
                _add_run(rows, trace, run, ids_cache, outcomes, predictions, pool, stream,
                         stop_stream, budget, summary_cache, replacement)
            except _NoSelections as exc:
                status, message = _NO_SELECTIONS, str(exc)
            except ValueError as exc:
                status, message = _FAILED, str(exc)
        cols["source"].append(trace.path)
        cols["run"].append(run.run)
        cols["run_id"].append(start.run_id)
        cols["parent_run"].append(start.parent_run)
        cols["sel_names"].append(sorted({r.name for r in run.records
                                         if type(r) is Selection}))
        cols["cont_names"].append(sorted({r.name for r in run.records
                                          if type(r) is Continuation}))
        cols["status"].append(status)
        cols["message"].append(message)
        cols["generator"].append(start.generator)
        ok = status == _OK
        if ok:
            _, _, task, system, condition, seed, cluster, replicate = rows.labels[-1]
            where, design = (rows.troubled.pop() if len(rows.troubled) > flagged
                             else (None, None))
            values = {
                "task": task, "system": system, "seed": seed, "condition": condition,
                "cluster": cluster, "replicate": json.dumps(replicate),
                "y": rows.y.pop(), "p": rows.p.pop(), "s": rows.s.pop(), "m": rows.m.pop(),
                "in_support": list(rows.in_support.pop()), "m_bar": rows.m_bar.pop(),
                "n_pool": rows.n_pool.pop(), "rho": rows.rho.pop(),
                "theta": rows.theta.pop(), "form": rows.forms.pop(), "where": where,
                "design": None if design is None else msgspec.msgpack.encode(
                    [design.replacement, design.rho, design.renormalised,
                     design.dropped, design.conflicts])}
            rows.labels.pop()
        for name in ("task", "system", "seed", "condition", "cluster", "replicate", "y",
                     "p", "s", "m", "in_support", "m_bar", "n_pool", "rho", "theta", "form",
                     "where", "design"):
            cols[name].append(values[name] if ok else None)
    return cols


class _Start(NamedTuple):
    """A stage row's ``RunStart`` fields that ``SharedNoise`` reads."""

    seed: int
    task: str | None
    generator: str


def from_stage(stage: Any, *, budget: int, stream: str, stop_stream: str | None,
               replacement: str) -> CessData:
    """``CessData`` of the per-run rows of ``per_run_stage``, as ``from_traces`` finishes:
    the stream checks, the first error in run order, the warnings, the arrays."""
    import pyarrow as pa
    import pyarrow.compute as pc

    status = stage.column("status").to_numpy(zero_copy_only=False)
    parents = pc.drop_null(pc.unique(stage.column("parent_run")))
    child = pc.is_in(stage.column("run_id"), value_set=parents).to_numpy(
        zero_copy_only=False)
    names = [set(pc.unique(pc.list_flatten(stage.column(c))).to_pylist())
             for c in ("sel_names", "cont_names")]
    paths = pc.unique(stage.column("source")).to_pylist()  # in run order
    bad = np.flatnonzero((status == _FAILED) | ((status == _NO_SELECTIONS) & ~child))
    dropped = np.flatnonzero((status == _DROPPED) & ~child)
    rows = stage.filter(pa.array(status == _OK))
    n = rows.num_rows
    shared = SharedNoise()
    keys = rows.select(["seed", "generator", "task"])
    for seed, generator, task in dict.fromkeys(zip(
            *(keys.column(c).to_pylist() for c in keys.column_names), strict=True)):
        shared.add(_Start(seed, task, generator))  # type: ignore[arg-type]
    troubled = rows.filter(pc.is_valid(rows.column("design")))
    designs = []
    for where, blob in zip(troubled.column("where").to_pylist(),
                           troubled.column("design").to_pylist(), strict=True):
        form, rho, renormalised, dropped_, conflicts = msgspec.msgpack.decode(blob)
        designs.append((where, SamplingDesign(
            replacement=form, evidence=form, reachable=frozenset(), n_pool=0, rho=rho, p=(),
            in_support=(), dropped=tuple(map(tuple, dropped_)),
            conflicts=tuple(map(tuple, conflicts)), renormalised=renormalised)))
    finish(sel_names=names[0], cont_names=names[1], paths=paths, stream=stream,
           stop_stream=stop_stream,
           error=ValueError(stage.column("message")[int(bad[0])].as_py()) if bad.size else None,
           dropped=stage.column("run_id").take(pa.array(dropped)).to_pylist(), n=n,
           shared=shared, designs=designs, replacement=replacement)

    def labels(name: str) -> tuple[Any, ...]:
        return tuple(rows.column(name).to_pylist())

    return CessData(
        y=_grid(rows.column("y"), n, budget, np.nan),
        p=_grid(rows.column("p"), n, budget, np.nan),
        s=_grid(rows.column("s"), n, budget, np.nan),
        m_chosen=_grid(rows.column("m"), n, budget, np.nan),
        m_bar=rows.column("m_bar").to_numpy().astype(np.float64),
        n_pool=rows.column("n_pool").to_numpy().astype(np.int64),
        rho=rows.column("rho").to_numpy().astype(np.float64),
        theta_star=rows.column("theta").to_numpy().astype(np.float64),
        run_id=labels("run_id"), path=labels("source"), task=labels("task"),
        system=labels("system"), condition=labels("condition"), seed=labels("seed"),
        cluster=labels("cluster"),
        replicate=tuple(json.loads(r) for r in rows.column("replicate").to_pylist()),
        replacement=labels("form"),
        in_support=_grid(rows.column("in_support"), n, budget, True).astype(bool),
        budget=budget, stream=stream, stop_stream=stop_stream,
    )


def _grid(column: Any, n: int, budget: int, fill: float | bool) -> NDArray[Any]:
    """A list column as an ``(n, budget)`` array, ``fill`` after each row's values."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.intp)
    flat = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    out = np.full((n, budget), fill, dtype=np.float64 if isinstance(fill, float) else bool)
    starts = np.cumsum(lengths) - lengths
    row = np.repeat(np.arange(n), lengths)
    out[row, np.arange(flat.shape[0]) - starts[row]] = flat
    return out
