"""``agentlog.records.iter_runs``: the runs of ``read_traces(source)``, streamed one at a
time, with the same records, windows and order as ``Trace.runs``."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import RunView, Selection, TraceRun, iter_runs

GOLDEN = Path(__file__).parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"


def _same_run(a: RunView, b: RunView) -> None:
    assert (a.run, a.start, a.end, a.records) == (b.run, b.start, b.end, b.records)
    assert [(w.key, w.enter, w.exit) for w in a.windows] == [
        (w.key, w.enter, w.exit) for w in b.windows]


def _same_as_read(path: Path) -> list[TraceRun]:
    streamed = list(iter_runs(path))
    runs = al.read(path).runs
    assert len(streamed) == len(runs)
    for got, want in zip(streamed, runs, strict=True):
        _same_run(got.run, want)
        assert got.trace.path == str(path)
    return streamed


def test_the_golden_trace_streams_run_for_run() -> None:
    assert _same_as_read(GOLDEN)


@al.window("pick")
def pick(q: str) -> str:
    i = al.select([0.25, 0.75], candidates=["d1", "d2"], name="doc")
    return ["d1", "d2"][i]


def test_runs_over_many_frames_and_nested_runs_come_in_order_of_first_appearance(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, system="first", seed=1):
        for i in range(5000):  # past one frame (4,096 records)
            al.score("s", float(i))
    with al.record(path, system="outer", seed=2, mode="a"):
        pick("q")
        with al.record(path, system="inner", seed=3):
            pick("r")
        pick("s")
    streamed = _same_as_read(path)
    assert [r.run.start.system for r in streamed if r.run.start] == ["first", "outer",
                                                                     "inner"]
    (sel, *_) = (r for r in streamed[1].run.records if type(r) is Selection)
    # Blobs (candidate pools, artifacts) resolve through the stand-in trace.
    assert streamed[1].trace.candidates(sel) == ["d1", "d2"]
    assert streamed[1].run.windows[0].exit_value() in ("d1", "d2")


def test_a_truncated_file_gives_its_unfinished_run_last(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, system="done", seed=1):
        pick("q")
    with al.record(path, system="cut", seed=2, mode="a"):
        for i in range(5000):
            al.score("s", float(i))
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])  # cut inside the last frame (>= 24+9 bytes)
    assert al.read(path).truncated
    streamed = _same_as_read(path)
    assert streamed[-1].run.end is None and streamed[-1].trace.truncated


def test_a_trace_in_memory_yields_its_own_runs(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        pick("q")
    trace = al.read(path)
    (got,) = iter_runs([trace])
    assert got.trace is trace and got.run is trace.runs[0]


def test_bad_sources_raise_as_read_traces_does(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`source` is empty; `source` must be a trace path"):
        list(iter_runs([]))
    with pytest.raises(ValueError, match=r"the folder holds no \*\.zst trace files"):
        list(iter_runs(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"does not exist; pass the path"):
        list(iter_runs(tmp_path / "missing.zst"))
