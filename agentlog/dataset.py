"""Traces as a Parquet dataset: one table per record kind, for DuckDB, polars, Spark or Ray.

``to_parquet(traces, out)`` (``agentlog export TRACES… --format parquet --out DIR``)
writes ``DIR/<table>/system=<system>/task=<task>/part-<batch>-<i>.parquet`` for the
tables in ``TABLES``, Hive-partitioned by the run's system and task, zstd-compressed, the
float columns and float lists (probability vectors, draws) byte-stream-split. Every
table has ``run_id`` (the run's globally unique id) to join on; windows join their
selections, continuations, calls and scores on ``(run_id, window)``.

Schema version 2 (``SCHEMA_VERSION``): each table holds the fields of its record type
(``agentlog.records``: ``RunStart``/``RunEnd`` for ``runs``, ``WindowEnter``/``WindowExit``
for ``windows``, and ``Selection``, ``Continuation``, ``LLMCall``, ``ToolCall``, ``Score``),
as ``Trace.to_arrow`` gives them (with ``seq``, a record's position in its run), plus:

* ``run_id`` (string), and the partition columns ``system`` and ``task`` (string; a
  reader with Hive partitioning, e.g. DuckDB's ``read_parquet(..., hive_partitioning =
  true)``, brings them back);
* in ``runs``: ``source`` (the trace file as named to the export) and
  ``source_sha256`` (hex of the file's bytes when it was exported);
* the ``pools`` table: the candidate pools the partition's selections name (``pool``,
  the hash in ``selections.pool``; ``ids``, the candidate ids as the trace stores them:
  a canonical msgpack list).

Version 2 added ``seq``, the selections' ``policy_probs``, ``steer``, ``forced`` and
``observed``, and
``pools``: what the estimators' per-run stage reads (``iter_runs``). A folder written by
another version is refused (by the export and the readers) with the fix: export afresh.

Integers are int64, hashes binary, timestamps int64 nanoseconds, payloads (``meta``) JSON
text, vectors ``list<double>``. Each file's Parquet metadata names the schema version
(``agentlog.dataset_schema``), the agentlog version, the table, and the source traces of
its batch with their trace-format versions and SHA-256 (``agentlog.sources``, JSON).

Exporting is streaming and incremental: a file is read a run at a time, rows go out in
batches of ``batch_rows`` (memory holds one batch whatever the number of files), and a
run already in ``DIR`` (by ``run_id``) is not written again. A batch's ``runs`` rows are
written last: the parts of a batch whose ``runs`` part is missing (an export that was
killed) are removed by the next export before it writes. A trace file re-recorded since
its last export (its earlier runs gone from it) is named in a warning: its old rows stay
in ``DIR`` until the folder is exported afresh.

``DIR`` may also be a URI that ``pyarrow.fs.FileSystem.from_uri`` opens, e.g.
``s3://bucket/prefix`` (tested against an S3-compatible server): every function here
reads and writes it through pyarrow's filesystem layer, with the credentials, region and
endpoint pyarrow finds (for S3: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or
``AWS_PROFILE``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for a server other than AWS). The
bucket must exist. An object store has no file lock: the one-export-at-a-time guard of a
local folder does not hold there, so run one export into a URI at a time.

Examples:
    >>> import agentlog as al
    >>> from agentlog.dataset import read_table, to_parquet
    >>> with al.record("agentlog-dataset-doc.zst", seed=1, system="demo", task="t1",
    ...                mode="w"):
    ...     al.score("f1", 0.5)
    >>> to_parquet("agentlog-dataset-doc.zst", "agentlog-dataset-doc").runs_added
    1
    >>> read_table("agentlog-dataset-doc", "scores").to_pydict()["value"]
    [0.5]
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ._dataset_root import _arrow, _Root, _root, is_uri
from ._errors import InstrumentationWarning, TracePathError
from ._frames import trace_sha256
from ._reader import TraceRun, TraceSource, _StreamedTrace, _trace_sources
from ._reader import iter_runs as _iter_trace_runs
from ._records import (
    Blob,
    Continuation,
    RunEnd,
    RunStart,
    Score,
    Selection,
    WindowEnter,
    WindowExit,
)
from ._trace import RunView, Trace, WindowView
from ._trace_format import FILE_HEADER_SIZE, check_file_header
from ._version import __version__
from ._writer.pool import settle

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["HIVE_NULL", "SCHEMA_VERSION", "TABLES", "ParquetResult", "arrow_table",
           "check_version", "is_dataset", "is_uri", "iter_runs", "partitioned_by", "read_table",
           "run_order", "to_parquet"]

is_uri.__module__ = __name__  # public here; defined beside the storage it decides on

SCHEMA_VERSION = 2
TABLES = ("runs", "windows", "selections", "continuations", "llm_calls", "tool_calls",
          "scores", "pools")
PARTITIONS = ("system", "task")
# Rows held before a batch is written: about 100 MB at the demo's rows.
DEFAULT_BATCH_ROWS = 200_000
_LOCK = ".agentlog-export.lock"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # a null partition value, as Hive writes it


@dataclass(frozen=True)
class ParquetResult:
    """What ``to_parquet`` did.

    Attributes:
        out: the dataset folder (a ``Path``), or the URI it was given as (a ``str``).
        runs_added: runs written by this export.
        runs_present: runs skipped because ``out`` already held them (an earlier export,
            or a copy of the same run in another file).
        runs_unreadable: runs without a ``RunStart`` (cut from the front of a file):
            they have no id to join on and are not written.
        rows: rows written per table.
        files: trace files read.
        stale: trace files whose runs exported earlier are no longer in them (re-recorded
            since): ``{file: number of such runs}``.
    """

    out: Path | str
    runs_added: int = 0
    runs_present: int = 0
    runs_unreadable: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    stale: dict[str, int] = field(default_factory=dict)


def _schemas(pa: Any) -> dict[str, Any]:
    """Each table's schema: ``Trace.to_arrow``'s columns for no records (every integer
    int64), then ``run_id``, ``system`` and ``task``; ``runs`` adds its source."""
    empty = Trace(path="", records=[])
    out = {"pools": pa.schema([("pool", pa.binary()), ("ids", pa.binary()),
                               *((p, pa.string()) for p in PARTITIONS)])}
    for kind in TABLES[:-1]:
        schema = empty.to_arrow(kind).schema  # type: ignore[arg-type]
        for name in ("run_id", *PARTITIONS):
            if schema.get_field_index(name) < 0:
                schema = schema.append(pa.field(name, pa.string()))
        if kind == "runs":
            schema = schema.append(pa.field("source", pa.string()))
            schema = schema.append(pa.field("source_sha256", pa.string()))
        out[kind] = schema
    return out


def _encodings(pa: Any, schema: Any) -> tuple[list[str], list[str]]:
    """Columns to byte-stream-split (floats and float lists: the probability vectors
    shrink by a tenth more under zstd) and columns to dictionary-encode (the others; a
    dictionary would take precedence over the split)."""
    floats, others = [], []
    for f in schema:
        if pa.types.is_floating(f.type):
            floats.append(f.name)
        elif pa.types.is_list(f.type) and pa.types.is_floating(f.type.value_type):
            floats.append(f"{f.name}.list.element")
        else:
            others.append(f.name)
    return floats, others


def _identify(path: Path) -> tuple[str, int | None]:
    """A trace file's SHA-256 (hex, as ``agentlog.records.trace_sha256``) and format
    version (None: its header was cut)."""
    with open(path, "rb") as f:
        head = f.read(FILE_HEADER_SIZE)
    return trace_sha256(path), check_file_header(head, path=os.fspath(path))


@contextlib.contextmanager
def _export_lock(out: _Root) -> Iterator[None]:
    """One export into ``out`` at a time (an exclusive lock on a file in it; an object
    store has no lock: nothing)."""
    if not out.local:
        yield
        return
    fd = os.open(out.join(_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise TracePathError(
                f"{out}: another export is writing this dataset; wait for it to finish, "
                "or export into another folder") from None
        yield
    finally:
        os.close(fd)


def _parts(out: _Root, kind: str) -> list[str]:
    return out.files(out.join(kind))


def _batch_of(part: str) -> str:
    return part.rsplit("/", 1)[-1].split("-")[1]


def _remove_unfinished(out: _Root) -> None:
    """Remove the parts of batches whose ``runs`` part was never written (a killed export)."""
    finished = {_batch_of(p) for p in _parts(out, "runs")}
    for kind in TABLES:
        for part in _parts(out, kind):
            if _batch_of(part) not in finished:
                out.delete(part)


def _exported(out: _Root) -> dict[str, set[str]]:
    """``source -> run ids`` already in ``out``'s ``runs`` table."""
    table = _read_table(out, "runs", ["run_id", "source"])
    by_source: dict[str, set[str]] = {}
    for run_id, source in zip(table.column("run_id").to_pylist(),
                              table.column("source").to_pylist(), strict=True):
        by_source.setdefault(source, set()).add(run_id)
    return by_source


