"""The Ray executor takes a generator of units lazily, batch by batch, like the local one.

Small on purpose: the shared two-CPU cluster, a few dozen units.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import ExecutionOptions, Unit, read_units, run_units
from agentlog.replay import _executor as executor
from agentlog.replay._ray_executor import batch_sizes
from tests.replay.test_ray_executor import _content

# The session's local cluster (tests/conftest.py); without Ray the tests skip.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]

JOB = "tests.replay._unit_jobs:score_states"


def _units(n: int, *, repeat_at: int | None = None) -> Iterator[Unit]:
    for i in range(n):
        j = 3 if i == repeat_at else i
        yield Unit(f"t{j:03d}", {"x": j, "layout": j % 3, "fail": j % 17 == 5},
                   {"source_run": "run-1", "window": j})


def test_batches_double_up_to_the_cap_when_the_count_is_unknown() -> None:
    assert list(itertools.islice(batch_sizes(None, 2, 2), 10)) == [
        2, 4, 8, 16, 32, 64, 128, 256, 256, 256]
    assert list(itertools.islice(batch_sizes(40, 1, 2), 3)) == [5, 5, 5]
    assert next(batch_sizes(10**6, 1, 2)) == 256


def test_ray_and_local_write_the_same_content_from_a_generator_read_lazily(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local, remote = tmp_path / "local.zst", tmp_path / "ray.zst"
    a = run_units(_units(60), JOB, out=local,
                  execution=ExecutionOptions(progress=False, concurrency=2))
    read = 0
    at_first_outcome: list[int] = []

    def counted() -> Iterator[Unit]:
        nonlocal read
        for unit in _units(60):
            read += 1
            yield unit

    add = executor._Batcher.add

    def noting(self: Any, outcome: Any) -> None:
        if not at_first_outcome:
            at_first_outcome.append(read)
        add(self, outcome)

    monkeypatch.setattr(executor._Batcher, "add", noting)
    b = run_units(counted(), JOB, out=remote,
                  execution=ExecutionOptions(progress=False, concurrency=2, executor="ray"))
    assert (a.total, a.done, a.failed) == (b.total, b.done, b.failed) == (60, 56, 4)
    assert _content(local) == _content(remote)
    # Two task slots, batches of 1 then 2: three units were out when the first came back
    # (plus at most the next batch, cut while it was on its way).
    assert at_first_outcome[0] <= 1 + 2 + 4 < 60
    assert al.verify(remote).ok


def test_a_repeated_key_in_a_generator_on_ray_writes_the_units_before_it(
        tmp_path: Path) -> None:
    out = tmp_path / "ray.zst"
    with pytest.raises(ValueError, match=r"unit key 't003' appears twice in `units`"):
        run_units(_units(30, repeat_at=20), JOB, out=out,
                  execution=ExecutionOptions(progress=False, concurrency=2, executor="ray"))
    assert sorted(read_units(out)) == [f"t{i:03d}" for i in range(20)]
    assert al.verify(out).ok
