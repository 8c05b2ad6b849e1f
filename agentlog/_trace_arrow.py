"""The pyarrow tables behind ``Trace.to_arrow``: one column per record field, exact ints."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec

from agentlog._records import Selection
from agentlog._vectors import _vector, probs

if TYPE_CHECKING:
    from agentlog._trace import Trace

# -- arrow builders ----------------------------------------------------------------------


def _int_array(pa: Any, values: list[int | None]) -> Any:
    try:
        return pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowInvalid):
        try:
            return pa.array(values, pa.uint64())
        except (OverflowError, pa.ArrowInvalid):
            # msgpack allows ints beyond 64 bits' range in no case, but mixed signs do
            # not fit one arrow integer type: keep them exact as decimal strings.
            return pa.array([None if v is None else str(v) for v in values], pa.string())


def _column(pa: Any, tp: Any, values: list[Any]) -> Any:
    base = _base_type(tp)
    if base is bool:
        return pa.array(values, pa.bool_())
    if base is int:
        return _int_array(pa, values)
    if base is float:
        return pa.array(values, pa.float64())
    if base is str:
        return pa.array(values, pa.string())
    if base is bytes:
        return pa.array(values, pa.binary())
    return pa.array(
        [None if v is None else msgspec.json.encode(v).decode() for v in values], pa.string()
    )


def _base_type(tp: Any) -> Any:
    args = getattr(tp, "__args__", None)
    if args:
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return non_none[0]
    return tp


@functools.cache
def _fields(cls: type[msgspec.Struct]) -> tuple[msgspec.structs.FieldInfo, ...]:
    return msgspec.structs.fields(cls)  # resolves annotations: a millisecond a call


def _struct_table(pa: Any, trace: Trace, cls: type[msgspec.Struct]) -> Any:
    records = trace._index.of(cls)
    cols = {}
    for f in _fields(cls):
        cols[f.name] = _column(pa, f.type, [getattr(r, f.name) for r in records])
    cols["seq"] = _seq_column(pa, trace, records)
    return pa.table(cols)


def _seq_column(pa: Any, trace: Trace, records: list[Any]) -> Any:
    """Each record's position among its run's records (file order): how a reader of the
    tables puts a run's selections, continuations, scores and windows back in order."""
    position = trace._index.positions()
    return _int_array(pa, [position[id(r)] for r in records])


def _windows_table(pa: Any, trace: Trace) -> Any:
    ws = trace._index.windows
    run_ids = trace._index.run_ids

    def ex(attr: str) -> list[Any]:
        return [getattr(w.exit, attr) if w.exit is not None else None for w in ws]

    return pa.table({
        "run": _int_array(pa, [w.enter.run for w in ws]),
        "run_id": pa.array([run_ids.get(w.enter.run) for w in ws], pa.string()),
        "window": _int_array(pa, [w.enter.window for w in ws]),
        "name": pa.array([w.enter.name for w in ws], pa.string()),
        "parent": _int_array(pa, [w.enter.parent for w in ws]),
        "thread": _int_array(pa, [w.enter.thread for w in ws]),
        "after": pa.array([w.enter.after for w in ws], pa.string()),
        "status": _int_array(pa, ex("status")),
        "complete": pa.array([w.complete for w in ws], pa.bool_()),
        "failed": pa.array([w.failed for w in ws], pa.bool_()),
        "t_enter_ns": _int_array(pa, [w.enter.t_ns for w in ws]),
        "t_exit_ns": _int_array(pa, ex("t_ns")),
        "wall_ns": _int_array(pa, ex("wall_ns")),
        "entry_hash": pa.array([w.enter.entry_hash for w in ws], pa.binary()),
        "seq": _seq_column(pa, trace, [w.enter for w in ws]),
        "exit_hash": pa.array(ex("exit_hash"), pa.binary()),
        "receipt": pa.array(ex("receipt"), pa.binary()),
        "error_type": pa.array(ex("error_type"), pa.string()),
        "error_message": pa.array(ex("error_message"), pa.string()),
        "tool_calls": _int_array(pa, ex("tool_calls")),
        "llm_calls": _int_array(pa, ex("llm_calls")),
        "input_tokens": _int_array(pa, ex("input_tokens")),
        "output_tokens": _int_array(pa, ex("output_tokens")),
        "cost": pa.array(ex("cost"), pa.float64()),
        "selections": _int_array(pa, ex("selections")),
    })


