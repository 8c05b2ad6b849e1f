"""The inputs of ``certify``: scores from traces, and their validation."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog.dataset import run_order
from agentlog.records import Score, iter_runs

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
from ._executor import Executor, check_dataset, check_executor, executing, scan
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


def from_traces(paths: TraceInput | Iterable[TraceInput], *, plan: Plan,
                window: str | None = None) -> CertifyData:
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
        paths: trace files, folders (every ``*.zst`` below) or ``Trace`` objects.
        plan: the plan (readouts, select, failure policy, window).
        window: the comparison window (default ``plan.window``); its entries are collected.

    Returns:
        ``CertifyData``; pass it to ``certify.certify`` and its ``entries`` to
        ``certify.admissibility``.

    Warns:
        SharedNoiseWarning: runs of different tasks drew the same noise (recorded with
            generator /1 or /2 under one seed), so the tasks are not independent.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan; found {type(plan).__name__}")
    win = window if window is not None else plan.window
    files = _trace_files(paths)
    hashes = {p: _file_sha256(p) for p, _ in files}
    entries: list[Entry] = []

    channels = _channels(plan)

    def runs() -> Iterator[_Selected]:
        # One pass, one run at a time (agentlog.records.iter_runs): memory holds a run.
        for trace, run in iter_runs([f for _, f in files], name="paths"):
            path = str(trace.path)
            if win is not None and (entry := _run_entry(path, run, win, plan.select)):
                entries.append(entry)
            start = run.start
            if start is None or not plan.matches(start.meta):
                continue
            task, cluster = _task_cluster(start.task, start.meta, path, start.run_id)
            failed = (not run.complete or run.failed
                      or (win is not None and any(w.failed for w in run.windows
                                                  if w.name == win)))
            got: dict[str, list[float]] = {}
            for r in run.records:
                if type(r) is Score and _kept(channels, r.name, r.channel):
                    got.setdefault(r.name, []).append(float(r.value))
            yield _Selected(path, start, task, cluster, failed, got)

    data = _arrange(runs(), plan, hashes, f"{len(files)} trace file(s)")
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
    with executing(how):
        runs = _concat(scan(dataset, "runs", _RUN_COLUMNS, _selected_runs,
                            {"select": dict(plan.select)}, how), _selected_schema)
        # run -> readout -> (seq, value): a run's rows may come in several batches, in any
        # order; seq (a record's place in its run) puts them back in file order.
        values: dict[str, dict[str, list[tuple[int, float]]]] = {}
        for part in scan(dataset, "scores", ["run_id", "seq", "name", "channel", "value"],
                         _readout_values, {"channels": _channels(plan)}, how):
            for run_id, name, seqs, got in zip(*(part.column(c).to_pylist() for c in
                                                 ("run_id", "name", "seqs", "values")),
                                               strict=True):
                values.setdefault(run_id, {}).setdefault(name, []).extend(zip(seqs, got,
                                                                              strict=True))
        failed_window: set[str] = set()
        if win is not None:
            for part in scan(dataset, "windows", ["run_id", "name", "failed"],
                             _failed_runs, {"window": win}, how):
                failed_window.update(part.column("run_id").to_pylist())
    cols = {c: runs.column(c).to_pylist() for c in runs.column_names}
    hashes = dict(zip(cols["source"], cols["source_sha256"], strict=True))
    # The order from_traces reads them in (file by file, each file's runs in order): a
    # task's mean over runs adds them in that order, so both give the same bits.
    order = sorted(range(len(cols["run_id"])),
                   key=lambda i: run_order(cols["source"][i], cols["run"][i]))

    def rows() -> Iterator[_Selected]:
        for i in order:
            if not cols["selected"][i]:
                continue
            if cols["error"][i] is not None:
                raise ValueError(cols["error"][i])
            run_id = cols["run_id"][i]
            start = _Start(run_id, cols["system"][i], cols["task"][i], cols["seed"][i],
                           cols["generator"][i])
            got = {name: [v for _, v in sorted(pairs)]
                   for name, pairs in values.get(run_id, {}).items()}
            yield _Selected(cols["source"][i], start, cols["task"][i], cols["cluster"][i],
                            cols["failed"][i] or run_id in failed_window, got)

    data = _arrange(rows(), plan, hashes, f"the dataset ({len(hashes)} trace file(s))")
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


def _selected_runs(batch: Any, *, select: dict[str, Any]) -> Any:
    """A batch of the ``runs`` table: whether the plan selects each run, and for those it
    selects their task and cluster and whether they failed (did not end, or raised). A
    selected run without a task keeps its message in ``error`` (the driver raises it in
    run order). Every run stays, for its source file's hash."""
    import pyarrow as pa

    cols = {c: batch.column(c).to_pylist() for c in _RUN_COLUMNS}
    rows: dict[str, list[Any]] = {f: [] for f in _selected_schema().names}
    for i, run_id in enumerate(cols["run_id"]):
        meta = json.loads(cols["meta"][i] or "{}")
        selected = _selected(meta, select)
        error = task = cluster = None
        if selected:
            try:
                task, cluster = _task_cluster(cols["task"][i], meta, cols["source"][i],
                                              run_id)
            except ValueError as exc:
                error = str(exc)
        for name, value in (("source", cols["source"][i]), ("run", cols["run"][i]),
                            ("run_id", run_id), ("system", cols["system"][i]),
                            ("task", task), ("seed", cols["seed"][i]),
                            ("generator", cols["generator"][i]), ("cluster", cluster),
                            ("failed", not cols["complete"][i] or cols["status"][i] != 0),
                            ("selected", selected),
                            ("source_sha256", cols["source_sha256"][i]), ("error", error)):
            rows[name].append(value)
    return pa.table(rows, schema=_selected_schema())