class _Batch:
    """Rows waiting to be written: per table, arrow tables of runs of one or more files."""

    def __init__(self, pa: Any, out: _Root, schemas: dict[str, Any],
                 partition_by: tuple[str, ...]) -> None:
        self.pa, self.out, self.schemas = pa, out, schemas
        self.partition_by = partition_by
        self.tables: dict[str, list[Any]] = {k: [] for k in TABLES}
        self.sources: dict[str, dict[str, Any]] = {}
        self.source_of: dict[str, str] = {}  # run id -> its trace file
        self.held = 0
        self.rows = dict.fromkeys(TABLES, 0)
        self.pool_keys: set[tuple[bytes, str, str | None]] = set()  # (pool, system, task)

    def add(self, records: list[Any], pools: dict[bytes, bytes], source: str, sha256: str,
            format_version: int | None) -> None:
        """The rows of the runs whose ``records`` are given (one file's, in file order),
        and of the candidate pools (``hash -> ids``) their selections name."""
        pa = self.pa
        trace = Trace(path=source, records=records, format_version=format_version)
        who = {r.run: (r.start.run_id, r.start.system, r.start.task) for r in trace.runs
               if r.start is not None}
        rows: dict[tuple[bytes, str, str | None], None] = {}
        for sel in trace._index.of(Selection):
            key = (sel.pool, who[sel.run][1], who[sel.run][2])
            if sel.pool in pools and key not in self.pool_keys:
                rows[key] = None
        if rows:
            self.pool_keys.update(rows)
            hashes, systems, tasks = zip(*rows, strict=True)
            self.tables["pools"].append(pa.table({
                "pool": pa.array(hashes, pa.binary()),
                "ids": pa.array([pools[h] for h in hashes], pa.binary()),
                "system": pa.array(systems, pa.string()),
                "task": pa.array(tasks, pa.string())}))
            self.held += len(rows)
        for kind in TABLES[:-1]:
            table = trace.to_arrow(kind)  # type: ignore[arg-type]
            if not table.num_rows:
                continue
            runs = table.column("run").to_pylist()
            for i, name in enumerate(("run_id", *PARTITIONS)):
                column = pa.array([who[r][i] for r in runs], pa.string())
                at = table.schema.get_field_index(name)
                table = (table.set_column(at, name, column) if at >= 0
                         else table.append_column(name, column))
            if kind == "runs":
                table = table.append_column("source", pa.array([source] * len(runs),
                                                                pa.string()))
                table = table.append_column("source_sha256", pa.array(
                    [sha256] * len(runs), pa.string()))
            self.tables[kind].append(self._cast(table, kind, source))
            self.held += table.num_rows
        self.source_of.update((run_id, source) for run_id, _, _ in who.values())
        self.sources[source] = {"path": source, "sha256": sha256,
                                "format_version": format_version}

    def _cast(self, table: Any, kind: str, source: str) -> Any:
        schema = self.schemas[kind]
        try:
            return table.select(schema.names).cast(schema)
        except (self.pa.ArrowInvalid, OverflowError) as exc:
            raise ValueError(
                f"{source}: a {kind} row does not fit the dataset schema (version "
                f"{SCHEMA_VERSION}): {exc}. Its integers must fit int64; "
                "read this file with agentlog.read() instead") from None

    def write(self) -> None:
        """Write what is held: every table's part of this batch, ``runs`` last."""
        if not self.held:
            return
        pa = self.pa
        batch = uuid.uuid4().hex
        for kind in (*TABLES[1:], TABLES[0]):
            if not self.tables[kind]:
                continue
            table = pa.concat_tables(self.tables[kind]).combine_chunks()  # one take per part
            keys = (list(zip(*(table.column(p).to_pylist() for p in self.partition_by),
                             strict=True)) if self.partition_by else [()] * table.num_rows)
            rows: dict[tuple[Any, ...], list[int]] = {}
            for i, key in enumerate(keys):
                rows.setdefault(key, []).append(i)
            # A pool is named by runs, not one: its part names no source file.
            run_ids: list[str] = (table.column("run_id").to_pylist() if kind != "pools"
                                  else [])
            for key, taken in rows.items():
                part = table.take(pa.array(taken, pa.int64())).drop_columns(
                    list(self.partition_by))
                from_files = sorted({self.source_of[run_ids[i]] for i in taken} if run_ids
                                    else set())
                self._write_part(part, kind, key, batch, from_files)
            self.rows[kind] += table.num_rows
        self.tables = {k: [] for k in TABLES}
        self.sources, self.source_of = {}, {}
        self.pool_keys = set()
        self.held = 0

    def _write_part(self, part: Any, kind: str, key: tuple[Any, ...], batch: str,
                    from_files: list[str]) -> None:
        """One file: the rows of one (system, task) partition, with their sources named in
        the file's metadata (only theirs: a batch's whole list would outweigh small files)."""
        folder = self.out.join(kind, *(
            f"{name}={HIVE_NULL if value is None else quote(value, safe='')}"
            for name, value in zip(self.partition_by, key, strict=True)))
        self.out.mkdir(folder)
        part = part.replace_schema_metadata({
            "agentlog.dataset_schema": str(SCHEMA_VERSION),
            "agentlog.version": __version__,
            "agentlog.table": kind,
            "agentlog.partition_by": ",".join(self.partition_by),
            "agentlog.sources": json.dumps([self.sources[f] for f in from_files]),
        })
        floats, others = _encodings(self.pa, part.schema)
        self.out.write(part, f"{folder}/part-{batch}-0.parquet", compression="zstd",
                       use_dictionary=others, use_byte_stream_split=floats)


