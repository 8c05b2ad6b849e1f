"""The inputs of ``certify``: scores from traces, and their validation."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog.deprecation import renamed_argument
from agentlog.records import RunStart, Score, iter_runs

from ._admissibility import (
    Entry,
    EntryTable,
    TraceInput,
    _file_sha256,
    _run_entry,
    _selected,
    _task_of,
    _trace_files,
)
from ._executor import (
    Executor,
    check_dataset,
    check_executor,
    coded,
    executing,
    in_run_order,
    plain,
    scan,
    with_rows,
)
from ._plan import Plan
from ._radius import _cluster_codes
from ._shared_noise import SharedNoise

__all__ = [
    "CertifyData",
    "from_dataset",
    "from_traces",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


@dataclass(frozen=True, eq=False)
class CertifyData:
    """Scores and entries of a set of traces, arranged for ``certify`` and ``admissibility``.

    Attributes:
        systems: the systems (sorted).
        tasks: the tasks (sorted); every array's task axis follows it.
        clusters: the cluster of each task (``meta["cluster"]``, default the task).
        readouts: the plan's readouts (the column order of ``scores``).
        scores: ``system -> (n_tasks, n_readouts)`` mean score over the system's runs of
            the task (NaN where the system has no run, or failed every run under ``drop``).
        present: ``system -> bool (n_tasks,)``: the system ran the task.
        failed: ``system -> bool (n_tasks,)``: every run failed (declared failure exit).
        entries: the sealed entries of the plan's window (``None`` without a window).
        input_hashes: ``path -> SHA-256`` of every input trace file.
        n_runs: runs used; n_failed_runs: of which failed.
    """

    systems: tuple[str, ...]
    tasks: tuple[str, ...]
    clusters: tuple[str, ...]
    readouts: tuple[str, ...]
    scores: dict[str, FloatArray]
    present: dict[str, BoolArray]
    failed: dict[str, BoolArray]
    entries: EntryTable | None
    input_hashes: dict[str, str]
    n_runs: int
    n_failed_runs: int


def from_traces(source: TraceInput | Iterable[TraceInput] | None = None, *, plan: Plan,
                window: str | None = None, **legacy: Any) -> CertifyData:
    """Build ``certify``'s inputs from recorded traces.

    Runs are grouped by ``system`` (``al.record(system=)``), ``task`` and cluster
    (``meta["cluster"]``, default the task); only runs matching ``plan.select`` are used. A
    readout's value in a run is the mean of that run's ``Score`` records of that name (and
    channel, when the plan names one); a task's value is the mean over the system's runs.
    A run failed when it did not end, ended with an exception, or its comparison window
    failed (⊥): under ``failure.policy = "drop"`` failed runs are left out and a task fails
    when every run did; under ``"score"`` a failed run scores the declared ⊥ value. A run
    that ended normally but lacks a readout is an error.

    Args:
        source: trace files, folders (every ``*.zst`` below) or ``Trace`` objects.
        plan: the plan (readouts, select, failure policy, window).
        window: the comparison window (default ``plan.window``); its entries are collected.
        **legacy: ``paths=`` (the old name of ``source``) works for one release, with a
            ``DeprecationWarning``.

    Returns:
        ``CertifyData``; pass it to ``certify.certify`` and its ``entries`` to
        ``certify.admissibility``.

    Warns:
        SharedNoiseWarning: runs of different tasks drew the same noise (recorded with
            generator /1 or /2 under one seed), so the tasks are not independent.
    """
    source = renamed_argument("certify.from_traces", source, legacy, old="paths", new="source")
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan; found {type(plan).__name__}")
    win = window if window is not None else plan.window
    files = _trace_files(source)
    hashes = {p: _file_sha256(p) for p, _ in files}
    entries: list[Entry] = []

    channels = _channels(plan)
    readouts = plan.readout_names
    cols = _Builder(len(readouts))
    shared = SharedNoise()
    # One pass, one run at a time (agentlog.records.iter_runs): memory holds a run, and
    # a selected run's columns (its readouts as floats, its labels as codes).
    for trace, run in iter_runs([f for _, f in files], name="source"):
        path = str(trace.path)
        if win is not None and (entry := _run_entry(path, run, win, plan.select)):
            entries.append(entry)
        start = run.start
        if start is None or not plan.matches(start.meta):
            continue
        try:
            task, cluster = _task_cluster(start.task, start.meta, path, start.run_id)
        except ValueError as exc:  # raised in run order with the other problems
            cols.error(str(exc))
            continue
        failed = (not run.complete or run.failed
                  or (win is not None and any(w.failed for w in run.windows
                                              if w.name == win)))
        got: dict[str, list[float]] = {}
        for r in run.records:
            if type(r) is Score and _kept(channels, r.name, r.channel):
                got.setdefault(r.name, []).append(float(r.value))
        cols.add(path, start.run_id, start.system, task, cluster, failed,
                 [float(np.mean(got[n])) if n in got else math.nan for n in readouts],
                 [n in got for n in readouts])
        shared.add(start, task)
    data = _arrange(cols.columns(), plan, hashes, f"{len(files)} trace file(s)", shared)
    table = (EntryTable(window=win, entries=tuple(entries), input_hashes=dict(hashes))
             if win is not None else None)
    return dataclasses.replace(data, entries=table)


def from_dataset(dataset: str | os.PathLike[str] | Mapping[str, Any], *, plan: Plan,
                 window: str | None = None, entries: EntryTable | None = None,
                 executor: Executor = "local") -> CertifyData:
    """Build ``certify``'s inputs from a Parquet dataset (``agentlog export --format
    parquet``): the same ``CertifyData`` as ``from_traces`` of the traces it was exported
    from, computed from its ``runs``, ``scores`` and ``windows`` tables. Runs are taken
    in the order of their source paths (as ``from_traces`` reads a folder), so a task's
    mean over runs is the same to the last bit.

    The per-run stage (each run's selection, task and cluster from ``runs``; its readout
    values from ``scores``; its failed comparison window from ``windows``) runs over
    batches of rows, the whole table at once locally or each block under Ray; the driver
    merges the runs in order and arranges them per cluster as ``from_traces`` does.

    Args:
        dataset: the dataset folder, or its tables already selected (e.g. filtered in
            SQL): ``{"runs": ..., "scores": ..., "windows": ...}`` as pyarrow tables or
            DuckDB relations (``windows`` only with a window).
        plan: the plan, as for ``from_traces``.
        window: the comparison window (default ``plan.window``).
        entries: the window's sealed entries (``EntryTable.from_traces(traces,
            window=...)``). A dataset keeps entry hashes, not entries, and admissibility
            reads the entries: with a window they must be given.
        executor: ``"local"``, or ``"ray"`` to run the per-run stage with Ray Data
            (``ray.data.read_parquet`` of each table; ``dataset`` must then be a folder
            every node reads, or an ``s3://`` URI). Same result, bit for bit.

    Raises:
        ValueError: as ``from_traces``; or a window without ``entries``.
        MissingDependencyError: ``executor="ray"`` without Ray (``pip install
            'agentlog[ray]'``).
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan; found {type(plan).__name__}")
    how = check_executor(executor)
    check_dataset(dataset, how)
    win = window if window is not None else plan.window
    if win is not None and entries is None:
        raise ValueError(
            f"the comparison window {win!r} makes admissibility read each run's sealed "
            "entry, which a Parquet dataset does not hold; pass entries=certify.EntryTable."
            f"from_traces(traces, window={win!r}), or certify from the traces")
    import pyarrow as pa
    import pyarrow.compute as pc

    with executing(how):
        runs = pa.concat_tables([_selected_schema().empty_table(), *(plain(p) for p in scan(
            dataset, "runs", _RUN_COLUMNS, _selected_runs, {"select": dict(plan.select)},
            how))])
        values = pa.concat_tables([_values_schema().empty_table(), *(plain(p) for p in scan(
            dataset, "scores", ["run_id", "seq", "name", "channel", "value"],
            _readout_values, {"channels": _channels(plan)}, how))])
        failed_window = pa.concat_tables([pa.schema([("run_id", pa.string())]).empty_table(),
                                          *(plain(p) for p in scan(
                                              dataset, "windows", ["run_id", "name", "failed"],
                                              _failed_runs, {"window": win}, how))]
                                         ) if win is not None else None
    pairs = runs.group_by(["source", "source_sha256"], use_threads=False).aggregate([])
    hashes = dict(zip(pairs.column("source").to_pylist(),
                      pairs.column("source_sha256").to_pylist(), strict=True))
    # The order from_traces reads them in (file by file, each file's runs in order): a
    # task's mean over runs adds them in that order, so both give the same bits.
    runs = runs.take(in_run_order(runs))
    runs = runs.filter(runs.column("selected"))
    failed = runs.column("failed").to_numpy(zero_copy_only=False)
    if failed_window is not None:
        failed = failed | pc.is_in(runs.column("run_id"),
                                   value_set=failed_window.column("run_id")).to_numpy(
                                       zero_copy_only=False)
    y, has = _readouts(runs, values, plan.readout_names)
    shared = SharedNoise()
    seeds = runs.select(["seed", "generator", "task"]).append_column(
        "i", pa.array(np.arange(runs.num_rows, dtype=np.int64)))
    firsts = seeds.group_by(["seed", "generator", "task"], use_threads=False).aggregate(
        [("i", "min")])
    firsts = firsts.take(pc.sort_indices(firsts, [("i_min", "ascending")]))
    for seed, generator, task in zip(*(firsts.column(c).to_pylist()
                                       for c in ("seed", "generator", "task")), strict=True):
        if task is not None:  # a run without one is an error below
            shared.add(cast(RunStart, _Start("", "", task, seed, generator)), task)
    errors = pc.indices_nonzero(pc.is_valid(runs.column("error"))).to_numpy()
    columns = _Columns(
        paths=runs.column("source"), run_ids=runs.column("run_id"),
        system=coded(runs.column("system")), task=coded(runs.column("task")),
        cluster=coded(runs.column("cluster")), failed=failed, y=y, has=has,
        error_rows=errors, errors=runs.column("error"))
    data = _arrange(columns, plan, hashes, f"the dataset ({len(hashes)} trace file(s))",
                    shared)
    return dataclasses.replace(data, entries=entries)


# --------------------------------------------------------------- the per-run stage of a dataset

_RUN_COLUMNS = ["run_id", "system", "task", "seed", "generator", "meta", "complete", "status",
                "source", "source_sha256", "run"]


def _selected_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("source", pa.string()), ("run", pa.int64()), ("run_id", pa.string()),
                      ("system", pa.string()), ("task", pa.string()), ("seed", pa.int64()),
                      ("generator", pa.string()), ("cluster", pa.string()),
                      ("failed", pa.bool_()), ("selected", pa.bool_()),
                      ("source_sha256", pa.string()), ("error", pa.string())])


