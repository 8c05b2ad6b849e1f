"""The estimators' Ray executor: a dataset's per-run stage on Ray Data, replicates as Ray tasks.

``_executor`` says what runs where; this module holds only what touches Ray. Workers
receive plain data and module-level functions of agentlog (Ray imports them by name on
each node, so every node needs agentlog installed); agentlog pickles nothing of its own.

Example (a small local runtime, started and shut down by ``use_ray``)::

    from agentlog.estimators import certify, use_ray

    with use_ray():  # or use_ray("ray://head:10001"), or RAY_ADDRESS in the environment
        data = certify.from_dataset("agentlog-parquet", plan=plan, executor="ray")
        board = certify.certify(data, plan=plan, executor="ray")
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from agentlog import MissingDependencyError
from agentlog.dataset import (
    HIVE_NULL,
    PARTITIONS,
    check_version,
    is_uri,
    partitioned_by,
    read_table,
)

__all__ = ["use_ray"]

S = TypeVar("S")
R = TypeVar("R")
# How Hive writes a null partition value (agentlog.dataset follows it): pyarrow reads it
# back as null, Ray Data as this string.
_TASKS_PER_CPU = 2  # replicate tasks in flight per CPU of the cluster: a slow node is shared


def import_ray(module: str = "ray") -> Any:
    """``ray`` (or ``ray.data``), or ``MissingDependencyError`` with the install line."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # Ray, or Ray Data's own dependencies (pandas, pyarrow)
        raise MissingDependencyError(
            f"executor='ray' needs {'Ray Data' if module != 'ray' else 'Ray'}, which cannot "
            f"be imported ({exc}): pip install 'agentlog[ray]'") from exc


@contextlib.contextmanager
def _quiet_ray_data() -> Iterator[None]:
    # Ray Data 2.60's DataContext sets its own deprecated fields when it is created, which
    # warns (DeprecationWarning from ray.data.context): nothing an agentlog user can act on.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.")
        yield


@contextlib.contextmanager
def use_ray(address: str | None = None) -> Iterator[None]:
    """Run the estimators' ``executor="ray"`` work inside this block on one Ray runtime.

    A runtime this process already has (``ray.init()`` called by you) is used as it is and
    left running. Otherwise the block joins ``address`` (``"ray://head:10001"`` for Ray
    Client, ``"auto"`` or ``"HOST:6379"`` from a node of a cluster started with ``ray start
    --head``), else the ``RAY_ADDRESS`` environment variable's cluster, else starts a new
    local runtime; what it joined or started, it leaves or shuts down when the block ends.
    An estimator called with ``executor="ray"`` outside such a block opens one for its own
    call.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'agentlog[ray]'``).
        ValueError: ``address`` is empty.
    """
    if address is not None and not address.strip():
        raise ValueError("`address` must name a Ray cluster (e.g. 'ray://head:10001' or "
                         "'auto'), or be None; found an empty string")
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    # Workers' and Ray's own output stays in Ray's session logs: printed here it would mix
    # into the caller's (a command's --json on stdout). Their errors still come back.
    if address is None:
        # "local": a new runtime, never a cluster another process left in /tmp/ray (which
        # a bare ray.init() would join).
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


# ----------------------------------------------------------------------------- tables