def to_parquet(
    traces: TraceSource | Iterable[TraceSource],
    out: str | os.PathLike[str],
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    partition_by: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ParquetResult:
    """Write the runs of ``traces`` into the Parquet dataset ``out`` (module docs).

    Args:
        traces: trace files, folders (every ``*.zst`` below), glob patterns, or a list.
        out: the dataset folder (created; runs it already holds are skipped), or a URI
            such as ``s3://bucket/prefix`` (module docs; the bucket must exist).
        batch_rows: rows held in memory before they are written (all tables together).
        partition_by: the Hive partition columns: ``("system", "task")`` (the default
            for a new dataset), ``("system",)`` or ``()``. A batch writes a file per
            table and partition, so runs of many tasks (a benchmark whose tasks are its
            samples) write many small files, slowly: partition by system alone then, and
            filter tasks in the query (the column stays in every table). An existing
            dataset keeps the partitioning it was written with.
        progress: called with 1 after each trace file is read (a progress bar's step).

    Returns:
        An ``ParquetResult``.

    Raises:
        MissingDependencyError: pyarrow is not installed.
        TracePathError: another export is writing ``out``, or ``out`` is a file (or a
            URI whose bucket does not exist).
        ValueError, TraceFormatError, OSError: as ``agentlog.read`` on a bad source; an
            ``OSError`` also when ``out`` cannot be written (for a URI: what to check).
    """
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"`batch_rows` must be a positive int; found {batch_rows!r}")
    wanted = None if partition_by is None else _partitioning(partition_by)
    pa, _ = _arrow()
    root = _root(out)
    if root.is_file(root.path):
        raise TracePathError(f"{root}: `out` must be a folder (the dataset); it is a file")
    missing = root.bucket()
    if missing is not None:
        raise TracePathError(
            f"{root}: there is no bucket {missing!r} (or these credentials cannot see it); "
            "create the bucket first, or export into one that exists")
    root.mkdir(root.path)
    with _export_lock(root):
        _remove_unfinished(root)
        layout: tuple[str, ...] = PARTITIONS
        dataset = _is_dataset(root)
        if dataset:
            _check_version(root, "export into")
            layout = _partitioned_by(root)
            if wanted is not None and wanted != layout:
                raise ValueError(
                    f"{root} is partitioned by {list(layout)}; `partition_by` "
                    f"{list(wanted)} would mix two layouts in one dataset. Export into a "
                    "new folder, or leave `partition_by` out")
        elif wanted is not None:
            layout = wanted
        exported = _exported(root) if dataset else {}
        present = set().union(*exported.values()) if exported else set()
        batch = _Batch(pa, root, _schemas(pa), layout)
        added = skipped = unreadable = files = 0
        stale: dict[str, int] = {}
        for item in _trace_sources(traces, "traces"):
            if isinstance(item, Trace):
                raise ValueError(
                    "`traces` must name trace files or folders (a dataset records each "
                    f"run's source file); found a Trace of {item.path!r}: pass its path")
            source = os.fspath(item)
            settle(item)  # this process's queued records first: the hash is of the runs read
            sha256, version = _identify(item)
            seen: set[str] = set()
            held: list[Any] = []
            pools: dict[bytes, bytes] = {}
            for trace_run in _iter_trace_runs(item):
                run = trace_run.run
                if run.start is None:
                    unreadable += 1
                    continue
                seen.add(run.start.run_id)
                if run.start.run_id in present:
                    skipped += 1
                    continue
                present.add(run.start.run_id)
                held.extend(run.records)
                for rec in run.records:
                    if type(rec) is Selection and trace_run.trace.has_blob(rec.pool):
                        pools[rec.pool] = trace_run.trace.blob(rec.pool)
                added += 1
                if batch.held + len(held) >= batch_rows:
                    batch.add(held, pools, source, sha256, version)
                    held, pools = [], {}
                    batch.write()
            if held:
                batch.add(held, pools, source, sha256, version)
            if batch.held >= batch_rows:
                batch.write()
            gone = exported.get(source, set()) - seen
            if gone:
                stale[source] = len(gone)
            files += 1
            if progress is not None:
                progress(1)
        batch.write()
    for source, n in stale.items():
        warnings.warn(
            f"{source}: {n} run(s) exported from this file earlier are no longer in it (was "
            f"it re-recorded?); their rows stay in {root}, where estimators would count them. "
            "Export into a fresh folder (or delete this one) to drop them",
            InstrumentationWarning, stacklevel=2)
    return ParquetResult(out=root.shown if is_uri(out) else Path(out), runs_added=added,
                         runs_present=skipped, runs_unreadable=unreadable, rows=batch.rows,
                         files=files, stale=stale)