def _list_column(pa: Any, sels: list[Selection], attr: str) -> Any:
    import numpy as np

    chunks = [getattr(s, attr) for s in sels]
    for s, c in zip(sels, chunks, strict=True):
        if c is not None and len(c) % 8:
            _vector(s, c, attr, None)  # raises the TraceFormatError
    lengths = np.fromiter((0 if c is None else len(c) // 8 for c in chunks), np.int32, len(chunks))
    offsets = np.zeros(len(chunks) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.frombuffer(b"".join(c for c in chunks if c is not None), "<f8")
    mask = None
    if any(c is None for c in chunks):
        mask = pa.array([c is None for c in chunks], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=mask)


def _selections_table(pa: Any, trace: Trace) -> Any:
    sels: list[Selection] = trace._index.of(Selection)
    run_ids = trace._index.run_ids
    chosen = []
    for s in sels:
        p = probs(s)
        chosen.append(float(p[s.choice]) if 0 <= s.choice < len(p) else None)
    return pa.table({
        "run": _int_array(pa, [s.run for s in sels]),
        "run_id": pa.array([run_ids.get(s.run) for s in sels], pa.string()),
        "window": _int_array(pa, [s.window for s in sels]),
        "name": pa.array([s.name for s in sels], pa.string()),
        "step": _int_array(pa, [s.step for s in sels]),
        "owner": pa.array([s.owner for s in sels], pa.string()),
        "n": _int_array(pa, [s.n for s in sels]),
        "choice": _int_array(pa, [s.choice for s in sels]),
        "chosen_p": pa.array(chosen, pa.float64()),
        "n_zero": _int_array(pa, [s.n_zero for s in sels]),
        "generator": pa.array([s.generator for s in sels], pa.string()),
        "top_k": _int_array(pa, [s.top_k for s in sels]),
        "top_p": pa.array([s.top_p for s in sels], pa.float64()),
        "t_ns": _int_array(pa, [s.t_ns for s in sels]),
        "pool": pa.array([s.pool for s in sels], pa.binary()),
        "probs": _list_column(pa, sels, "probs"),
        "draws": _list_column(pa, sels, "draws"),
        "raw_probs": _list_column(pa, sels, "raw_probs"),
        "policy_probs": _list_column(pa, sels, "policy_probs"),
        "steer": pa.array([s.steer for s in sels], pa.string()),
        "forced": pa.array([s.forced for s in sels], pa.bool_()),
        "observed": _int_array(pa, [s.observed for s in sels]),
        "seq": _seq_column(pa, trace, sels),
    })


def _runs_table(pa: Any, trace: Trace) -> Any:
    runs = trace.runs

    def st(attr: str) -> list[Any]:
        return [getattr(r.start, attr) if r.start is not None else None for r in runs]

    def en(attr: str) -> list[Any]:
        return [getattr(r.end, attr) if r.end is not None else None for r in runs]

    return pa.table({
        "run": _int_array(pa, [r.run for r in runs]),
        "run_id": pa.array(st("run_id"), pa.string()),
        "system": pa.array(st("system"), pa.string()),
        "seed": _int_array(pa, st("seed")),
        "task": pa.array(st("task"), pa.string()),
        "meta": _column(pa, dict, st("meta")),
        "generator": pa.array(st("generator"), pa.string()),
        "agentlog_version": pa.array(st("agentlog_version"), pa.string()),
        "parent_run": pa.array(st("parent_run"), pa.string()),
        "pid": _int_array(pa, st("pid")),
        "t_start_ns": _int_array(pa, st("t_ns")),
        "t_end_ns": _int_array(pa, en("t_ns")),
        "complete": pa.array([r.complete for r in runs], pa.bool_()),
        "status": _int_array(pa, en("status")),
        "error_type": pa.array(en("error_type"), pa.string()),
        "n_windows": _int_array(pa, en("n_windows")),
        "n_selections": _int_array(pa, en("n_selections")),
        "n_continuations": _int_array(pa, en("n_continuations")),
        "dropped": _int_array(pa, en("dropped")),
        "receipt": pa.array(en("receipt"), pa.binary()),
        "n_records": _int_array(pa, [len(r.records) for r in runs]),
    })

