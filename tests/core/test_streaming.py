"""``verify`` and ``inspect`` stream a trace: memory stays flat as the file grows.

Measured with ``tracemalloc`` (Python allocations: decoded records, buffers), never
with a clock; the peak-RSS benchmark on 1 M and 10 M records is
``tests/benchmarks/bench_verify_rss.py``.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog import _noise
from agentlog._writer import TraceWriter
from agentlog.cli._inspect import summarize_path
from agentlog.records import Continuation, RunEnd, RunStart, Score

SEED = 5


def write_run(path: Path, n: int) -> Path:
    with TraceWriter(path, frame_interval=3600) as w:
        w.put(RunStart(run=0, run_id="c" * 32, system="s", seed=SEED, task=None, meta={},
                       t_ns=1, generator=_noise.GENERATOR_ID, agentlog_version="t"))
        for i in range(n):
            if i % 10 == 0:
                u = _noise.uniform(SEED, "stop", i // 10)
                w.put(Continuation(run=0, window=-1, name="stop", step=i // 10, p=0.5, u=u,
                                   decision=u < 0.5, t_ns=i))
            else:
                w.put(Score(run=0, window=-1, name="f1", value=i / n, t_ns=i))
        w.put(RunEnd(run=0, t_ns=n + 1, status=0, receipt=b"", n_windows=0, n_selections=0,
                     n_continuations=0))
    return path


def peak_of(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def small_and_large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("stream")
    return write_run(d / "small.zst", 10_000), write_run(d / "large.zst", 50_000)


def test_verify_memory_does_not_grow_with_the_file(small_and_large: tuple[Path, Path]) -> None:
    small, large = small_and_large
    report = al.verify(large)
    assert report.ok and report.records == 50_002
    p_small = peak_of(lambda: al.verify(small))
    p_large = peak_of(lambda: al.verify(large))
    # 5x the records; in memory about one frame (4,096 records) more, never 5x.
    assert p_large < 2 * p_small + (4 << 20)


def test_inspect_memory_does_not_grow_with_the_file(small_and_large: tuple[Path, Path]) -> None:
    small, large = small_and_large
    assert summarize_path(large)["records"] == 50_002
    p_small = peak_of(lambda: summarize_path(small))
    p_large = peak_of(lambda: summarize_path(large))
    assert p_large < 2 * p_small + (4 << 20)


def test_reading_the_whole_file_is_what_grows(small_and_large: tuple[Path, Path]) -> None:
    """The reference the two tests above are measured against: al.read keeps it all."""
    small, large = small_and_large
    assert peak_of(lambda: al.read(large)) > 4 * peak_of(lambda: al.read(small))


def test_verify_never_reads_the_whole_file(
    small_and_large: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentlog._reader

    def no_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("verify must stream, not read the whole file")

    monkeypatch.setattr(agentlog._reader, "read", no_read)
    monkeypatch.setattr(al, "read", no_read)
    assert al.verify(small_and_large[0]).ok
