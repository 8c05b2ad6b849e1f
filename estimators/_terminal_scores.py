"""Each run's terminal scores, from a Parquet dataset ([DMC] §4.4: one score per run).

A run's terminal score of a name is its last ``Score`` record of that name that is not tied
to a transition (a run-level or window-level readout; the channel readouts of a
transition's states belong to ``asv``): what ``agentlog estimate reliability`` summarises.
``terminal_table`` reads them from the ``runs`` and ``scores`` tables of ``agentlog export
--format parquet`` without opening a trace, as columns: its per-run stage (each run's last
value and count per name) is a group-by over batches of the ``scores`` table (the whole
table locally, each Ray Data block under ``executor="ray"``), merged by ``seq`` (a record's
place in its run), so the order batches come in does not matter. No Python object is made
per run, so it holds 10⁷ runs in a few GB. ``from_dataset`` gives the same as one
``TerminalScores`` per run.

Examples:
    >>> import agentlog as al
    >>> from agentlog.dataset import to_parquet
    >>> from agentlog.estimators import reliability
    >>> with al.record("agentlog-terminal-doc.zst", seed=1, system="a", task="t1",
    ...                mode="w"):
    ...     al.score("f1", 0.25)
    ...     al.score("f1", 0.5)
    >>> _ = to_parquet("agentlog-terminal-doc.zst", "agentlog-terminal-doc")
    >>> (run,) = reliability.from_dataset("agentlog-terminal-doc")
    >>> run.system, run.values["f1"], run.counts["f1"]
    ('a', 0.5, 2)
    >>> table = reliability.terminal_table("agentlog-terminal-doc")
    >>> table.names(), table.values("f1")
    ({'f1': 1}, (array([0.5]), array([2])))
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentlog.display import MAX_ROWS, html_repr, render_table

from ._executor import (
    Executor,
    as_is,
    check_dataset,
    check_executor,
    coded,
    executing,
    in_run_order,
    plain,
    scan,
    with_rows,
)

__all__ = ["TerminalScores", "TerminalTable", "from_dataset", "terminal_table"]

_RUN_COLUMNS = ["source", "run", "run_id", "system", "task", "seed", "meta"]


@dataclass(frozen=True, slots=True)
class TerminalScores:
    """One run of a dataset and its terminal scores.

    Attributes:
        path: the run's trace file (the ``runs`` table's ``source``).
        run: the run's index in that file.
        run_id, system, task, seed: the run's ``RunStart`` fields.
        meta: the run's ``meta``.
        values: ``name -> value`` of the run's last terminal Score of each name.
        counts: ``name ->`` how many terminal Scores of that name the run records.
    """

    path: str
    run: int
    run_id: str
    system: str
    task: str | None
    seed: int
    meta: dict[str, Any] = field(repr=False)
    values: dict[str, float]
    counts: dict[str, int]


@dataclass(frozen=True)
class TerminalTable:
    """A dataset's runs and their terminal scores, as columns (``terminal_table``).

    Attributes:
        runs: a pyarrow table of the runs in the order ``agentlog estimate reliability``
            reads the traces the dataset was exported from (by source file, then run):
            ``source``, ``run``, ``run_id``, ``system``, ``task``, ``seed``, ``meta``
            (JSON text).
        scores: a pyarrow table of each run's terminal score per name: ``row`` (the run's
            row in ``runs``), ``name``, ``value`` (its last Score of that name), ``count``
            (how many it records); sorted by ``row``, then ``name``.
    """

    runs: Any = field(repr=False)
    scores: Any = field(repr=False)

    def __len__(self) -> int:
        return int(self.runs.num_rows)

    def names(self) -> dict[str, int]:
        """``{score name: runs recording it}``, by name."""
        import pyarrow.compute as pc

        counts = pc.value_counts(self.scores.column("name"))
        got = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(),
                       strict=True))
        return dict(sorted(got.items()))

    def coded(self, column: str) -> tuple[list[Any], NDArray[np.intp]]:
        """Column ``column`` of ``runs`` as its distinct values and each run's code into
        them (one Python object per distinct value, however many runs)."""
        return coded(self.runs.column(column))

    def values(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per run (in ``runs``' order): its terminal score ``name`` (NaN when it records
        none) and how many such Scores it records (0 when none)."""
        import pyarrow.compute as pc

        got = self.scores.filter(pc.equal(self.scores.column("name"), name))
        value = np.full(len(self), np.nan)
        count = np.zeros(len(self), np.int64)
        rows = got.column("row").to_numpy()
        value[rows] = got.column("value").to_numpy()
        count[rows] = got.column("count").to_numpy()
        return value, count

    @html_repr
    def _repr_html_(self) -> str:
        names = self.names()
        runs = self.runs.slice(0, MAX_ROWS).select(_RUN_COLUMNS[:-1]).to_pylist()
        return render_table(["score", "runs recording it"], names.items(),
                            caption=f"Terminal scores of {len(self)} runs ([DMC] §4.4)",
                            total=len(names)) + render_table(
            _RUN_COLUMNS[:-1], ([r[c] for c in _RUN_COLUMNS[:-1]] for r in runs),
            caption="Runs, in the order the estimators read them", total=len(self))


