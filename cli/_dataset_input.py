"""A Parquet dataset (``agentlog export --format parquet``) given where traces go: the
estimate commands read it in place of trace files."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.dataset import is_dataset

from ._output import BadInput


def single_dataset(paths: Sequence[Any]) -> Path | None:
    """The dataset folder when ``paths`` is exactly one; None for trace files."""
    if len(paths) == 1 and isinstance(paths[0], str | Path) and is_dataset(paths[0]):
        return Path(paths[0])
    return None


@contextlib.contextmanager
def dataset_errors() -> Iterator[None]:
    """A dataset that pyarrow cannot read (or no pyarrow) is ``BadInput``."""
    try:
        yield
    except al.MissingDependencyError as exc:
        raise BadInput(str(exc)) from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, BadInput):
            raise
        raise BadInput(f"the Parquet dataset cannot be read ({exc}); export it again with "
                       "agentlog export TRACES --format parquet --out DIR") from None
