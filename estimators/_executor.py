"""Where an estimator's parallel work runs: ``executor="local"`` (this process) or ``"ray"``.

Two kinds of work can leave the process, and each runs the same function either way:

* **the per-run stage of a Parquet dataset** (``scan``): a function of one batch of a table's
  rows (``certify.from_dataset``'s reduction of each run's scores to its readouts, say). The
  local executor applies it to the whole table at once; Ray applies it to each block of
  ``ray.data.read_parquet(DIR/<table>)`` (``map_batches``). The caller merges the outputs by
  run, putting a run's rows back in file order by ``seq`` (a block boundary may split a
  run, and blocks come back in any order) and the runs in ``agentlog.dataset.run_order``;
* **the per-run stage over whole runs** (``group_runs``): a function of the rows of
  several tables that belong to whole runs (``cess.from_dataset``'s rebuilding of each
  run's selections and continuations, or ``asv.from_dataset``'s of its windows and scores,
  say), for per-run work that a block of one table cannot do. The local executor applies
  it to the tables of a group of whole Hive partitions at a time (``partition_groups``;
  ``run_chunks`` splits them into chunks of runs); Ray gives each task a smaller group
  of whole partitions that its worker reads, or, for a dataset without partitions, whole
  runs a block at a time (``read_parquet`` of each table, their union sorted by
  ``run_id``, a map over its blocks). Its outputs are one row per run (with its
  ``run_id``): the caller puts them in ``agentlog.dataset.run_order``;
* **replicates** (``map_blocks``): bootstrap or calibration draws in blocks of at most
  ``BLOCK_DRAWS``, block ``j`` drawn from its own generator, the ``j``-th child of the
  seed's ``numpy.random.SeedSequence`` (``block_rng``). The local executor computes every
  block in a loop; Ray computes ranges of blocks as tasks. A block's draws depend on the
  seed and ``j`` only, so both give the same bits.

Everything else (merging the runs, the per-cluster algebra, intervals) stays on the driver.
The Ray side lives in ``_ray_executor`` and loads only when ``executor="ray"``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import operator
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from agentlog.dataset import arrow_table, partitioned_by, read_table, run_order

Executor = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")
#: Draws per seeded block of replicates: the unit a Ray task computes, and of the memory a
#: block holds (a block of a bootstrap of large groups is shorter, by ``rows_per_block``).
BLOCK_DRAWS = 256
#: Runs whose records are Python objects at once in a local per-run stage (``run_chunks``).
CHUNK_RUNS = 4096
#: Runs (whole Hive partitions) whose tables a local per-run stage reads at once.
GROUP_RUNS = 1 << 17

S = TypeVar("S")
R = TypeVar("R")
DatasetInput = str | os.PathLike[str] | Mapping[str, Any]


def check_executor(executor: Any) -> Executor:
    """``executor`` if it names one, else ``ValueError`` naming the choices."""
    if executor not in EXECUTORS:
        raise ValueError(f"`executor` must be one of {', '.join(map(repr, EXECUTORS))}; found "
                         f"{executor!r}")
    out: Executor = executor
    return out


def check_dataset(dataset: Any, executor: Executor) -> None:
    """Under Ray, ``dataset`` must be a path the workers can read (before a runtime starts)."""
    if executor == "ray" and not isinstance(dataset, str | os.PathLike):
        raise ValueError(
            "executor='ray' reads the dataset in Ray's workers: pass the dataset folder (on "
            "storage every node reads, or an s3:// URI), not tables; found "
            f"{type(dataset).__name__}")


def executing(executor: Executor) -> contextlib.AbstractContextManager[None]:
    """The Ray runtime for the work of one call (``use_ray``), or nothing for ``"local"``."""
    if executor == "ray":
        from ._ray_executor import use_ray

        return use_ray()
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- tables


def as_is(batch: Any) -> Any:
    """The table as read: the ``fn`` of a ``scan`` that only reads (a module-level function,
    as Ray's workers need)."""
    return batch


def plain(table: Any) -> Any:
    """``table`` with dictionary-encoded columns (Hive partition keys) decoded, so batches
    of one table concatenate whatever their encoding."""
    import pyarrow as pa

    return pa.table({name: (col.cast(col.type.value_type)
                            if pa.types.is_dictionary(col.type) else col)
                     for name, col in zip(table.column_names, table.columns, strict=True)})


def in_run_order(runs: Any) -> Any:
    """The permutation that puts the rows of ``runs`` (``source``, ``run`` columns) in
    ``agentlog.dataset.run_order``: source files sorted as paths are (each distinct file
    ranked once), then each file's runs by index. No Python object per run."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sources = pc.unique(runs.column("source")).to_pylist()
    ranked = sorted(sources, key=lambda s: run_order(s, 0))
    rank = pc.index_in(runs.column("source"), value_set=pa.array(ranked, pa.string()))
    keyed = pa.table({"rank": rank, "run": runs.column("run")})
    return pc.sort_indices(keyed, [("rank", "ascending"), ("run", "ascending")])


def coded(column: Any) -> tuple[list[Any], NDArray[np.intp]]:
    """A column as its distinct values (one Python object each, None for a null) and each
    row's code into them: labels without a Python object per row."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column, null_encoding="encode").combine_chunks()
    codes: NDArray[np.intp] = encoded.indices.to_numpy(zero_copy_only=False).astype(np.intp)
    return encoded.dictionary.to_pylist(), codes


def record_columns(kind: str) -> list[str]:
    """The columns of a dataset table that ``agentlog.dataset.iter_runs`` rebuilds its
    records from (``runs`` with its ``source``), for ``group_runs``'s ``tables``."""
    from agentlog import Trace

    names = Trace(path="", records=[]).to_arrow(kind).column_names  # type: ignore[arg-type]
    extra = ("run_id", "system", "task", *(("source", "source_sha256") if kind == "runs"
                                           else ()))
    return list(dict.fromkeys([*names, *extra]))


def check_tables(dataset: DatasetInput, needed: Sequence[str]) -> None:
    """A mapping of tables that lacks one of ``needed`` is refused as
    ``agentlog.dataset.iter_runs`` refuses it (a folder is checked when it is read)."""
    if isinstance(dataset, Mapping):
        missing = [t for t in needed if t not in dataset]
        if missing:
            raise ValueError(f"`dataset` lacks the table(s) {missing}; give "
                             f"{', '.join(needed)} (read_table(DIR, name), or a DuckDB "
                             "relation of the table)")


def run_chunks(parts: Mapping[str, Any], kinds: Sequence[str],
               chunk_runs: int = CHUNK_RUNS) -> Iterator[dict[str, Any]]:
    """The rows of whole runs of ``group_runs``'s ``parts`` a chunk of at most
    ``chunk_runs`` runs at a time: ``{"runs": ..., kind: ...}`` for each of ``kinds``
    (tables ``parts`` has), a table's rows of the chunk's runs, found by their run's
    position in ``runs`` (rows of runs that ``runs`` lacks are left out). What
    ``agentlog.dataset.iter_runs`` of a chunk holds as records is one chunk's."""
    import pyarrow.compute as pc

    runs = parts["runs"]
    placed = {}
    for kind in kinds:
        table = parts[kind]
        row = pc.index_in(table.column("run_id"), value_set=runs.column("run_id"))
        table = table.filter(pc.is_valid(row))
        row = pc.drop_null(row)
        order = pc.sort_indices(row)
        placed[kind] = (table.take(order), row.take(order).to_numpy())
    for lo in range(0, runs.num_rows, chunk_runs):
        hi = min(lo + chunk_runs, runs.num_rows)
        chunk = {"runs": runs.slice(lo, hi - lo)}
        for kind, (table, rows) in placed.items():
            a, b = np.searchsorted(rows, [lo, hi])
            chunk[kind] = table.slice(int(a), int(b - a))
        yield chunk


def with_rows(table: Any, runs: Any) -> Any:
    """``table`` with a ``row`` column: the position of each row's run (``run_id``) in
    ``runs``; rows of runs that ``runs`` lacks are dropped."""
    import pyarrow as pa

    rows = pa.table({"run_id": runs.column("run_id"),
                     "row": pa.array(np.arange(runs.num_rows, dtype=np.int64))})
    return table.join(rows, "run_id", join_type="inner")


def read_columns(dataset: DatasetInput, name: str, columns: list[str]) -> Any:
    """Table ``name`` of a dataset folder, or of a mapping of tables or DuckDB relations."""
    if isinstance(dataset, str | os.PathLike):
        return read_table(dataset, name, columns)
    if not isinstance(dataset, Mapping) or name not in dataset:
        raise ValueError(f"`dataset` must be a dataset folder or a mapping with a {name!r} "
                         f"table; found {type(dataset).__name__}")
    table = arrow_table(dataset[name], name=f"dataset[{name!r}]")
    missing = [c for c in columns if c not in getattr(table, "column_names", ())]
    if missing:
        raise ValueError(f"`dataset[{name!r}]` lacks the column(s) {missing}; select them "
                         f"from the dataset's {name} table")
    return table.select(columns)


def scan(dataset: DatasetInput, name: str, columns: list[str], fn: Callable[..., Any],
         kwargs: Mapping[str, Any], executor: Executor) -> Iterator[Any]:
    """``fn(batch, **kwargs)`` over the rows of table ``name`` (``columns`` of it): one batch
    (the whole table) locally, one per Ray Data block under Ray, in any order.

    ``fn`` takes and returns pyarrow tables; it must be a module-level function (Ray's
    workers import it by name) and must not raise on bad data (return the message in a
    column, and let the caller raise it in run order, the same under both executors).
    """
    if executor == "ray":
        check_dataset(dataset, executor)
        from ._ray_executor import map_table

        assert isinstance(dataset, str | os.PathLike)  # check_dataset's promise, for mypy
        yield from map_table(os.fspath(dataset), name, columns, fn, kwargs)
        return
    yield fn(read_columns(dataset, name, columns), **kwargs)


def group_runs(dataset: DatasetInput, tables: Mapping[str, list[str]],
               fn: Callable[..., Any], kwargs: Mapping[str, Any], executor: Executor
               ) -> Iterator[Any]:
    """``fn(parts, **kwargs)`` over the rows of whole runs: ``parts`` maps each name of
    ``tables`` (the first is ``runs``) to its rows (``columns`` of it), those of the same
    runs. Locally one call holds the runs of a group of whole partitions of a dataset folder
    (``partition_groups``), or every run of tables in memory. Under Ray one task holds a
    smaller group of whole partitions, read by the worker itself; a dataset without
    partitions is read with Ray Data instead, one call per block of the tables' union
    sorted by ``run_id``. Outputs come in any order (a run named by two is refused). A
    table the dataset lacks is absent from ``parts`` under Ray Data and empty otherwise.

    ``fn`` takes pyarrow tables and returns one; it must be a module-level function and
    must not raise on bad data (as ``scan``'s).
    """
    if executor == "ray":
        check_dataset(dataset, executor)
        from ._ray_executor import map_run_groups

        assert isinstance(dataset, str | os.PathLike)  # check_dataset's promise, for mypy
        yield from map_run_groups(os.fspath(dataset), tables, fn, kwargs)
        return
    if not isinstance(dataset, str | os.PathLike):  # tables in memory: one call
        yield fn({name: plain(read_columns(dataset, name, columns))
                  for name, columns in tables.items()}, **kwargs)
        return
    for where in partition_groups(dataset, GROUP_RUNS):
        yield read_group(dataset, tables, fn, kwargs, where)


def read_group(dataset: str | os.PathLike[str], tables: Mapping[str, list[str]],
               fn: Callable[..., Any], kwargs: Mapping[str, Any], where: Any) -> Any:
    """``fn`` of the rows ``where`` keeps (a group of partitions) of each of ``tables``:
    one call of ``group_runs``, locally or in a Ray task."""
    return fn({name: plain(read_table(dataset, name, columns, filter=where))
               for name, columns in tables.items()}, **kwargs)


def partition_groups(dataset: str | os.PathLike[str], runs_per_group: int
                     ) -> Iterator[Any]:
    """Filters that split a dataset folder into groups of whole Hive partitions of about
    ``runs_per_group`` runs each (a run's rows all lie in its ``(system, task)``
    partition), so a local per-run stage holds one group's tables at a time, not every
    table whole (3 GB read at 10⁶ runs of the benchmark's agent). One ``None`` (everything)
    for an unpartitioned dataset."""
    keys = list(partitioned_by(dataset))
    if not keys:
        yield None
        return
    groups, partitions = partition_group_rows(dataset, keys, runs_per_group)
    for group in groups:
        yield partitions_filter(group, keys, partitions)


def partition_group_rows(dataset: str | os.PathLike[str], keys: list[str],
                         runs_per_group: int, *, spread: int = 1
                         ) -> tuple[list[list[dict[str, Any]]], dict[Any, int]]:
    """``partition_groups``' groups as plain data: each group's partitions (``keys`` and
    ``count_all``, the runs in it), sorted and contiguous, and how many partitions each
    system has (what ``partitions_filter`` takes). ``spread``: at least about that many
    groups (smaller ones), where the partitions allow."""
    counts = read_table(dataset, "runs", keys).group_by(keys).aggregate([([], "count_all")])
    rows = sorted(counts.to_pylist(), key=lambda r: tuple((r[k] is not None, r[k] or "")
                                                          for k in keys))
    total = sum(row["count_all"] for row in rows)
    runs_per_group = max(1, min(runs_per_group, -(-total // max(spread, 1))))
    partitions = dict(collections.Counter(row[keys[0]] for row in rows))  # per system
    groups: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        if size >= runs_per_group:
            groups.append([])
            size = 0
        groups[-1].append(row)
        size += row["count_all"]
    return [g for g in groups if g], partitions


def partitions_filter(group: list[dict[str, Any]], keys: list[str],
                      partitions: Mapping[Any, int]) -> Any:
    """The filter of a group of partitions (rows of ``keys``, sorted and contiguous;
    ``partitions``: how many partitions each system has): the systems the group holds
    whole by one ``isin``, the tasks of the first and last (which may be split between
    groups) by one each. A disjunction of one term per partition
    costs pyarrow a simplification per file and term: 13 s a read at 1,000 partitions."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def matches(key: str, values: list[Any]) -> Any:  # partition values are strings
        named = [v for v in values if v is not None]
        if not named:
            return pc.field(key).is_null()
        found = pc.field(key).isin(pa.array(named, pa.string()))
        return found | pc.field(key).is_null() if len(named) < len(values) else found

    systems = list(dict.fromkeys(row[keys[0]] for row in group))
    if len(keys) == 1:
        return matches(keys[0], systems)
    held = collections.Counter(row[keys[0]] for row in group)
    partial = [system for system in dict.fromkeys((systems[0], systems[-1]))
               if held[system] < partitions[system]]
    whole = [system for system in systems if system not in partial]
    terms = [matches(keys[0], [system]) & matches(keys[1], [r[keys[1]] for r in group
                                                            if r[keys[0]] == system])
             for system in partial]
    if whole:
        terms.append(matches(keys[0], whole))
    return functools.reduce(operator.or_, terms)


def whole_run_stage(dataset: DatasetInput, kinds: Sequence[str], fn: Callable[..., Any],
                    kwargs: Mapping[str, Any], schema: Any, executor: Executor, *,
                    partitioned: Mapping[str, list[str]] | None = None) -> Any:
    """``group_runs`` of ``fn`` over ``runs`` and the tables ``kinds`` (the columns records
    are rebuilt from, ``record_columns``): its outputs, one row per run cast to ``schema``,
    in ``agentlog.dataset.run_order``. Under Ray, call it inside ``executing``.

    ``partitioned``: more tables (name -> columns), without ``run_id``, whose rows a
    partition holds for its runs (``pools``), read with each group of partitions (whole
    where there are none, and given to each of Ray Data's blocks)."""
    import pyarrow as pa

    tables = {kind: record_columns(kind) for kind in ("runs", *kinds)}
    tables.update(partitioned or {})
    parts = [plain(p).cast(schema) for p in group_runs(dataset, tables, fn, kwargs, executor)]
    stage = pa.concat_tables([schema.empty_table(), *parts])
    del parts
    order = in_run_order(stage)
    # Put in order a column at a time, each dropped once taken: the stage (GBs at 10⁷
    # runs) is held once and a column, not twice as by ``stage.take``.
    columns = []
    for name in schema.names:
        columns.append(stage.column(name).take(order))
        stage = stage.drop_columns([name])
    return pa.Table.from_arrays(columns, schema=schema)


# ----------------------------------------------------------------------------- replicates


def rows_per_block(width: int) -> int:
    """Draws per block when each draw holds ``width`` numbers: ``BLOCK_DRAWS``, fewer for
    wide draws (a block then holds about four million numbers)."""
    return max(1, min(BLOCK_DRAWS, (1 << 22) // max(width, 1)))


def block_rng(entropy: int | Sequence[int], block: int) -> np.random.Generator:
    """The generator of replicate block ``block``: the ``block``-th child of
    ``SeedSequence(entropy).spawn(...)`` (built directly, whatever the number of blocks)."""
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(block,)))


def map_blocks(fn: Callable[[S, int, int], R], work: Sequence[tuple[S, int]],
               executor: Executor) -> list[list[R]]:
    """For each ``(shared, n_blocks)`` of ``work``: ``fn(shared, lo, hi)`` over ranges of
    blocks that cover ``[0, n_blocks)`` in order (one range locally, several Ray tasks).

    ``fn`` must compute each block of its range on its own (its own ``block_rng``) and join
    them in order, so that any split of the range gives the same result; it must be a
    module-level function (Ray's workers import it by name).
    """
    if executor == "ray":
        from ._ray_executor import map_blocks as ray_map_blocks

        return ray_map_blocks(fn, work)
    return [[fn(shared, 0, n)] if n else [] for shared, n in work]