def _values_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("run_id", pa.string()), ("seq", pa.int64()), ("name", pa.string()),
                      ("value", pa.float64())])


def _selected_runs(batch: Any, *, select: dict[str, Any]) -> Any:
    """A batch of the ``runs`` table: whether the plan selects each run, and for those it
    selects their cluster (``meta["cluster"]``, default the task) and whether they failed
    (did not end, or raised). A selected run without a task keeps its message in ``error``
    (the driver raises it in run order). Every run stays, for its source file's hash.

    Columns, not rows: each distinct ``meta`` text is parsed once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = plain(batch)
    meta = pc.dictionary_encode(pc.fill_null(batch.column("meta"), "{}")).combine_chunks()
    parsed = [json.loads(m or "{}") for m in meta.dictionary.to_pylist()]
    codes = meta.indices
    selected = pa.array([_selected(m, select) for m in parsed], pa.bool_()).take(codes)
    named = pa.array([str(m["cluster"]) if "cluster" in m else None for m in parsed],
                     pa.string()).take(codes)
    task = batch.column("task")
    error = pa.nulls(batch.num_rows, pa.string())
    no_task = pc.and_(selected, pc.is_null(task)).to_numpy(zero_copy_only=False)
    if no_task.any():  # rare: each message names its run
        messages: list[str | None] = [None] * batch.num_rows
        for i in np.flatnonzero(no_task):
            try:
                _task_of(None, batch.column("source")[i].as_py(),
                         batch.column("run_id")[i].as_py())
            except ValueError as exc:
                messages[i] = str(exc)
        error = pa.array(messages, pa.string())
    failed = pc.or_(pc.invert(batch.column("complete")),
                    pc.not_equal(batch.column("status"), 0))
    return pa.table({"source": batch.column("source"), "run": batch.column("run"),
                     "run_id": batch.column("run_id"), "system": batch.column("system"),
                     "task": task, "seed": batch.column("seed"),
                     "generator": batch.column("generator"),
                     "cluster": pc.if_else(selected, pc.coalesce(named, task), None),
                     "failed": failed, "selected": selected,
                     "source_sha256": batch.column("source_sha256"), "error": error},
                    schema=_selected_schema())


def _readout_values(batch: Any, *, channels: dict[str, str | None]) -> Any:
    """The rows of a batch of the ``scores`` table that are values of the plan's readouts
    (``run_id``, ``seq``, ``name``, ``value``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = plain(batch)
    name, channel = batch.column("name"), batch.column("channel")
    kept = pa.array(np.zeros(batch.num_rows, dtype=bool))
    for readout, wanted in channels.items():
        match = pc.equal(name, readout)
        if wanted is not None:
            match = pc.and_(match, pc.equal(channel, wanted))
        kept = pc.or_(kept, pc.fill_null(match, False))
    return batch.filter(kept).select(["run_id", "seq", "name", "value"]).cast(
        _values_schema())


def _failed_runs(batch: Any, *, window: str) -> Any:
    """The runs whose comparison window failed, in a batch of the ``windows`` table."""
    import pyarrow.compute as pc

    batch = plain(batch)
    failed = pc.and_(pc.equal(batch.column("name"), window), batch.column("failed"))
    return batch.filter(pc.fill_null(failed, False)).select(["run_id"])


def _readouts(runs: Any, values: Any, readouts: tuple[str, ...]
              ) -> tuple[FloatArray, BoolArray]:
    """Per run of ``runs`` and readout: the mean of the run's values in file order (``seq``)
    (``np.mean`` of them, as ``from_traces`` takes it), and whether it has any."""
    import pyarrow.compute as pc

    y = np.full((runs.num_rows, len(readouts)), np.nan)
    has = np.zeros(y.shape, dtype=bool)
    joined = with_rows(values, runs)
    for j, name in enumerate(readouts):
        one = joined.filter(pc.equal(joined.column("name"), name))
        one = one.take(pc.sort_indices(one, [("row", "ascending"), ("seq", "ascending")]))
        row = one.column("row").to_numpy()
        value = one.column("value").to_numpy()
        first, starts, counts = np.unique(row, return_index=True, return_counts=True)
        single = counts == 1  # the mean of one value is the value, bit for bit
        y[first[single], j] = value[starts[single]]
        for r, lo, n in zip(first[~single], starts[~single], counts[~single], strict=True):
            y[r, j] = np.mean(np.array(value[lo:lo + n]))
        has[first, j] = True
    return y, has


def _channels(plan: Plan) -> dict[str, str | None]:
    """``readout -> the channel its scores must carry`` (None: any)."""
    return {name: ro.channel for name, ro in plan.readouts.items()}


def _kept(channels: Mapping[str, str | None], name: str, channel: str | None) -> bool:
    """Whether a Score of ``name`` on ``channel`` is a value of one of the plan's readouts."""
    if name not in channels:
        return False
    wanted = channels[name]
    return wanted is None or channel == wanted


def _task_cluster(task: str | None, meta: Mapping[str, Any], path: str, run_id: str
                  ) -> tuple[str, str]:
    """A selected run's task (required) and cluster (``meta["cluster"]``, default the task)."""
    label = _task_of(task, path, run_id)
    return label, str(meta.get("cluster", label))


class _Start(NamedTuple):
    """A dataset row's ``RunStart`` fields that ``SharedNoise`` reads."""

    run_id: str
    system: str
    task: str | None
    seed: int
    generator: str


# ----------------------------------------------------------------- runs arranged per cluster


class _Columns(NamedTuple):
    """The runs a plan selects, in run order, as columns (from traces or a dataset)."""

    paths: Any  # per run: its trace file (indexable)
    run_ids: Any  # per run: its run_id (indexable)
    system: tuple[list[Any], IntArray]  # distinct values, each run's code
    task: tuple[list[Any], IntArray]
    cluster: tuple[list[Any], IntArray]
    failed: BoolArray  # did not end, raised, or its comparison window failed
    y: FloatArray  # (runs, readouts): each readout's mean over the run's values
    has: BoolArray  # (runs, readouts): the run has a value of the readout
    error_rows: IntArray  # runs the plan cannot take (no task), in order
    errors: Any  # their messages, by run (indexable)


class _Builder:
    """``_Columns`` built a run at a time (``from_traces``)."""

    def __init__(self, n_readouts: int) -> None:
        self.paths: list[str] = []
        self.run_ids: list[str] = []
        self.labels: tuple[dict[str, int], dict[str, int], dict[str, int]] = ({}, {}, {})
        self.codes: tuple[list[int], list[int], list[int]] = ([], [], [])
        self.failed: list[bool] = []
        self.y: list[list[float]] = []
        self.has: list[list[bool]] = []
        self.errors: dict[int, str] = {}  # row -> why the plan cannot take that run
        self.width = n_readouts

    def error(self, message: str) -> None:
        """A run the plan cannot take (no task): its message, raised if no problem of an
        earlier run is; the run holds a row of no task."""
        self.errors[len(self.paths)] = message
        self.add("", "", "", "", "", True, [math.nan] * self.width, [False] * self.width)

    def add(self, path: str, run_id: str, system: str, task: str, cluster: str,
            failed: bool, y: list[float], has: list[bool]) -> None:
        self.paths.append(path)
        self.run_ids.append(run_id)
        for labels, codes, value in zip(self.labels, self.codes, (system, task, cluster),
                                        strict=True):
            codes.append(labels.setdefault(value, len(labels)))
        self.failed.append(failed)
        self.y.append(y)
        self.has.append(has)

    def columns(self) -> _Columns:
        coded = [(list(labels), np.array(codes, dtype=np.intp))
                 for labels, codes in zip(self.labels, self.codes, strict=True)]
        return _Columns(
            paths=self.paths, run_ids=self.run_ids, system=coded[0], task=coded[1],
            cluster=coded[2], failed=np.array(self.failed, dtype=bool),
            y=np.array(self.y, dtype=np.float64).reshape(-1, self.width),
            has=np.array(self.has, dtype=bool).reshape(-1, self.width),
            error_rows=np.array(sorted(self.errors), dtype=np.intp),
            errors=[self.errors.get(i) for i in range(len(self.paths))])


def _first_problem(c: _Columns, readouts: tuple[str, ...]) -> str | None:
    """The message of the first run (in run order) the plan cannot take: no task, a task in
    two clusters, a readout missing from a run that ended normally, a non-finite value."""
    tasks, task = c.task
    clusters, cluster = c.cluster
    n = len(task)
    first_of_task = np.full(len(tasks), -1, dtype=np.intp)
    _, firsts = np.unique(task, return_index=True)
    first_of_task[task[firsts]] = cluster[firsts]
    moved = (cluster != first_of_task[task]) if n else np.zeros(0, dtype=bool)
    missing = ~c.failed & ~c.has.all(axis=1)
    with np.errstate(invalid="ignore"):
        bad = ~c.failed & c.has.all(axis=1) & ~np.isfinite(c.y).all(axis=1)
    flagged = np.flatnonzero(moved | missing | bad)
    candidates = [int(flagged[0])] if flagged.size else []
    if len(c.error_rows):
        candidates.append(int(c.error_rows[0]))
    if not candidates:
        return None
    i = min(candidates)
    if len(c.error_rows) and i == int(c.error_rows[0]):
        return str(_item(c.errors, i))
    path, run_id = _item(c.paths, i), _item(c.run_ids, i)
    t = tasks[task[i]]
    if moved[i]:
        return (f"{path}: task {t!r} is in cluster {clusters[cluster[i]]!r} here but in "
                f"{clusters[first_of_task[task[i]]]!r} in another run; a task has one cluster")
    system = c.system[0][c.system[1][i]]
    if missing[i]:
        names = [r for r, h in zip(readouts, c.has[i], strict=True) if not h]
        return (f"{path}: run {run_id} (system {system!r}, task {t!r}) ended normally but "
                f"has no score for readout(s) {names}; record them with al.score(...) or "
                "remove them from the plan")
    return (f"{path}: run {run_id} scored a non-finite value "
            f"({dict(zip(readouts, c.y[i].tolist(), strict=True))})")


def _item(column: Any, i: int) -> Any:
    value = column[i]
    return value.as_py() if hasattr(value, "as_py") else value


def _arrange(c: _Columns, plan: Plan, hashes: dict[str, str], where: str,
             shared: SharedNoise) -> CertifyData:
    """The per-cluster arrangement of per-run readouts (``from_traces`` documents it);
    ``entries`` is left None. A cell's (system, task) mean adds its runs' readout rows in
    run order (``np.mean`` over them), whichever path built the columns."""
    readouts = plan.readout_names
    problem = _first_problem(c, readouts)
    if problem is not None:
        raise ValueError(problem)
    n_runs = len(c.failed)
    if not n_runs:
        sel = f" matching select = {dict(plan.select)}" if plan.select else ""
        raise ValueError(f"no run{sel} in {where}")
    shared.warn(stacklevel=3)  # the caller of from_traces / from_dataset
    (system_labels, system), (task_labels, task) = c.system, c.task
    systems = tuple(sorted({system_labels[k] for k in np.unique(system)}))
    tasks = tuple(sorted({task_labels[k] for k in np.unique(task)}))
    s_rank = np.array([systems.index(v) if v in systems else -1 for v in system_labels],
                      dtype=np.intp)
    tindex = {t: i for i, t in enumerate(tasks)}
    t_rank = np.array([tindex.get(v, -1) for v in task_labels], dtype=np.intp)
    cluster_of = {task_labels[k]: c.cluster[0][c.cluster[1][i]]
                  for k, i in zip(*np.unique(task, return_index=True), strict=True)}
    bottom = (np.array([plan.failure_value(n) for n in readouts])
              if plan.failure.policy == "score" else None)
    scores = {s: np.full((len(tasks), len(readouts)), np.nan) for s in systems}
    present = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    failed_mask = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    key = s_rank[system] * len(tasks) + t_rank[task]
    order = np.argsort(key, kind="stable")  # each cell's runs stay in run order
    keys, starts = np.unique(key[order], return_index=True)
    for k, lo, hi in zip(keys, starts, [*starts[1:], n_runs], strict=True):
        s, i = systems[k // len(tasks)], int(k % len(tasks))
        rows = order[lo:hi]
        failed = c.failed[rows]
        present[s][i] = True
        if bottom is not None:
            vecs = c.y[rows]
            vecs[failed] = bottom
            scores[s][i] = np.mean(vecs, axis=0)
        elif not failed.all():
            scores[s][i] = np.mean(c.y[rows[~failed]], axis=0)
        else:
            failed_mask[s][i] = True
    return CertifyData(systems=systems, tasks=tasks,
                       clusters=tuple(cluster_of[t] for t in tasks), readouts=readouts,
                       scores=scores, present=present, failed=failed_mask, entries=None,
                       input_hashes=hashes, n_runs=n_runs,
                       n_failed_runs=int(c.failed.sum()))


@dataclass(frozen=True)
class _Inputs:
    systems: tuple[str, ...]
    y: FloatArray  # (S, N, R) raw scores
    present: BoolArray  # (S, N)
    failed: BoolArray  # (S, N)
    clusters: tuple[str, ...]  # unique labels
    codes: IntArray  # (N,)
    tasks: tuple[str, ...]
    input_hashes: dict[str, str]
    entries: EntryTable | None


def _system_matrix(system: str, value: Any, readouts: tuple[str, ...]) -> FloatArray:
    if isinstance(value, Mapping):
        extra = [k for k in value if k not in readouts]
        missing = [k for k in readouts if k not in value]
        if missing or extra:
            raise ValueError(f"`scores[{system!r}]` must map exactly the plan's readouts "
                             f"{list(readouts)}; missing {missing}, unknown {extra}")
        cols = [np.asarray(value[k], dtype=np.float64) for k in readouts]
        if any(c.ndim != 1 for c in cols) or len({c.shape for c in cols}) != 1:
            raise ValueError(f"`scores[{system!r}]` must hold one 1-D array per readout, all "
                             "of the same length")
        return np.column_stack(cols)
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`scores[{system!r}]` must be an array of numbers; {exc}") from None
    if arr.ndim == 1 and len(readouts) == 1:
        return arr[:, None]
    if arr.ndim == 2 and arr.shape[1] == len(readouts):
        return arr
    raise ValueError(f"`scores[{system!r}]` must have shape (n_tasks, {len(readouts)}) — one "
                     f"column per readout {list(readouts)}"
                     + (" — or (n_tasks,)" if len(readouts) == 1 else "")
                     + f"; found shape {arr.shape}")


def _mask(name: str, value: Mapping[str, ArrayLike] | None, systems: tuple[str, ...], n: int,
          default: bool) -> BoolArray:
    out = np.full((len(systems), n), default)
    if value is None:
        return out
    if not isinstance(value, Mapping):
        raise ValueError(f"`{name}` must map system -> boolean array over tasks")
    for k in value:
        if k not in systems:
            raise ValueError(f"`{name}` names system {k!r}, which has no scores")
    for i, s in enumerate(systems):
        if s in value:
            arr = np.asarray(value[s])
            if arr.shape != (n,) or arr.dtype != np.bool_:
                raise ValueError(f"`{name}[{s!r}]` must be a boolean array of shape ({n},); "
                                 f"found {arr.dtype} {arr.shape}")
            out[i] = arr
    return out


def _certify_iv(scores: Any, clusters: Any, plan: Any, tasks: Any, present: Any, failed: Any,
                input_hashes: Any) -> _Inputs:
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan (Plan.from_toml(...)); found "
                        f"{type(plan).__name__}")
    readouts = plan.readout_names
    entries: EntryTable | None = None
    if isinstance(scores, CertifyData):
        for name, v in (("clusters", clusters), ("tasks", tasks), ("present", present),
                        ("failed", failed), ("input_hashes", input_hashes)):
            if v is not None:
                raise ValueError(f"`{name}` comes from the CertifyData; do not pass it too")
        if scores.readouts != readouts:
            raise ValueError(f"the CertifyData holds readouts {list(scores.readouts)} but the "
                             f"plan names {list(readouts)}; rebuild it with this plan")
        data = scores
        scores, clusters, tasks = data.scores, list(data.clusters), list(data.tasks)
        present, failed, input_hashes = data.present, data.failed, data.input_hashes
        entries = data.entries
    if not isinstance(scores, Mapping) or len(scores) < 2:
        raise ValueError("`scores` must map at least two systems to their scores over tasks")
    systems = tuple(str(s) for s in scores)
    mats = [_system_matrix(s, scores[s], readouts) for s in systems]
    n = mats[0].shape[0]
    for s, m in zip(systems, mats, strict=True):
        if m.shape[0] != n:
            raise ValueError(f"`scores[{s!r}]` has {m.shape[0]} tasks but "
                             f"`scores[{systems[0]!r}]` has {n}; every system's array runs "
                             "over the same tasks (mark absent ones in `present`)")
    if n == 0:
        raise ValueError("`scores` holds no task")
    if clusters is None:
        raise ValueError("`clusters` is required: one cluster label per task (the task "
                         "itself when tasks are independent)")
    uniq, codes = _cluster_codes(clusters, "clusters", n)
    task_labels = tuple(str(t) for t in tasks) if tasks is not None else tuple(
        str(i) for i in range(n))
    if len(task_labels) != n or len(set(task_labels)) != n:
        raise ValueError(f"`tasks` must hold {n} unique labels; found {len(task_labels)} "
                         f"({len(set(task_labels))} unique)")
    pres = _mask("present", present, systems, n, True)
    fail = _mask("failed", failed, systems, n, False)
    y = np.stack(mats)
    used = pres & ~fail
    bad = used[:, :, None] & ~np.isfinite(y)
    if bad.any():
        si, ti, ri = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(
            f"`scores[{systems[si]!r}]` is {y[si, ti, ri]} at task {task_labels[ti]!r} (readout "
            f"`{readouts[ri]}`); a score must be finite. Mark a failed task in `failed` or an "
            "absent one in `present` — a NaN is never read as either")
    return _Inputs(systems, y, pres, fail, tuple(uniq), codes, task_labels,
                   dict(input_hashes or {}), entries)


def _scores_hash(inp: _Inputs, readouts: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (inp.systems, inp.tasks, readouts, tuple(inp.clusters[c] for c in inp.codes)):
        h.update(repr(part).encode())
    for arr in (np.where(inp.present[:, :, None] & ~inp.failed[:, :, None], inp.y, 0.0),
                inp.present, inp.failed):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()

