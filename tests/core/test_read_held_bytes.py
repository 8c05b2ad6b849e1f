"""``ReadLimits.max_held_bytes``: a reader holds at most 16 MiB of one frame's data.

The compression-ratio bound alone let a small file hold hundreds of MB at once (issue
30.5). The writer cuts frames of at most 4 MiB, so only a single record over 16 MiB (an
artifact that large, a selection over more than a million candidates) needs the limit
raised, for a file one trusts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agentlog as al
from agentlog._trace_format import MAX_HELD_BYTES

MiB = 1 << 20


@al.window("load")
def load(document: bytes) -> int:
    return len(document)


@pytest.fixture(scope="module")
def big_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose window entry is a 20 MiB artifact (stored as one Blob: one frame)."""
    path = tmp_path_factory.mktemp("held") / "big.zst"
    with al.record(path, seed=1):
        load(os.urandom(20 * MiB))
    al.flush()
    return path


def test_the_default_holds_16_mib() -> None:
    assert al.ReadLimits().max_held_bytes == MAX_HELD_BYTES == 16 * MiB


def test_a_frame_over_the_limit_is_refused_naming_the_limit_to_raise(big_record: Path) -> None:
    match = (r"over the 16777216 bytes a reader holds at once .*"
             r"al\.ReadLimits\(max_held_bytes=\.\.\.\)")
    with pytest.raises(al.TraceFormatError, match=match):
        al.read(big_record)
    with pytest.raises(al.TraceFormatError, match=match):
        al.verify(big_record)


def test_raised_for_a_trusted_file_it_reads_and_verifies(big_record: Path) -> None:
    trusted = al.ReadLimits(max_held_bytes=64 * MiB)
    (window,) = al.read(big_record, limits=trusted).windows("load")
    assert window.exit_value() == 20 * MiB
    assert al.verify(big_record, limits=trusted).ok
