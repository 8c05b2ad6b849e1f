"""Instrumentation never breaks the host: unwritable paths and full disks warn once."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import pytest

import agentlog as al
import agentlog._writer.frames as frames_mod


@al.window("compute")
def compute(x: int) -> int:
    if x < 0:
        raise ValueError("negative")
    return x * 2


def test_an_unwritable_path_warns_once_and_the_agent_runs_unchanged(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = blocker / "run.zst"  # unwritable even for root: its parent is a regular file
    with pytest.warns(al.InstrumentationWarning) as caught:
        with al.record(path, seed=1):
            assert [compute(i) for i in range(100)] == [2 * i for i in range(100)]
            with pytest.raises(ValueError, match="negative"):
                compute(-1)
        al.flush()
    assert len([w for w in caught if issubclass(w.category, al.InstrumentationWarning)]) == 1
    assert not path.exists()


def test_a_full_disk_warns_once_counts_dropped_records_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    path = tmp_path / "full.zst"
    real_writev = os.writev

    def full_disk(fd: int, parts: list[bytes]) -> int:
        if sum(map(len, parts)) > 8:  # let the 8-byte file header through, fail every frame
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_writev(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", full_disk)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with al.record(path, seed=1) as run:
            results = [compute(i) for i in range(50)]
            al.flush()
            dropped = run.writer.dropped
    assert results == [2 * i for i in range(50)]
    assert dropped > 0
    assert sum(issubclass(w.category, al.InstrumentationWarning) for w in caught) == 1
