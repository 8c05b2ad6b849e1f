"""Shared fixtures: a trace path per test and record-type filters."""

from __future__ import annotations

import sys
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
