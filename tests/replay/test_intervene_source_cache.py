"""``intervene``'s cache of source traces: bounded in entries and in file bytes."""

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


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_intervene, "_traces", {})
    monkeypatch.setattr(_intervene, "_trace_bytes", {})


@pytest.mark.usefixtures("empty_cache")
def test_source_traces_are_kept_within_the_byte_bound_newest_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sources(tmp_path, 4)
    biggest = max(os.path.getsize(p) for p in paths)
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_BYTES", biggest * 5 // 2)  # two fit
    traces = [_intervene._source(p) for p in paths]
    assert list(_intervene._traces) == paths[2:]
    assert _intervene._source(paths[3]) is traces[3]  # read once while it is held
    assert sum(_intervene._trace_bytes.values()) <= biggest * 5 // 2
    # A source larger than the whole bound is still kept, alone: its units come together.
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_BYTES", 1)
    again = _intervene._source(paths[0])
    assert list(_intervene._traces) == [paths[0]] and _intervene._source(paths[0]) is again
    assert again.windows()[0].window == traces[0].windows()[0].window


@pytest.mark.usefixtures("empty_cache")
def test_the_entry_bound_holds_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_intervene, "_TRACE_CACHE_ENTRIES", 3)
    for path in sources(tmp_path, 5):
        _intervene._source(path)
    assert [Path(p).name for p in _intervene._traces] == ["s2.zst", "s3.zst", "s4.zst"]
    assert set(_intervene._trace_bytes) == set(_intervene._traces)