def terminal_table(dataset: str | os.PathLike[str] | Mapping[str, Any], *,
                   executor: Executor = "local") -> TerminalTable:
    """Every run of a Parquet dataset with its terminal scores, as columns.

    Args:
        dataset: the dataset folder (``agentlog export --format parquet``), or its
            ``{"runs": ..., "scores": ...}`` tables as pyarrow tables or DuckDB relations.
        executor: ``"local"``, or ``"ray"`` to run the per-run stage with Ray Data
            (``dataset`` must then be a folder every node reads, or an ``s3://`` URI). The
            same table either way.

    Raises:
        ValueError: not a dataset, or tables that lack a column.
        MissingDependencyError: pyarrow is not installed, or ``executor="ray"`` without
            Ray (``pip install 'agentlog[ray]'``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    how = check_executor(executor)
    check_dataset(dataset, how)
    with executing(how):
        runs = pa.concat_tables(
            [plain(p) for p in scan(dataset, "runs", _RUN_COLUMNS, as_is, {}, how)])
        parts = [plain(p) for p in scan(
            dataset, "scores", ["run_id", "seq", "name", "value", "transition"],
            _last_terminal, {}, how)]
    runs = runs.take(in_run_order(runs))
    # A run's rows may come in several batches, in any order: merged, the last is the one
    # latest in the file (seq), and the counts add up.
    latest = pa.schema([("run_id", pa.string()), ("name", pa.string()), ("seq", pa.int64()),
                        ("value", pa.float64()), ("count", pa.int64())])
    scores = _latest(pa.concat_tables([latest.empty_table(), *parts]), count="count")
    scores = with_rows(scores, runs).select(["row", "name", "value", "count"])
    scores = scores.take(pc.sort_indices(scores, [("row", "ascending"),
                                                  ("name", "ascending")]))
    return TerminalTable(runs=runs, scores=scores)


def from_dataset(dataset: str | os.PathLike[str] | Mapping[str, Any], *,
                 executor: Executor = "local") -> tuple[TerminalScores, ...]:
    """Every run of a Parquet dataset with its terminal scores, in the order ``agentlog
    estimate reliability`` reads the traces the dataset was exported from (by source file,
    then run): ``terminal_table`` as one ``TerminalScores`` per run.

    Args:
        dataset: the dataset folder (``agentlog export --format parquet``), or its
            ``{"runs": ..., "scores": ...}`` tables as pyarrow tables or DuckDB relations.
        executor: ``"local"``, or ``"ray"`` to run the per-run stage with Ray Data
            (``dataset`` must then be a folder every node reads, or an ``s3://`` URI). The
            same runs and values either way.

    Returns:
        A ``TerminalScores`` per run.

    Raises:
        ValueError: not a dataset, or tables that lack a column.
        MissingDependencyError: pyarrow is not installed, or ``executor="ray"`` without
            Ray (``pip install 'agentlog[ray]'``).
    """
    table = terminal_table(dataset, executor=executor)
    per_run: list[tuple[dict[str, float], dict[str, int]]] = [
        ({}, {}) for _ in range(len(table))]
    for row, name, value, count in zip(*(table.scores.column(c).to_pylist()
                                         for c in ("row", "name", "value", "count")),
                                       strict=True):
        per_run[row][0][name] = value
        per_run[row][1][name] = count
    cols = {c: table.runs.column(c).to_pylist() for c in _RUN_COLUMNS}
    return tuple(
        TerminalScores(path=source, run=run, run_id=run_id, system=system, task=task,
                       seed=seed, meta=json.loads(meta or "{}"), values=values,
                       counts=counts)
        for source, run, run_id, system, task, seed, meta, (values, counts) in zip(
            *cols.values(), per_run, strict=True))



def _latest(table: Any, *, count: str | None) -> Any:
    """Per (``run_id``, ``name``) of ``table``: the ``value`` of its largest ``seq`` and how
    many rows it has (``count`` None) or the sum of column ``count``."""
    group = table.group_by(["run_id", "name"], use_threads=False)
    counted = (group.aggregate([("seq", "max"), ("seq", "count")]) if count is None
               else group.aggregate([("seq", "max"), (count, "sum")]))
    counted = counted.rename_columns(
        {"seq_max": "seq", "seq_count" if count is None else f"{count}_sum": "count"})
    # seq is unique within a run, so (run_id, name, max seq) names one row: its value.
    return counted.join(table.select(["run_id", "name", "seq", "value"]),
                        ["run_id", "name", "seq"], join_type="inner").select(
        ["run_id", "name", "seq", "value", "count"])


def _last_terminal(batch: Any) -> Any:
    """The per-run stage over a batch of the ``scores`` table: per run and name, the value
    latest in the file (``seq``) among those not tied to a transition, and how many there
    are (``run_id``, ``name``, ``seq``, ``value``, ``count``)."""
    import pyarrow.compute as pc

    batch = plain(batch)
    return _latest(batch.filter(pc.is_null(batch.column("transition"))), count=None)
