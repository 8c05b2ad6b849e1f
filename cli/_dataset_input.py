"""A Parquet dataset (``agentlog export --format parquet``) given where traces go: the
estimate commands read it in place of trace files.

A dataset is a local folder, or a URI that pyarrow opens (``s3://bucket/prefix``): a URI
is always taken for a dataset (no trace is read from one), and is checked here, so that a
missing bucket or prefix or refused credentials is ``BadInput`` naming what to check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from agentlog.dataset import is_dataset, is_uri

from ._options import TRACES_HELP, traces_argument
from ._output import BadInput

#: A dataset's location: its folder, or its URI as given.
Dataset = Path | str
#: TRACES of a command that also reads one Parquet dataset: strings, so that a URI keeps
#: its ``//`` (a ``Path`` would fold it).
TracesOrDataset = Annotated[list[str], traces_argument(
    f"{TRACES_HELP} Or one Parquet dataset (agentlog export --format parquet): its folder, "
    "or a URI such as s3://bucket/prefix.")]


def single_dataset(paths: Sequence[Any]) -> Dataset | None:
    """The dataset when ``paths`` is exactly one dataset folder or one URI; None for trace
    files. A URI that holds no dataset, or whose store refuses, is ``BadInput``, as is a URI
    beside other paths."""
    uris = [p for p in paths if is_uri(p)]
    if uris and len(paths) > 1:
        raise BadInput(f"{uris[0]}: a URI names a Parquet dataset, which is read alone; pass "
                       "it as the only TRACES argument (trace files are read from local paths)")
    if len(paths) != 1 or not isinstance(paths[0], str | Path):
        return None
    if uris:
        try:
            found = is_dataset(uris[0])
        except (OSError, ValueError) as exc:  # refused, unreachable, or no such filesystem
            raise BadInput(str(exc)) from None
        if not found:
            raise BadInput(
                f"{uris[0]}: not an agentlog Parquet dataset (no runs/ parts under it: its "
                "bucket or prefix is missing or empty); check the URI, or export one there "
                f"with agentlog export TRACES --format parquet --out {uris[0]}")
        return str(uris[0])
    return Path(paths[0]) if is_dataset(paths[0]) else None


def trace_paths(traces: Sequence[str | Path]) -> list[Path]:
    """TRACES given as strings, as paths (once no dataset is among them)."""
    return [Path(t) for t in traces]
