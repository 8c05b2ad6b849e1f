"""Reading traces: round trips, the Trace views, tables, and truncated tails."""

from __future__ import annotations

import hashlib
import math
import struct
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog._errors import MissingDependencyError
from agentlog._reader import (
    BlobNotFoundError,
    Trace,
    draws,
    iter_frames,
    iter_records,
    probs,
    raw_probs,
    read,
)
from agentlog._writer import TraceWriter
from agentlog.records import (
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_OK,
    RECORD_TYPES,
    Blob,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)

# -- round trip of every record type ------------------------------------------------------

INT = st.integers(min_value=-(2**63), max_value=2**64 - 1)
FLOAT = st.floats(allow_nan=True, allow_infinity=True)
JSONISH = st.recursive(
    st.none() | st.booleans() | INT | FLOAT | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    args = getattr(tp, "__args__", None)
    if args and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | strategy_for(inner)
    if getattr(tp, "__origin__", None) is dict:
        key, value = tp.__args__
        if value is Any:
            return st.dictionaries(st.text(), JSONISH, max_size=5)
        return st.dictionaries(strategy_for(key), strategy_for(value), max_size=5)
    if getattr(tp, "__origin__", None) is list:
        return st.lists(strategy_for(tp.__args__[0]), max_size=4)
    return {bool: st.booleans(), int: INT, float: FLOAT, str: st.text(),
            bytes: st.binary(max_size=300)}[tp]


def record_strategy(cls: type[msgspec.Struct]) -> st.SearchStrategy[Any]:
    fields = {f.name: strategy_for(f.type) for f in msgspec.structs.fields(cls)}
    return st.builds(cls, **fields)


ANY_RECORD = st.one_of([record_strategy(c) for c in RECORD_TYPES])


def same(a: list[Any], b: list[Any]) -> bool:
    """Equality that treats NaN as equal to itself (bit-exact through msgpack)."""
    return msgspec.msgpack.encode(a) == msgspec.msgpack.encode(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(records=st.lists(ANY_RECORD, max_size=30), frame_records=st.integers(1, 8))
def test_every_record_type_round_trips_through_writer_and_reader(
    tmp_path_factory: pytest.TempPathFactory, records: list[Any], frame_records: int
) -> None:
    path = tmp_path_factory.mktemp("rt") / "t.zst"
    with TraceWriter(path, frame_records=frame_records, frame_interval=3600) as w:
        for r in records:
            w.put(r)
    assert w.dropped == 0
    trace = read(path)
    assert same(trace.records, records)
    assert [type(r) for r in trace.records] == [type(r) for r in records]
    assert not trace.truncated and trace.records_recovered == len(records)


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda c: c.__name__)
def test_each_record_type_round_trips_with_extreme_values(tmp_path: Path, cls: type) -> None:
    extremes: dict[Any, Any] = {int: 2**64 - 1, float: -math.inf, str: "\u00e9\u4e2d\U0001f600",
                                bytes: bytes(range(256)), bool: True}
    values = {}
    for f in msgspec.structs.fields(cls):
        tp = f.type
        args = getattr(tp, "__args__", None)
        if args and type(None) in args:
            tp = next(a for a in args if a is not type(None))
        origin = getattr(tp, "__origin__", None)
        if origin is dict:  # dict[str, Any] holds anything; dict[str, int] holds ints
            values[f.name] = {"x": [1, None]} if tp.__args__[1] is Any else \
                {"\u00e9": extremes[tp.__args__[1]]}
        elif origin is list:
            values[f.name] = [extremes[tp.__args__[0]]] * 2
        else:
            values[f.name] = extremes[tp]
    rec = cls(**values)
    path = tmp_path / "t.zst"
    with TraceWriter(path) as w:
        w.put(rec)
        w.put(cls(**{**values, **{k: -(2**63) for k, v in values.items() if type(v) is int}}))
    assert read(path).records[0] == rec


# -- a small two-run trace for the views ---------------------------------------------------


def h(s: str | bytes) -> bytes:
    return hashlib.sha256(s if isinstance(s, bytes) else s.encode()).digest()


def vec(*xs: float) -> bytes:
    return struct.pack(f"<{len(xs)}d", *xs)


BIG = b"big exit artifact" * 200


def run_start(run: int, run_id: str) -> RunStart:
    return RunStart(run=run, run_id=run_id, system="sys", seed=run, task=f"t{run}",
                    meta={"i": run}, t_ns=run, generator="g/1", agentlog_version="0.1.0")


def enter(run: int, window: int, name: str, entry: bytes = b"in") -> WindowEnter:
    return WindowEnter(run=run, window=window, name=name, parent=-1, t_ns=10 * window,
                       entry_hash=h(entry), entry=entry)


def exit_(run: int, window: int, name: str, exit: bytes = b"out", status: int = EXIT_OK,
          inline: bool = True) -> WindowExit:
    return WindowExit(run=run, window=window, name=name, t_ns=10 * window + 5, status=status,
                      exit_hash=h(exit), exit=exit if inline else None, receipt=h("r"),
                      wall_ns=5, error_type="ValueError" if status == EXIT_FAILED else None)


def selection(run: int, window: int, name: str, p: tuple[float, ...], choice: int) -> Selection:
    return Selection(run=run, window=window, name=name, step=0, owner="model", pool=h("pool"),
                     n=len(p), probs=vec(*p), draws=vec(*[0.5] * len(p)), choice=choice,
                     n_zero=p.count(0.0), generator="g/1",
                     raw_probs=vec(*p, 0.0) if name == "trunc" else None)


RECORDS: list[Any] = [
    run_start(0, "run-a"),
    run_start(1, "run-b"),  # two runs interleaved in one file
    Blob(hash=h("pool"), data=b"\x92\xa1a\xa1b", kind="pool"),
    enter(0, 0, "retrieval", b"q0"),
    enter(1, 0, "retrieval", b"q1"),  # same window id, other run
    selection(0, 0, "doc", (0.25, 0.75), 1),
    selection(1, 0, "trunc", (1.0, 0.0), 0),
    Continuation(run=0, window=0, name="stop", step=0, p=0.5, u=0.25, decision=True),
    Score(run=0, window=0, name="f1", value=0.5, channel="direct"),
    Score(run=1, window=-1, name="em", value=1.0),
    LLMCall(run=0, window=0, t_ns=1, provider="openai", model="m", request=b"rq",
            response=b"rs", input_tokens=3),
    ToolCall(run=1, window=0, name="search", t_ns=2, wall_ns=3, status=0),
    Blob(hash=h(BIG), data=BIG),
    exit_(1, 0, "retrieval", BIG, inline=False),
    exit_(0, 0, "retrieval", b"d0"),
    enter(0, 1, "synthesis"),
    exit_(0, 1, "synthesis", status=EXIT_FAILED),
    enter(0, 2, "retrieval", b"q2"),
    exit_(0, 2, "retrieval", status=EXIT_CLOSED),
    enter(0, 3, "retrieval", b"q3"),  # never exits
    RunEnd(run=0, t_ns=99, status=0, receipt=h("r"), n_windows=4, n_selections=1,
           n_continuations=1),
]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("views") / "t.zst"
    with TraceWriter(path, frame_records=4) as w:
        for r in RECORDS:
            w.put(r)
    return read(path)


def test_read_reports_records_frames_and_a_clean_end(trace: Trace) -> None:
    assert trace.records == RECORDS
    assert (trace.records_recovered, trace.frames, trace.format_version) == (21, 6, 2)
    assert (trace.truncated, trace.bytes_dropped) == (False, 0)
    assert "21 records in 6 frames, 2 runs" in repr(trace)


def test_runs_attribute_interleaved_records_by_run_index(trace: Trace) -> None:
    a, b = trace.runs
    assert (a.run, a.run_id, b.run, b.run_id) == (0, "run-a", 1, "run-b")
    assert a.complete and not a.failed
    assert b.end is None and not b.complete  # run b never ended
    assert all(r.run == 1 for r in b.records)
    assert [type(r).__name__ for r in b.records] == [
        "RunStart", "WindowEnter", "Selection", "Score", "ToolCall", "WindowExit"]
    assert [w.name for w in a.windows] == ["retrieval", "synthesis", "retrieval", "retrieval"]


def test_windows_are_keyed_by_run_and_window_id(trace: Trace) -> None:
    ws = trace.windows("retrieval")
    assert [w.key for w in ws] == [(0, 0), (1, 0), (0, 2), (0, 3)]
    a0, b0, a2, a3 = ws
    assert a0.exit_bytes == b"d0" and b0.exit_bytes == BIG  # inline and Blob exits
    assert a0.entry_bytes == b"q0" and b0.entry_bytes == b"q1"
    assert a0.complete and a0.status == EXIT_OK and a0.wall_ns == 5
    assert a2.closed_early and not a2.complete
    assert a3.exit is None and a3.exit_hash is None and a3.status is None
    assert a3.exit_bytes is None
    (syn,) = trace.windows("synthesis")
    assert syn.failed and syn.exit is not None and syn.exit.error_type == "ValueError"
    assert len(trace.windows()) == 5


def test_transitions_pair_entries_and_exits_of_completed_windows(trace: Trace) -> None:
    ts = trace.transitions("retrieval")
    # In order of entry; the closed-early and the never-exited instances are left out.
    assert [(t.run, t.run_id, t.window) for t in ts] == [(0, "run-a", 0), (1, "run-b", 0)]
    assert (ts[0].entry, ts[0].exit) == (b"q0", b"d0")
    assert (ts[1].entry, ts[1].exit) == (b"q1", BIG)  # the exit resolved from its Blob
    assert (ts[1].entry_hash, ts[1].exit_hash) == (h(b"q1"), h(BIG))
    with_failed = trace.transitions("synthesis", include_failed=True)
    assert len(with_failed) == 1 and trace.transitions("synthesis") == []


def test_record_lists_filter_by_name(trace: Trace) -> None:
    assert [s.name for s in trace.selections()] == ["doc", "trunc"]
    assert [s.name for s in trace.selections("doc")] == ["doc"]
    assert [s.name for s in trace.scores()] == ["f1", "em"]
    assert [s.value for s in trace.scores("em")] == [1.0]
    assert len(trace.continuations("stop")) == 1 and trace.continuations("other") == []
    assert [c.model for c in trace.llm_calls()] == ["m"]
    assert [c.name for c in trace.tool_calls()] == ["search"]


def test_probability_vectors_are_zero_copy_float64_views(trace: Trace) -> None:
    sel = trace.selections("doc")[0]
    p = probs(sel)
    assert p.dtype == np.dtype("<f8") and p.tolist() == [0.25, 0.75]
    assert not p.flags.writeable and not p.flags.owndata  # a view of the record's bytes
    assert draws(sel).tolist() == [0.5, 0.5]
    assert raw_probs(sel) is None
    trunc = trace.selections("trunc")[0]
    raw = raw_probs(trunc)
    assert raw is not None and raw.tolist() == [1.0, 0.0, 0.0]
    assert trace.probs(trunc).tolist() == [1.0, 0.0]


def test_a_vector_of_the_wrong_length_is_a_format_error() -> None:
    from agentlog._errors import TraceFormatError

    bad = Selection(run=0, window=0, name="doc", step=3, owner="model", pool=b"", n=3,
                    probs=vec(0.5, 0.5), draws=b"123", choice=0, n_zero=0, generator="g")
    with pytest.raises(TraceFormatError, match=r"`probs` should hold 24 bytes .*found 16"):
        probs(bad)
    with pytest.raises(TraceFormatError, match=r"`draws` should hold 24 bytes"):
        draws(bad)


def test_blob_returns_data_and_a_missing_hash_is_a_clear_key_error(trace: Trace) -> None:
    assert trace.blob(h("pool")) == b"\x92\xa1a\xa1b"
    assert trace.has_blob(h("pool")) and not trace.has_blob(b"x")
    with pytest.raises(KeyError, match=r"no Blob with hash 0000.* in .*t\.zst"):
        trace.blob(bytes(32))
    with pytest.raises(BlobNotFoundError):
        trace.blob(b"\x01")


# -- tables ------------------------------------------------------------------------------


def test_to_arrow_windows_has_one_row_per_window_instance(trace: Trace) -> None:
    pytest.importorskip("pyarrow")  # the arrow extra
    t = trace.to_arrow("windows")
    assert t.num_rows == 5
    assert t.column("run_id").to_pylist() == ["run-a", "run-b", "run-a", "run-a", "run-a"]
    assert t.column("status").to_pylist() == [EXIT_OK, EXIT_OK, EXIT_FAILED, EXIT_CLOSED, None]
    rows = {(r["run"], r["window"]): r for r in t.to_pylist()}
    assert rows[(0, 3)]["status"] is None and rows[(0, 3)]["exit_hash"] is None
    assert rows[(0, 1)]["failed"] and rows[(0, 1)]["error_type"] == "ValueError"
    assert rows[(1, 0)]["exit_hash"] == h(BIG)


def test_to_arrow_selections_carries_vectors_as_float_lists(trace: Trace) -> None:
    pytest.importorskip("pyarrow")  # the arrow extra
    t = trace.to_arrow("selections")
    assert t.column("probs").to_pylist() == [[0.25, 0.75], [1.0, 0.0]]
    assert t.column("draws").to_pylist() == [[0.5, 0.5], [0.5, 0.5]]
    assert t.column("raw_probs").to_pylist() == [None, [1.0, 0.0, 0.0]]
    assert t.column("chosen_p").to_pylist() == [0.75, 1.0]
    assert t.column("run_id").to_pylist() == ["run-a", "run-b"]


def test_to_arrow_other_kinds(trace: Trace) -> None:
    pytest.importorskip("pyarrow")  # the arrow extra
    runs = trace.to_arrow("runs").to_pylist()
    assert [(r["run_id"], r["complete"], r["meta"]) for r in runs] == [
        ("run-a", True, '{"i":0}'), ("run-b", False, '{"i":1}')]
    assert trace.to_arrow("scores").column("value").to_pylist() == [0.5, 1.0]
    assert trace.to_arrow("continuations").column("decision").to_pylist() == [True]
    assert trace.to_arrow("llm_calls").column("input_tokens").to_pylist() == [3]
    assert trace.to_arrow("tool_calls").column("name").to_pylist() == ["search"]


def test_to_arrow_keeps_uint64_values(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")  # the arrow extra
    path = tmp_path / "t.zst"
    with TraceWriter(path) as w:
        w.put(Score(run=0, window=0, name="x", value=0.0, layout=2**64 - 1))
    assert read(path).to_arrow("scores").column("layout").to_pylist() == [2**64 - 1]


def test_to_arrow_rejects_an_unknown_kind(trace: Trace) -> None:
    with pytest.raises(ValueError, match=r"`kind` must be one of 'windows', .*; found 'spans'"):
        trace.to_arrow("spans")  # type: ignore[arg-type]


def test_to_arrow_without_pyarrow_names_the_install_line(
    trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'agentlog\[arrow\]'"):
        trace.to_arrow()
    with pytest.raises(ImportError):  # MissingDependencyError is an ImportError too
        trace.to_arrow("runs")


# -- streaming and ends -------------------------------------------------------------------


def test_iter_records_streams_in_file_order(trace: Trace) -> None:
    assert list(iter_records(trace.path)) == RECORDS


def test_iter_frames_reports_truncation_once_exhausted(trace: Trace, tmp_path: Path) -> None:
    data = Path(trace.path).read_bytes()
    cut = tmp_path / "cut.zst"
    cut.write_bytes(data[:-3])
    frames = iter_frames(cut)
    got = list(frames)
    assert frames.truncated and frames.bytes_dropped == len(data) - 3 - frames.end_offset
    assert sum(len(f.records) for f in got) == frames.records < len(RECORDS)


def test_an_empty_file_is_a_truncated_header_with_nothing_recovered(tmp_path: Path) -> None:
    path = tmp_path / "empty.zst"
    path.write_bytes(b"")
    t = read(path)
    assert (t.truncated, t.records, t.bytes_dropped, t.format_version) == (True, [], 0, None)


def test_a_file_cut_inside_the_header_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "h.zst"
    path.write_bytes(b"AGNTL")
    t = read(path)
    assert (t.truncated, t.bytes_dropped, t.frames) == (True, 5, 0)


def test_a_header_only_file_is_complete_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "h.zst"
    TraceWriter(path).close()
    t = read(path)
    assert (t.truncated, t.records, t.format_version, t.runs) == (False, [], 2, [])


def test_a_tail_of_zero_bytes_reads_as_truncation(trace: Trace, tmp_path: Path) -> None:
    """What a filesystem can leave after a power loss: the size grew, the data never came."""
    path = tmp_path / "zeros.zst"
    path.write_bytes(Path(trace.path).read_bytes() + bytes(5000))
    t = read(path)
    assert t.records == RECORDS and t.truncated and t.bytes_dropped == 5000


def test_the_reader_follows_a_file_that_is_still_being_written(tmp_path: Path) -> None:
    path = tmp_path / "live.zst"
    w = TraceWriter(path, frame_interval=3600)
    w.put(Score(run=0, window=0, name="x", value=1.0))
    w.flush()
    assert len(read(path).records) == 1
    w.put(Score(run=0, window=0, name="x", value=2.0))
    w.flush()
    assert len(read(path).records) == 2
    w.close()


def test_read_traces_takes_traces_files_folders_and_lists_of_them(tmp_path: Path) -> None:
    import agentlog as al
    from agentlog._reader import read_traces

    (tmp_path / "sub").mkdir()
    for name in ("a.zst", "sub/b.zst"):
        with al.record(tmp_path / name, seed=1, task=name):
            pass
    one = al.read(tmp_path / "a.zst")
    assert [t.runs[0].start.task for t in read_traces(tmp_path)] == ["a.zst", "sub/b.zst"]
    assert read_traces(one) == [one]
    assert len(read_traces([one, tmp_path / "sub"])) == 2
    with pytest.raises(ValueError, match="`traces` is empty"):
        read_traces([])
    with pytest.raises(ValueError, match=r"item 0 is a int"):
        read_traces([3])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_traces(tmp_path / "nope.zst")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no \*\.zst trace files"):
        read_traces(tmp_path / "empty")
