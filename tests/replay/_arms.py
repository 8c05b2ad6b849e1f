"""The arm runs an ``intervene`` output folder holds, keyed as a test compares them."""

from __future__ import annotations

from pathlib import Path

import agentlog as al


def arm_traces(out: Path) -> dict[tuple[str, str, int], al.Trace]:
    """``(source run id, arm name, replicate) -> the arm's trace`` of ``out/arms``."""
    got = {}
    for path in sorted((out / "arms").glob("*.zst")):
        trace = al.read(path)
        start = trace.runs[0].start
        assert start is not None
        m = start.meta["agentlog.replay.arm"]
        got[m["source_run"], m["arm"], m["replicate"]] = trace
    return got