def is_dataset(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder (or URI) written by ``to_parquet`` (it has ``runs/``
    parts).

    Raises:
        OSError: a URI whose store refuses or cannot be reached (the message says what to
            check).
        ValueError: a URI pyarrow cannot open.
    """
    return _is_dataset(_root(path))


def _is_dataset(root: _Root) -> bool:
    return bool(_parts(root, "runs"))


def read_table(dataset: str | os.PathLike[str], table: str,
               columns: list[str] | None = None, *, filter: Any = None) -> pa.Table:
    """One table of a dataset written by ``to_parquet``, its partition columns included.

    Args:
        dataset: the dataset folder, or its URI (``s3://bucket/prefix``).
        table: one of ``TABLES``.
        columns: the columns to read (default all).
        filter: the rows to read, a ``pyarrow.compute`` expression (``pc.field("system")
            == "a"``); files of partitions it excludes are not opened.

    Raises:
        ValueError: an unknown table, or a folder that is not such a dataset.
        OSError: a URI whose store refuses or cannot be reached (what to check).
        MissingDependencyError: pyarrow is not installed.
    """
    _arrow()
    if table not in TABLES:
        raise ValueError(f"`table` must be one of {', '.join(TABLES)}; found {table!r}")
    return _read_table(_root(dataset), table, columns, filter)


def _read_table(root: _Root, table: str, columns: list[str] | None,
                filter: Any = None) -> pa.Table:
    pa, ds = _arrow()
    if not root.is_dir(root.join("runs")):
        raise root.not_a_dataset("no runs/ folder in it")
    _check_version(root, "read")
    schema = _schemas(pa)[table]
    if not _parts(root, table):
        return schema.empty_table() if columns is None else schema.empty_table().select(columns)
    hive = ds.HivePartitioning(pa.schema([(p, pa.string()) for p in _partitioned_by(root)]),
                               null_fallback=HIVE_NULL)
    return root.scan(root.join(table), columns, filter, format="parquet", partitioning=hive,
                     schema=schema)


def check_version(dataset: str | os.PathLike[str], doing: str = "read") -> None:
    """Refuse a dataset of another schema version (``ValueError`` naming the fix: export
    afresh): its tables lack columns (or hold others) that would read as nulls. A folder
    without ``runs`` parts passes (there is nothing to read yet)."""
    _check_version(_root(dataset), doing)


def _check_version(root: _Root, doing: str) -> None:
    parts = _parts(root, "runs")
    if not parts:
        return
    meta = root.schema(parts[0]).metadata or {}
    found = meta.get(b"agentlog.dataset_schema", b"?").decode()
    if found != str(SCHEMA_VERSION):
        raise ValueError(
            f"{root}: a dataset of schema version {found}; this agentlog reads and writes "
            f"version {SCHEMA_VERSION}, so it cannot {doing} it. Export the traces afresh "
            "into a new folder (agentlog export TRACES --format parquet --out NEW)")


def _partitioning(partition_by: Iterable[str]) -> tuple[str, ...]:
    if isinstance(partition_by, str):
        partition_by = (partition_by,)
    got = tuple(partition_by)
    allowed = (PARTITIONS, PARTITIONS[:1], ())
    if got not in allowed:
        raise ValueError(f"`partition_by` must be one of {[list(a) for a in allowed]}; "
                         f"found {list(got)}")
    return got


def partitioned_by(dataset: str | os.PathLike[str]) -> tuple[str, ...]:
    """The Hive partition columns of a dataset: ``("system", "task")``, ``("system",)``
    or ``()`` (``to_parquet(partition_by=...)``), as its files record it."""
    return _partitioned_by(_root(dataset))


def _partitioned_by(root: _Root) -> tuple[str, ...]:
    parts = _parts(root, "runs")
    if not parts:
        return PARTITIONS
    meta = root.schema(parts[0]).metadata or {}
    text = meta.get(b"agentlog.partition_by", b"system,task").decode()
    return _partitioning(text.split(",") if text else ())


def run_order(source: str, run: int) -> tuple[Path, int]:
    """The place of a run in the order ``agentlog.read_traces`` reads a folder: its source
    file's path (sorted as paths are), then its index in the file. Estimators put a
    dataset's per-run rows in this order, so their sums add in the same order, to the bit."""
    return (Path(source), run)


def arrow_table(table: Any, *, name: str = "table") -> pa.Table:
    """``table`` as a pyarrow ``Table``: a pyarrow table as it is, a DuckDB relation (or
    anything with ``to_arrow_table()`` or ``arrow()``) converted.

    Raises:
        ValueError: anything else (``name`` says which argument).
    """
    pa, _ = _arrow()
    for convert in ("to_arrow_table", "arrow"):  # a DuckDB relation
        if not isinstance(table, pa.Table) and hasattr(table, convert):
            table = getattr(table, convert)()
            table = table.read_all() if hasattr(table, "read_all") else table
    if not isinstance(table, pa.Table):
        raise ValueError(f"`{name}` must be a pyarrow Table or a DuckDB relation; found "
                         f"{type(table).__name__}")
    return table


def iter_runs(dataset: str | os.PathLike[str] | Mapping[str, Any],
              tables: Iterable[str] = ("windows", "selections", "continuations", "scores"),
              ) -> Iterator[TraceRun]:
    """The runs of a dataset rebuilt as records, one (system, task) partition at a time.

    What ``agentlog.records.iter_runs`` gives for the trace files the dataset was exported
    from, for the estimators' per-run stage: per run its ``RunStart`` and ``RunEnd`` (when
    the run ended), then the records of ``tables`` in the order the file held them
    (``seq``): ``WindowEnter`` (``windows``; the exits are on ``run.windows``),
    ``Selection`` (with its candidate pool readable through ``trace.blob``),
    ``Continuation``, ``Score``. ``trace.path`` is the run's source file. What a dataset
    does not keep is not rebuilt: window entries and exits (their hashes are), ``meta``
    values JSON cannot hold exactly (bytes, tuples).

    ``dataset`` may also be its tables already selected (e.g. the runs of some systems,
    filtered in SQL): ``{"runs": ..., "selections": ..., "pools": ..., ...}`` as pyarrow
    tables or DuckDB relations, every table of ``tables`` given (``pools`` with
    ``selections``), with all their columns and ``runs`` with its ``system`` and ``task``
    (as ``read_table`` or DuckDB's ``read_parquet(..., hive_partitioning = true)`` give
    them). Rows of runs that ``runs`` lacks are left out. The tables are read whole.

    Memory holds one partition's rows of ``tables``. Runs come partition by partition,
    not in file order: put per-run results in ``run_order(trace.path, run.run)`` before
    adding them up.

    Raises:
        ValueError: an unknown table; a folder that is not a dataset (or of another
            schema version); a mapping that lacks a table or a column.
        OSError: a URI whose store refuses or cannot be reached (what to check).
        MissingDependencyError: pyarrow is not installed.
    """
    pa, _ = _arrow()
    wanted = tuple(tables)
    rebuilt = ("windows", "selections", "continuations", "scores")
    bad = [t for t in wanted if t not in rebuilt]
    if bad:
        raise ValueError(f"`tables` must name some of {', '.join(rebuilt)}; found {bad}")
    schemas = _schemas(pa)
    if isinstance(dataset, Mapping):
        yield from _partition_runs(_given_tables(dataset, wanted, schemas), {}, wanted)
        return
    root = _root(dataset)
    runs = _parts(root, "runs")
    if not runs:
        raise root.not_a_dataset("no runs/ parts in it")
    _check_version(root, "read")
    layout = _partitioned_by(root)
    # A part's partition: its folder's names below runs/ (none in a flat dataset).
    prefix = len(root.join("runs")) + 1
    partitions = sorted({tuple(p[prefix:].split("/")[:-1]) for p in runs})
    for partition in partitions:
        values = dict(zip(layout, (_hive_value(part.split("=", 1)[1])
                                   for part in partition), strict=True))

        def read(kind: str, partition: tuple[str, ...] = partition) -> dict[str, list[Any]]:
            files = root.files(root.join(kind, *partition), recursive=False)
            if not files:
                return {name: [] for name in schemas[kind].names}
            columns: dict[str, list[Any]] = pa.concat_tables(
                [root.read(f) for f in files]).to_pydict()
            return columns

        yield from _partition_runs(read, values, wanted)


def _given_tables(dataset: Mapping[str, Any], wanted: tuple[str, ...],
                  schemas: dict[str, Any]) -> Callable[[str], dict[str, list[Any]]]:
    """``read(table)`` over a mapping of tables, each checked for the columns a dataset's
    table has (``runs`` also for ``system`` and ``task``)."""
    needed = ("runs", *wanted, *(("pools",) if "selections" in wanted else ()))
    missing = [t for t in needed if t not in dataset]
    if missing:
        raise ValueError(f"`dataset` lacks the table(s) {missing}; give "
                         f"{', '.join(needed)} (read_table(DIR, name), or a DuckDB relation "
                         "of the table)")
    given: dict[str, Any] = {}
    for kind in needed:
        table = arrow_table(dataset[kind], name=f"dataset[{kind!r}]")
        columns = list(dict.fromkeys(
            [*schemas[kind].names, *(("system", "task") if kind == "runs" else ())]))
        lacking = [c for c in columns if c not in table.column_names]
        if lacking:
            raise ValueError(f"`dataset[{kind!r}]` lacks the column(s) {lacking}; select "
                             f"all the columns of the dataset's {kind} table")
        given[kind] = table.select(columns)

    def read(kind: str) -> dict[str, list[Any]]:
        columns: dict[str, list[Any]] = given[kind].to_pydict()
        if kind == "runs":  # read with Hive partitioning by another engine (DuckDB)
            for key in ("system", "task"):
                columns[key] = [None if v == HIVE_NULL else v for v in columns[key]]
        return columns

    return read


def _hive_value(segment: str) -> str | None:
    from urllib.parse import unquote

    return None if segment == HIVE_NULL else unquote(segment)


def _partition_runs(read: Callable[[str], dict[str, list[Any]]], values: dict[str, Any],
                    tables: tuple[str, ...]) -> Iterator[TraceRun]:
    """The runs of one partition (``read(table)``: its rows of a table, as columns;
    ``values``: the partition's own, absent from its files)."""
    runs = read("runs")
    n = len(runs["run_id"])
    for name, value in values.items():
        runs[name] = [value] * n
    traces: dict[str, _StreamedTrace] = {}
    if "selections" in tables:
        pools = read("pools")
        blobs = {h: Blob(hash=h, data=ids, kind="pool")
                 for h, ids in zip(pools["pool"], pools["ids"], strict=True)}
    placed: dict[str, list[tuple[int, Any]]] = {run_id: [] for run_id in runs["run_id"]}
    for kind in tables:
        rows = read(kind)
        for i, run_id in enumerate(rows["run_id"]):
            if run_id in placed:
                placed[run_id].append((rows["seq"][i], (kind, rows, i)))
    for i, run_id in enumerate(runs["run_id"]):
        source = runs["source"][i]
        trace = traces.get(source)
        if trace is None:
            trace = traces[source] = _StreamedTrace(path=source, records=[])
            if "selections" in tables:
                trace._index.blobs.update(blobs)
        view = RunView(runs["run"][i])
        meta = runs["meta"][i]
        view.start = RunStart(
            run=runs["run"][i], run_id=run_id, system=runs["system"][i] or "",
            seed=runs["seed"][i], task=runs["task"][i],
            meta={} if meta is None else json.loads(meta),
            t_ns=runs["t_start_ns"][i], generator=runs["generator"][i],
            agentlog_version=runs["agentlog_version"][i], parent_run=runs["parent_run"][i],
            pid=runs["pid"][i] or 0)
        view.records.append(view.start)
        for _, (kind, rows, j) in sorted(placed.pop(run_id), key=lambda item: item[0]):
            if kind == "windows":
                window = _window(rows, j, trace)
                view.windows.append(window)
                view.records.append(window.enter)
            else:
                view.records.append(_record(kind, rows, j))
        if runs["complete"][i]:
            view.end = RunEnd(
                run=runs["run"][i], t_ns=runs["t_end_ns"][i], status=runs["status"][i],
                receipt=runs["receipt"][i] or b"", n_windows=runs["n_windows"][i],
                n_selections=runs["n_selections"][i],
                n_continuations=runs["n_continuations"][i], dropped=runs["dropped"][i] or 0,
                error_type=runs["error_type"][i])
            view.records.append(view.end)
        yield TraceRun(trace, view)


_RECORDS: dict[str, type[Any]] = {"continuations": Continuation, "scores": Score}


def _record(kind: str, rows: dict[str, list[Any]], i: int) -> Any:
    """The ``Selection``, ``Continuation`` or ``Score`` of row ``i``."""
    if kind == "selections":
        return Selection(
            run=rows["run"][i], window=rows["window"][i], name=rows["name"][i],
            step=rows["step"][i], owner=rows["owner"][i], pool=rows["pool"][i],
            n=rows["n"][i], probs=_vector(rows["probs"][i]) or b"",
            draws=_vector(rows["draws"][i]) or b"", choice=rows["choice"][i],
            n_zero=rows["n_zero"][i], generator=rows["generator"][i],
            top_k=rows["top_k"][i], top_p=rows["top_p"][i],
            raw_probs=_vector(rows["raw_probs"][i]), t_ns=rows["t_ns"][i],
            policy_probs=_vector(rows["policy_probs"][i]), steer=rows["steer"][i],
            forced=bool(rows["forced"][i]), observed=rows["observed"][i])
    cls = _RECORDS[kind]
    # __struct_fields__ (the names), not msgspec.structs.fields: that re-evaluates the
    # type annotations on every call (~85 µs, more than the rest of a run's rebuilding).
    return cls(**{name: rows[name][i] for name in cls.__struct_fields__})


def _vector(values: list[float] | None) -> bytes | None:
    """A list column's value as the trace stores a vector (little-endian float64)."""
    import numpy as np

    return None if values is None else np.asarray(values, dtype="<f8").tobytes()


def _window(rows: dict[str, list[Any]], i: int, trace: Trace) -> WindowView:
    """The ``WindowView`` of row ``i``: its entry and, when it closed, its exit (their
    hashes and counts; the states themselves are not in the dataset)."""
    view = WindowView(WindowEnter(
        run=rows["run"][i], window=rows["window"][i], name=rows["name"][i],
        parent=rows["parent"][i], t_ns=rows["t_enter_ns"][i],
        entry_hash=rows["entry_hash"][i], entry=None, after=rows["after"][i],
        thread=rows["thread"][i] or 0), trace)
    if rows["complete"][i]:
        view.exit = WindowExit(
            run=rows["run"][i], window=rows["window"][i], name=rows["name"][i],
            t_ns=rows["t_exit_ns"][i], status=rows["status"][i],
            exit_hash=rows["exit_hash"][i] or b"", exit=None,
            receipt=rows["receipt"][i] or b"", wall_ns=rows["wall_ns"][i] or 0,
            error_type=rows["error_type"][i], error_message=rows["error_message"][i],
            tool_calls=rows["tool_calls"][i] or 0, llm_calls=rows["llm_calls"][i] or 0,
            input_tokens=rows["input_tokens"][i] or 0,
            output_tokens=rows["output_tokens"][i] or 0, cost=rows["cost"][i],
            selections=rows["selections"][i] or 0)
    return view
