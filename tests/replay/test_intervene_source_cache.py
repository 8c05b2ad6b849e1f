"""``intervene``'s cache of source traces: bounded in entries and in file bytes, and never
serving a trace whose file was re-recorded at the same path.

White-box test of ``agentlog.replay._intervene``'s source cache (``_source``, ``_sources``
and its bounds): a bounded cache is invisible through ``intervene`` except as memory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentlog as al
from agentlog.replay import _intervene


@al.window("step")
def step(x: int) -> int:
    return x + 1


def sources(folder: Path, n: int) -> list[str]:
    """``n`` small traces of one window each."""
    paths = []
    for k in range(n):
        path = folder / f"s{k}.zst"
        with al.record(path, seed=k):
            step(k)
        al.flush()
        paths.append(str(path))
    return paths


def source(path: str) -> al.Trace:
    """``_source`` asked for the first run of ``path`` as it is on disk now."""
    run = al.read(path).runs[0]
    assert run.start is not None and run.end is not None and run.end.digest is not None
    return _intervene._source(path, run.run, run.start.run_id, run.end.digest.hex())


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_intervene, "_sources", {})


@pytest.mark.usefixtures("empty_cache")
def test_source_traces_are_kept_within_the_byte_bound_newest_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sources(tmp_path, 4)
    biggest = max(os.path.getsize(p) for p in paths)
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_BYTES", biggest * 5 // 2)  # two fit
    traces = [source(p) for p in paths]
    assert list(_intervene._sources) == paths[2:]
    assert source(paths[3]) is traces[3]  # read once while it is held
    assert sum(e.identity[2] for e in _intervene._sources.values()) <= biggest * 5 // 2
    # A source larger than the whole bound is still kept, alone: its units come together.
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_BYTES", 1)
    again = source(paths[0])
    assert list(_intervene._sources) == [paths[0]] and source(paths[0]) is again
    assert again.windows()[0].window == traces[0].windows()[0].window


@pytest.mark.usefixtures("empty_cache")
def test_the_entry_bound_holds_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_ENTRIES", 3)
    for path in sources(tmp_path, 5):
        source(path)
    assert [Path(p).name for p in _intervene._sources] == ["s2.zst", "s3.zst", "s4.zst"]


@pytest.mark.usefixtures("empty_cache")
def test_a_file_re_recorded_at_the_same_path_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "t.zst")
    with al.record(path, seed=1, mode="w"):
        step(1)
    first = source(path)
    assert first.windows()[0].enter is not None
    # The same path, the same size and shape, another recording: a cache keyed by the
    # path alone served the first trace here.
    with al.record(path, seed=2, mode="w"):
        step(2)
    second = source(path)
    assert second is not first
    assert al.decode_arguments(step, second.windows()[0].entry_bytes) == ((2,), {})


@pytest.mark.usefixtures("empty_cache")
def test_an_unchanged_stat_does_not_hide_another_run(tmp_path: Path) -> None:
    """Even with the file's identity unchanged (a coarse clock, the same size), the unit's
    run id decides: a trace cached for one recording never serves another's units."""
    path = str(tmp_path / "t.zst")
    with al.record(path, seed=1, mode="w"):
        step(1)
    first = source(path)
    with al.record(path, seed=2, mode="w"):
        step(2)
    # Pretend the stat did not change: the entry's identity is the file's identity now.
    _intervene._sources[path] = _intervene._SourceEntry(_intervene._file_identity(path), first)
    assert source(path) is not first


@pytest.mark.usefixtures("empty_cache")
def test_a_source_that_lost_the_units_run_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "t.zst")
    with al.record(path, seed=1, mode="w"):
        step(1)
    run = al.read(path).runs[0]
    assert run.start is not None
    with al.record(path, seed=1, mode="w"):
        step(1)
    with pytest.raises(ValueError, match="re-recorded or edited"):
        _intervene._source(path, run.run, run.start.run_id, None)
