"""Shared fixtures: a trace path per test and record-type filters."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _files_closed_after_each_test() -> Iterator[None]:
    """Close the files a test's finished runs left open for a next run (``al.flush()``).

    A ``durability="frame"`` run leaves its writer open, its last records queued: without
    this, they would be written during the next test, under its patched OS calls.
    """
    yield
    shared = sys.modules.get("agentlog._shared_writers")
    if shared is not None:
        shared.flush_all(timeout=10)


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return tmp_path / "run.zst"


def of_type(trace: Any, kind: type[T]) -> list[T]:
    """The records of one type, in file order."""
    return [r for r in trace.records if isinstance(r, kind)]


def blocked_signals(thread: threading.Thread) -> set[int]:
    """The signals ``thread`` blocks, read from Linux's /proc (its ``SigBlk`` mask)."""
    status = ""
    deadline = time.monotonic() + 10  # a thread just started may not be listed yet
    while "SigBlk" not in status and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    mask = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("SigBlk:")), 16)
    return {sig for sig in range(1, 65) if mask >> (sig - 1) & 1}
