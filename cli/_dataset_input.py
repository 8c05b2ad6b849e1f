"""A Parquet dataset (``agentlog export --format parquet``) given where traces go: the
estimate commands read it in place of trace files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentlog.dataset import is_dataset


def single_dataset(paths: Sequence[Any]) -> Path | None:
    """The dataset folder when ``paths`` is exactly one; None for trace files."""
    if len(paths) == 1 and isinstance(paths[0], str | Path) and is_dataset(paths[0]):
        return Path(paths[0])
    return None