def _readout_values(batch: Any, *, channels: dict[str, str | None]) -> Any:
    """Each run's values of each readout in a batch of the ``scores`` table, with their
    ``seq`` (``run_id``, ``name``, ``seqs``, ``values``)."""
    import pyarrow as pa

    got: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for run_id, seq, name, channel, value in zip(
            *(batch.column(c).to_pylist() for c in ("run_id", "seq", "name", "channel",
                                                     "value")), strict=True):
        if _kept(channels, name, channel):
            seqs, values = got.setdefault((run_id, name), ([], []))
            seqs.append(seq)
            values.append(float(value))
    return pa.table({"run_id": pa.array([k[0] for k in got], pa.string()),
                     "name": pa.array([k[1] for k in got], pa.string()),
                     "seqs": pa.array([v[0] for v in got.values()], pa.list_(pa.int64())),
                     "values": pa.array([v[1] for v in got.values()],
                                        pa.list_(pa.float64()))})


def _failed_runs(batch: Any, *, window: str) -> Any:
    """The runs whose comparison window failed, in a batch of the ``windows`` table."""
    import pyarrow as pa

    ids = [r for r, n, f in zip(*(batch.column(c).to_pylist()
                                  for c in ("run_id", "name", "failed")), strict=True)
           if n == window and f]
    return pa.table({"run_id": pa.array(ids, pa.string())})


def _concat(parts: Iterable[Any], schema: Callable[[], Any]) -> Any:
    import pyarrow as pa

    return pa.concat_tables([schema().empty_table(), *parts])


class _Start(NamedTuple):
    """A dataset row's ``RunStart`` fields that ``_arrange`` reads."""

    run_id: str
    system: str
    task: str | None
    seed: int
    generator: str


class _Selected(NamedTuple):
    """A run the plan selects, after the per-run stage (from a trace or a dataset)."""

    path: str  # its trace file
    start: Any  # the RunStart (or a dataset row with the fields _Start names)
    task: str
    cluster: str  # meta["cluster"], default the task
    failed: bool  # did not end, raised, or its comparison window failed
    got: dict[str, list[float]]  # readout -> its values in the run, in file order


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


def _arrange(runs: Iterable[_Selected], plan: Plan, hashes: dict[str, str],
             where: str) -> CertifyData:
    """The per-cluster arrangement of per-run readouts (``from_traces`` documents it);
    ``entries`` is left None."""
    readouts = plan.readout_names
    # (system, task) -> list of per-run readout vectors (None = failed run)
    cells: dict[tuple[str, str], list[FloatArray | None]] = {}
    cluster_of: dict[str, str] = {}
    n_runs = n_failed = 0
    shared = SharedNoise()
    for path, start, task, cluster, failed, got in runs:
        if cluster_of.setdefault(task, cluster) != cluster:
            raise ValueError(f"{path}: task {task!r} is in cluster {cluster!r} here but in "
                             f"{cluster_of[task]!r} in another run; a task has one cluster")
        n_runs += 1
        if failed:
            n_failed += 1
            vec: FloatArray | None = None
        else:
            missing = [n for n in readouts if n not in got]
            if missing:
                raise ValueError(
                    f"{path}: run {start.run_id} (system {start.system!r}, task {task!r}) "
                    f"ended normally but has no score for readout(s) {missing}; record "
                    "them with al.score(...) or remove them from the plan")
            vec = np.array([np.mean(got[n]) for n in readouts])
            if not np.isfinite(vec).all():
                raise ValueError(f"{path}: run {start.run_id} scored a non-finite value "
                                 f"({dict(zip(readouts, vec.tolist(), strict=True))})")
        cells.setdefault((start.system, task), []).append(vec)
        shared.add(start, task)
    if not cells:
        sel = f" matching select = {dict(plan.select)}" if plan.select else ""
        raise ValueError(f"no run{sel} in {where}")
    shared.warn(stacklevel=3)  # the caller of from_traces / from_dataset
    systems = tuple(sorted({s for s, _ in cells}))
    tasks = tuple(sorted({t for _, t in cells}))
    tindex = {t: i for i, t in enumerate(tasks)}
    bottom = (np.array([plan.failure_value(n) for n in readouts])
              if plan.failure.policy == "score" else None)
    scores = {s: np.full((len(tasks), len(readouts)), np.nan) for s in systems}
    present = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    failed_mask = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    for (s, t), vecs in cells.items():
        i = tindex[t]
        present[s][i] = True
        ok = [v for v in vecs if v is not None]
        if bottom is not None:
            scores[s][i] = np.mean([v if v is not None else bottom for v in vecs], axis=0)
        elif ok:
            scores[s][i] = np.mean(ok, axis=0)
        else:
            failed_mask[s][i] = True
    return CertifyData(systems=systems, tasks=tasks,
                       clusters=tuple(cluster_of[t] for t in tasks), readouts=readouts,
                       scores=scores, present=present, failed=failed_mask, entries=None,
                       input_hashes=hashes, n_runs=n_runs, n_failed_runs=n_failed)



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

