"""The tables of outcomes and predictions ``cess.from_traces`` reads: mappings, columns,
or CSV / JSON lines / Parquet files keyed by candidate id (or by ``(task, candidate_id)``)."""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentlog import MissingDependencyError

__all__ = ["ID_COLUMN", "TASK_COLUMN", "VALUE_COLUMNS", "load_table"]

ID_COLUMN = "candidate_id"
TASK_COLUMN = "task"
VALUE_COLUMNS = ("y", "value", "outcome", "prediction", "m")



class _Table:
    """Values keyed by candidate id, or by (task, candidate id) when ``tasks`` is set."""

    def __init__(self, values: Mapping[Any, float], what: str) -> None:
        self.what = what
        keyed_by_task = [isinstance(k, tuple) for k in values]
        if any(keyed_by_task) and not all(keyed_by_task):
            raise ValueError(
                f"`{what}` mixes (task, candidate_id) keys with plain candidate ids; key every "
                "entry by candidate id, or every entry by (task, candidate_id)"
            )
        self.by_task: dict[Any, dict[Any, float]] | None = None
        self.flat: dict[Any, float] = {}
        if values and all(keyed_by_task):
            self.by_task = {}
            for key, v in values.items():
                if len(key) != 2:
                    raise ValueError(f"`{what}` keys must be (task, candidate_id) pairs; "
                                     f"found {key!r}")
                self.by_task.setdefault(key[0], {})[key[1]] = _number(v, what, key)
        else:
            self.flat = {k: _number(v, what, k) for k, v in values.items()}

    def of(self, task: str | None, where: str) -> dict[Any, float]:
        if self.by_task is None:
            return self.flat
        if task is None:
            raise ValueError(
                f"{where}: the run has no task, but `{self.what}` is keyed by (task, "
                "candidate_id); record runs with al.record(task=...) or pass a table "
                "without a task column"
            )
        return self.by_task.get(task, {})


