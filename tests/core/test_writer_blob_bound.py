"""A writer remembers a bounded number of blob hashes; a blob seen again past it is
written again, which readers and ``verify`` accept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog._writer import writer as _writer
from agentlog.records import Blob
from tests.conftest import of_type


def test_fresh_pools_across_many_runs_keep_the_writers_hash_set_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_writer, "MAX_BLOB_HASHES", 8)
    path = tmp_path / "t.zst"
    probs = np.full(3, 1 / 3)
    pools = [[f"d{k}-{i}" for i in range(3)] for k in range(40)]
    sizes = []
    for run in range(6):  # one kept writer for all six runs
        with al.record(path, seed=run, mode="a") as rec:
            for k in range(5 * run, 5 * run + 10):  # half of each run's pools seen before
                al.select(probs, candidates=pools[k], name="doc")
            sizes.append(len(rec.writer._blob_hashes))
    assert max(sizes) <= 9
    trace = al.read(path)
    sels = trace.selections("doc")
    assert len(sels) == 60
    # Every selection still finds its pool's ids, and duplicates are the same bytes.
    assert all(trace.candidates(s) == pools[k] for s, k in zip(
        sels, [k for run in range(6) for k in range(5 * run, 5 * run + 10)], strict=True))
    blobs = of_type(trace, Blob)
    assert len(blobs) > len({b.hash for b in blobs})  # some were written twice ...
    assert all(b.data == next(c.data for c in blobs if c.hash == b.hash) for b in blobs)
    report = al.verify(path)
    assert report.ok, report.problems  # ... and that is a valid trace
