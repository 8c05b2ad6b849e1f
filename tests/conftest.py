"""Shared fixtures: a trace path per test and record-type filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return tmp_path / "run.zst"


def of_type(trace: Any, kind: type[T]) -> list[T]:
    """The records of one type, in file order."""
    return [r for r in trace.records if isinstance(r, kind)]