def _number(v: Any, what: str, key: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise ValueError(f"`{what}` must map candidate ids to numbers; found {v!r} for {key!r}")
    return float(v)


def _lookup(values: Mapping[Any, float], cid: Any) -> float | None:
    v = values.get(cid)
    if v is None and not isinstance(cid, str):
        # Tables read from CSV hold ids as text; a trace may log them as ints.
        v = values.get(str(cid))
    return v


def _as_table(obj: Any, what: str) -> _Table:
    if isinstance(obj, _Table):
        return obj
    if isinstance(obj, str | os.PathLike):
        return _Table(load_table(obj), what)
    columns: Mapping[str, Any] | None = None
    if hasattr(obj, "to_pydict"):  # a pyarrow Table
        columns = obj.to_pydict()
    elif hasattr(obj, "columns") and hasattr(obj, "to_dict"):  # a pandas DataFrame
        columns = obj.to_dict("list")
    elif isinstance(obj, Mapping) and _is_column(obj.get(ID_COLUMN)):
        columns = obj
    if columns is not None:
        return _Table(_from_columns(dict(columns), value_column=None, where=f"`{what}`"), what)
    if not isinstance(obj, Mapping):
        raise ValueError(
            f"`{what}` must be a mapping candidate_id -> value (or (task, candidate_id) -> "
            f"value), a table with a {ID_COLUMN!r} column, or a file path; found "
            f"{type(obj).__name__}"
        )
    return _Table(obj, what)


def _is_column(v: Any) -> bool:
    return isinstance(v, Sequence | np.ndarray) and not isinstance(v, str | bytes)


def _from_columns(
    columns: dict[str, Any], *, value_column: str | None, where: str
) -> dict[Any, float]:
    names = list(columns)
    if ID_COLUMN not in columns:
        raise ValueError(
            f"{where}: no {ID_COLUMN!r} column (found {names}); name the column holding the "
            "candidate ids candidate_id"
        )
    if value_column is not None:
        if value_column not in columns:
            raise ValueError(f"{where}: no column {value_column!r} (found {names}); pass "
                             "the name of the value column")
        value = value_column
    else:
        found = [c for c in VALUE_COLUMNS if c in columns]
        if len(found) != 1:
            what = "no value column" if not found else f"several value columns {found}"
            raise ValueError(
                f"{where}: {what} among {names}; expected exactly one of "
                f"{', '.join(VALUE_COLUMNS)}, or pass value_column= (--value-column)"
            )
        value = found[0]
    ids = list(columns[ID_COLUMN])
    tasks = list(columns[TASK_COLUMN]) if TASK_COLUMN in columns else None
    raw = list(columns[value])
    out: dict[Any, float] = {}
    for row, (cid, v) in enumerate(zip(ids, raw, strict=True), start=1):
        if cid is None or cid == "":
            raise ValueError(f"{where}: row {row} has no {ID_COLUMN}; every row needs one")
        key = cid if tasks is None else (tasks[row - 1], cid)
        if key in out:
            label = f"candidate_id {cid!r}" + ("" if tasks is None else
                                               f" in task {tasks[row - 1]!r}")
            raise ValueError(
                f"{where}: duplicate {label} (row {row}); keep one row per candidate"
                + ("" if tasks is not None else
                   ", or add a task column when ids repeat across tasks")
            )
        out[key] = _parse_value(v, where, row, value)
    return out


def _parse_value(v: Any, where: str, row: int, column: str) -> float:
    if v is None:
        return math.nan
    if isinstance(v, str):
        text = v.strip()
        if text == "" or text.lower() in ("nan", "na", "null"):
            return math.nan
        try:
            return float(text)
        except ValueError:
            pass
    elif isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
        return float(v)
    raise ValueError(
        f"{where}: row {row}: {column} must be a number; found {v!r}. Write numbers (leave the "
        "cell empty for an unknown value)"
    )


def load_table(
    path: str | os.PathLike[str], *, value_column: str | None = None
) -> dict[Any, float]:
    """Read a table of candidate values from CSV, JSON lines or Parquet.

    The table has a ``candidate_id`` column, an optional ``task`` column (needed when ids
    repeat across tasks) and one value column: ``y``, ``value``, ``outcome``, ``prediction``
    or ``m``, or the one named by ``value_column``. Empty cells and nulls read as NaN
    (unknown). The format follows the extension: ``.csv``; ``.jsonl``, ``.ndjson`` or
    ``.json`` (one object per line); ``.parquet`` or ``.pq`` (needs pyarrow).

    Returns:
        ``{candidate_id: value}``, or ``{(task, candidate_id): value}`` with a task column.

    Raises:
        ValueError: an unknown extension, no ``candidate_id`` column, no (or an ambiguous)
            value column, a duplicate id, a value that is not a number.
        MissingDependencyError: a Parquet file without pyarrow installed.
        OSError: the file cannot be read.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    where = str(p)
    if suffix == ".csv":
        columns = _read_csv(p)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        columns = _read_jsonl(p)
    elif suffix in (".parquet", ".pq"):
        columns = _read_parquet(p)
    else:
        raise ValueError(
            f"{where}: unknown table format {suffix or '(no extension)'!r}; use .csv, .jsonl "
            "(JSON lines) or .parquet"
        )
    return _from_columns(columns, value_column=value_column, where=where)


def _read_csv(path: Path) -> dict[str, list[Any]]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            raise ValueError(f"{path}: the file is empty; write a header row with "
                             f"{ID_COLUMN} and a value column")
        names = [n.strip() for n in reader.fieldnames]
        columns: dict[str, list[Any]] = {n: [] for n in names}
        for row in reader:
            for raw_name, name in zip(reader.fieldnames, names, strict=True):
                columns[name].append(row.get(raw_name))
    return columns


def _read_jsonl(path: Path) -> dict[str, list[Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {line_no} is not JSON ({exc.msg}); write one "
                                 "JSON object per line") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}: line {line_no} is not a JSON object; write one "
                                 "object per line, e.g. {\"candidate_id\": \"d1\", \"y\": 0.5}")
            rows.append(obj)
    names: list[str] = []
    for obj in rows:
        names.extend(k for k in obj if k not in names)
    return {n: [obj.get(n) for obj in rows] for n in names}


def _read_parquet(path: Path) -> dict[str, list[Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError(
            f"{path}: reading Parquet needs pyarrow, which is not installed: "
            "pip install 'agentlog[arrow]' (or write the table as CSV or JSON lines)"
        ) from exc
    try:
        columns: dict[str, list[Any]] = pq.read_table(path).to_pydict()
    except OSError:
        raise
    except Exception as exc:  # pyarrow raises its own ArrowInvalid for a bad file
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from exc
    return columns


# -- from traces -------------------------------------------------------------------------
