"""Each run's terminal scores, from a Parquet dataset ([DMC] §4.4: one score per run).

A run's terminal score of a name is its last ``Score`` record of that name that is not tied
to a transition (a run-level or window-level readout; the channel readouts of a
transition's states belong to ``asv``): what ``agentlog estimate reliability`` summarises.
``from_dataset`` reads them from the ``runs`` and ``scores`` tables of ``agentlog export
--format parquet`` without opening a trace. Its per-run stage (each run's last value and
count per name) runs over batches of the ``scores`` table: the whole table locally, each
Ray Data block under ``executor="ray"``; the batches are merged by ``seq`` (a record's place
in its run), so the order they come in does not matter.

Example:
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
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentlog.dataset import run_order

from ._executor import Executor, check_dataset, check_executor, executing, scan

__all__ = ["TerminalScores", "from_dataset"]

_RUN_COLUMNS = ["run_id", "run", "system", "task", "seed", "meta", "source"]


@dataclass(frozen=True)
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


def from_dataset(dataset: str | os.PathLike[str] | Mapping[str, Any], *,
                 executor: Executor = "local") -> tuple[TerminalScores, ...]:
    """Every run of a Parquet dataset with its terminal scores, in the order ``agentlog
    estimate reliability`` reads the traces the dataset was exported from (by source file,
    then run).

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
    how = check_executor(executor)
    check_dataset(dataset, how)
    # run -> name -> (seq of the last one, its value, how many)
    last: dict[str, dict[str, tuple[int, float, int]]] = {}
    with executing(how):
        parts = list(scan(dataset, "runs", _RUN_COLUMNS, _as_is, {}, how))
        for part in scan(dataset, "scores", ["run_id", "seq", "name", "value", "transition"],
                         _last_terminal, {}, how):
            for run_id, name, seq, value, count in zip(
                    *(part.column(c).to_pylist() for c in ("run_id", "name", "seq", "value",
                                                           "count")), strict=True):
                # A run's rows may come in several batches, in any order: the last is the
                # one latest in the file (seq).
                seen = last.setdefault(run_id, {})
                before = seen.get(name, (-1, 0.0, 0))
                latest = (seq, value) if seq > before[0] else before[:2]
                seen[name] = (*latest, before[2] + count)
    rows: list[dict[str, Any]] = []
    for part in parts:
        cols = {c: part.column(c).to_pylist() for c in _RUN_COLUMNS}
        rows.extend(dict(zip(_RUN_COLUMNS, values, strict=True))
                    for values in zip(*cols.values(), strict=True))
    rows.sort(key=lambda r: run_order(r["source"], r["run"]))
    out = []
    for r in rows:
        scores = last.get(r["run_id"], {})
        out.append(TerminalScores(
            path=r["source"], run=r["run"], run_id=r["run_id"], system=r["system"],
            task=r["task"], seed=r["seed"], meta=json.loads(r["meta"] or "{}"),
            values={n: v for n, (_, v, _) in scores.items()},
            counts={n: c for n, (_, _, c) in scores.items()}))
    return tuple(out)


def _as_is(batch: Any) -> Any:
    return batch


def _last_terminal(batch: Any) -> Any:
    """The per-run stage over a batch of the ``scores`` table: per run and name, the value
    latest in the file (``seq``) among those not tied to a transition, and how many there
    are (``run_id``, ``name``, ``seq``, ``value``, ``count``)."""
    import pyarrow as pa

    got: dict[tuple[str, str], tuple[int, float, int]] = {}
    for run_id, seq, name, value, transition in zip(
            *(batch.column(c).to_pylist() for c in ("run_id", "seq", "name", "value",
                                                     "transition")), strict=True):
        if transition is None:
            before = got.get((run_id, name), (-1, 0.0, 0))
            latest = (seq, value) if seq > before[0] else before[:2]
            got[run_id, name] = (*latest, before[2] + 1)
    return pa.table({"run_id": pa.array([k[0] for k in got], pa.string()),
                     "name": pa.array([k[1] for k in got], pa.string()),
                     "seq": pa.array([v[0] for v in got.values()], pa.int64()),
                     "value": pa.array([v[1] for v in got.values()], pa.float64()),
                     "count": pa.array([v[2] for v in got.values()], pa.int64())})