def _apply(batch: Any, *, fn: Callable[..., Any], columns: list[str],
           kwargs: Mapping[str, Any]) -> Any:
    """The body of ``map_batches`` in a worker: the batch as ``read_table`` gives it (null
    partitions as null, ``columns`` in order), then ``fn``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in PARTITIONS:
        if name in batch.column_names:
            column = batch.column(name)
            batch = batch.set_column(batch.schema.get_field_index(name), name, pc.if_else(
                pc.equal(column, HIVE_NULL), pa.scalar(None, pa.string()), column))
    return fn(batch.select(columns), **kwargs)


def _exists(path: str) -> bool:
    from pyarrow import fs

    try:
        filesystem, inner = fs.FileSystem.from_uri(path)
    except (ValueError, OSError):
        return False
    return bool(filesystem.get_file_info(inner).type == fs.FileType.Directory)


def _checked(dataset: str) -> str:
    """The dataset's location as Ray's workers read it, after the driver checked its schema
    version (another version: the fix, not a Ray Data error; a URI's store that refuses:
    what to check). Workers run in their own folders: a local path is made absolute (it
    must name the same folder on every node, e.g. a shared filesystem's mount); a URI is
    read with each worker's own credentials (for S3, from its environment)."""
    check_version(dataset)
    return (dataset if is_uri(dataset) else os.path.abspath(dataset)).rstrip("/")


@contextlib.contextmanager
def _workers_read(dataset: str) -> Iterator[None]:
    """A URI that Ray's workers fail to read, after this process read it (``_checked``), is
    an ``OSError`` that says why: a worker reads it with its own node's credentials and
    reaches the endpoint from its own node (Ray's own error holds the worker's traceback)."""
    try:
        yield
    except OSError as exc:
        if not is_uri(dataset):
            raise
        cause = getattr(exc, "cause", None) or exc  # ray.exceptions.RayTaskError's
        said = next(iter(str(cause).strip().splitlines()), "") or type(cause).__name__
        raise OSError(
            f"{dataset}: Ray's workers cannot read it ({said}), though this process can: "
            "each node reads a URI with its own credentials (for S3: AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY in the environment its Ray node was started with, "
            "~/.aws, or an instance role) and must reach its endpoint; give every node "
            "both") from exc


def map_table(dataset: str, name: str, columns: list[str], fn: Callable[..., Any],
              kwargs: Mapping[str, Any]) -> list[Any]:
    """``fn`` over the blocks of ``ray.data.read_parquet(dataset/name)``: its outputs, in the
    order Ray finishes them (nothing when the dataset has no such table)."""
    data = import_ray("ray.data")
    root = _checked(dataset)
    path = f"{root}/{name}"
    if not _exists(path):
        if name == "runs":
            raise ValueError(
                f"{dataset}: not an agentlog Parquet dataset (no runs/ folder in it); write "
                "one with agentlog export TRACES --format parquet --out DIR")
        return []
    with use_ray(), _quiet_ray_data(), _workers_read(dataset):
        read = data.read_parquet(path)  # Hive partitions (system, task) become columns
        out = read.select_columns(columns).map_batches(
            _apply, batch_format="pyarrow", batch_size=None,
            fn_kwargs={"fn": fn, "columns": columns, "kwargs": dict(kwargs)})
        return list(out.iter_batches(batch_size=None, batch_format="pyarrow"))


def _tagged(batch: Any, *, name: str, columns: list[str], types: Mapping[str, Any]) -> Any:
    """A block of table ``name`` for the union of ``map_run_groups``: ``run_id``, and per
    table of ``types`` a struct column of its ``columns`` (null but in this table's)."""
    import pyarrow as pa

    from ._executor import as_is, plain

    own = plain(_apply(batch, fn=as_is, columns=columns, kwargs={}))
    out = {"run_id": own.column("run_id")}
    for other, struct in types.items():
        out[other] = (pa.StructArray.from_arrays(
            [own.column(c).combine_chunks().cast(f.type) for c, f in
             zip(columns, struct, strict=True)], fields=list(struct))
            if other == name else pa.nulls(own.num_rows, struct))
    return pa.table(out)


def _grouped(batch: Any, *, fn: Callable[..., Any], types: Mapping[str, Any],
             kwargs: Mapping[str, Any], whole: Mapping[str, Any]) -> Any:
    """The body of the map over sorted blocks: the block's rows (whole runs) split back into
    their tables, with the tables given ``whole``, then ``fn``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = dict(whole)
    for name, struct in types.items():
        column = batch.column(name)
        rows = column.filter(pc.is_valid(column)).combine_chunks()
        parts[name] = (pa.Table.from_struct_array(rows) if len(rows)
                       else pa.schema(list(struct)).empty_table())
    return fn(parts, **kwargs)


def map_run_groups(dataset: str, tables: Mapping[str, list[str]], fn: Callable[..., Any],
                   kwargs: Mapping[str, Any]) -> list[Any]:
    """``_executor.group_runs`` on Ray: the outputs of ``fn`` over whole runs, in any order.

    A run's rows all lie in its Hive partition, so a partitioned dataset is split into
    groups of whole partitions, about ``_TASKS_PER_CPU`` per CPU of the cluster (at most
    ``GROUP_RUNS`` runs each), and each task reads its group's rows itself, as the local
    executor reads a group: no shuffle. A dataset without partitions is read with Ray
    Data: each table read (``read_parquet``) and tagged, their union sorted by ``run_id``
    (a distributed sort, most of the time on a small cluster) and ``fn`` applied to each
    block of whole runs, with every row of the tables that lack ``run_id``."""
    import pyarrow as pa

    from ._executor import GROUP_RUNS, partition_group_rows, plain

    root = _checked(dataset)
    keys = list(partitioned_by(root))
    if keys:
        ray = import_ray()
        with use_ray(), _workers_read(dataset):
            slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
            groups, partitions = partition_group_rows(root, keys, GROUP_RUNS,
                                                      spread=_TASKS_PER_CPU * slots)
            task = ray.remote(num_cpus=1, max_retries=0)(_read_group)
            refs = [task.remote(root, dict(tables), fn, dict(kwargs), keys, group, partitions)
                    for group in groups]
            batches = list(ray.get(refs))
        _check_whole_runs(batches)
        return batches
    # A table without run_id (a partition's pools) has no place in the sort: read whole
    # here, as the local stage reads it from a dataset without partitions, and given to
    # every block.
    whole = {name: plain(read_table(root, name, columns))
             for name, columns in tables.items() if "run_id" not in columns}
    data = import_ray("ray.data")
    with use_ray(), _quiet_ray_data(), _workers_read(dataset):
        reads = {}
        for name, columns in tables.items():
            if "run_id" not in columns:
                continue
            path = f"{root}/{name}"
            if not _exists(path):
                if name == "runs":
                    raise ValueError(
                        f"{dataset}: not an agentlog Parquet dataset (no runs/ folder in "
                        "it); write one with agentlog export TRACES --format parquet --out "
                        "DIR")
                continue  # no run has such rows
            reads[name] = data.read_parquet(path).select_columns(columns)
        types = {}
        for name, read in reads.items():
            schema = read.schema().base_schema
            types[name] = pa.struct([pa.field(c, schema.field(c).type)
                                     for c in tables[name]])
        tagged = [read.map_batches(_tagged, batch_format="pyarrow", batch_size=None,
                                   fn_kwargs={"name": name, "columns": tables[name],
                                              "types": types})
                  for name, read in reads.items()]
        union = tagged[0].union(*tagged[1:]) if len(tagged) > 1 else tagged[0]
        # What map_groups does before it calls its function once per group: a sort by the
        # key, after which a block holds whole runs (equal keys land in one block), and a
        # map over whole blocks. Here the function gets the whole block, many runs a call
        # (map_groups' one call per run cost more than the runs' work).
        out = union.sort("run_id").map_batches(
            _grouped, batch_format="pyarrow", batch_size=None,
            fn_kwargs={"fn": fn, "types": types, "kwargs": dict(kwargs), "whole": whole})
        batches = list(out.iter_batches(batch_size=None, batch_format="pyarrow"))
    _check_whole_runs(batches)
    return batches


def _read_group(dataset: str, tables: Mapping[str, list[str]], fn: Callable[..., Any],
                kwargs: Mapping[str, Any], keys: list[str], group: list[dict[str, Any]],
                partitions: Mapping[Any, int]) -> Any:
    """A Ray task of ``map_run_groups``: one group of whole partitions read as
    ``_executor.group_runs`` reads one locally, then ``fn``."""
    from ._executor import partitions_filter, read_group

    return read_group(dataset, tables, fn, kwargs, partitions_filter(group, keys, partitions))


def _check_whole_runs(batches: list[Any]) -> None:
    """Refuse outputs that name a run twice: a run's rows were split between two blocks
    (which a sort should never do), and each part would count as a run."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.chunked_array([b.column("run_id") for b in batches if b.num_rows],
                           type=pa.string())
    if len(ids) != len(pc.unique(ids)):
        counts = pc.value_counts(ids)
        split = next(v["values"] for v in counts.to_pylist() if v["counts"] > 1)
        raise RuntimeError(
            f"Ray Data split run {split!r} between two blocks after sorting by run_id, so "
            "its rows would count as two runs; nothing was estimated. Run with "
            "executor='local', and report the Ray version (this is a bug)")


# ----------------------------------------------------------------------------- replicates


def _ranges(n: int, parts: int) -> list[tuple[int, int]]:
    parts = max(1, min(n, parts))
    cuts = [n * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(cuts))


def map_blocks(fn: Callable[[S, int, int], R], work: Sequence[tuple[S, int]]
               ) -> list[list[R]]:
    """``_executor.map_blocks`` on Ray: every job's blocks split into ranges, one task each,
    all jobs' tasks in flight together; results in order."""
    ray = import_ray()
    with use_ray():
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        total = sum(n for _, n in work)
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = []
        for shared, n in work:
            ref = ray.put(shared)
            share = max(1, round(_TASKS_PER_CPU * slots * n / max(total, 1)))
            refs.append([remote.remote(ref, lo, hi) for lo, hi in _ranges(n, share)])
        return [list(ray.get(job)) if job else [] for job in refs]
