"""A run whose trace file vanished (its folder removed) warns as it closes.

Under the default durability the run's last records are still queued when it closes;
they went to a file no folder holds, and nothing said so.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import agentlog as al


@al.window("step")
def step(x: int) -> int:
    return x + 1


def test_removing_the_folder_during_a_run_warns_at_close(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    path = folder / "t.zst"
    with pytest.warns(al.InstrumentationWarning, match=r"the trace file is no longer at this "
                                                       r"path .*folder removed"):
        with al.record(path, seed=1, mode="w"):
            step(1)
            shutil.rmtree(folder)
            step(2)
        al.flush()  # the writer's own later notice, if any, lands here too


def test_a_file_replaced_at_its_path_warns_too(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with pytest.warns(al.InstrumentationWarning, match="no longer at this path"):
        with al.record(path, seed=1, mode="w"):
            step(1)
            path.unlink()
            path.write_bytes(b"someone else's file")
        al.flush()


def test_a_run_whose_file_stays_says_nothing(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with al.record(tmp_path / "t.zst", seed=1, mode="w"):
            step(1)
        al.flush()
