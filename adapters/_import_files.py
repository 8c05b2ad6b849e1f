"""The files of an import (``agentlog import NAME``): the output folder, the trace each
input is written to, the input's digest, and a trace that appears only whole.

Shared by the importers (``inspect_ai``, ``otlp``), so every import refuses the same
things with the same words: an ``out`` that is a file, two inputs of one name, a trace
that exists (replaced only with ``overwrite=True``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import agentlog as al

__all__ = ["QUEUE_BYTES", "file_sha256", "out_folder", "trace_targets", "written_whole"]

#: How many bytes of records an import lets wait for the writer (``al.record``'s
#: ``max_queue_bytes``). An import is not a host to protect: it waits for the writer
#: rather than hold up to the recorder's default 64 MiB, so its memory stays flat
#: whatever the machine's speed.
QUEUE_BYTES = 4 << 20


def out_folder(out: str | os.PathLike[str]) -> Path:
    """``out`` as a folder path (not created); a ValueError when it is a file."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: is a file; `out` must be a folder for the traces "
                         "(created when missing)")
    return folder


def trace_targets(files: list[Path], folder: Path, *, overwrite: bool,
                  command: str) -> list[Path]:
    """``folder/<stem>.zst`` for each of ``files``, checked before anything is written.

    Raises:
        ValueError: two files would write one trace.
        agentlog.TracePathError: a trace exists and ``overwrite`` is False, or is a folder.
    """
    targets: dict[Path, Path] = {}
    for src in files:
        dst = folder / f"{src.stem}.zst"
        if dst in targets:
            raise ValueError(f"{targets[dst]} and {src} would both be written to {dst}; "
                             "import them into different output folders")
        targets[dst] = src
        if dst.is_dir() or (dst.exists() and not overwrite):
            raise al.TracePathError(
                f"{dst}: exists; an import never replaces a trace silently: pass "
                f"overwrite=True (agentlog import {command} --overwrite) to replace it, or "
                "write to another folder")
    return list(targets)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex (read in chunks)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextmanager
def written_whole(dst: Path) -> Iterator[Path]:
    """The path to record ``dst``'s runs to (``.NAME.partial`` beside it), renamed to
    ``dst`` once the block ends and every record is written; removed if the block raises,
    so a trace appears under its name only complete."""
    partial = dst.with_name(f".{dst.name}.partial")
    partial.unlink(missing_ok=True)  # left by an import that was stopped
    try:
        yield partial
        if not al.flush():
            raise TimeoutError(f"{partial}: the trace was not written within 10 s; check "
                               "that its folder is writable and has room, then import again")
    except BaseException:
        al.flush()
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, dst)
