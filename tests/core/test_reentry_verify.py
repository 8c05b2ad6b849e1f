"""``verify`` covers what a replay reads: stored tool bytes and the recorded stream offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

import agentlog as al
from agentlog._writer import TraceWriter
from agentlog.records import Blob, RunEnd, ToolCall, WindowEnter, encode_artifact


@al.tool("verify_lookup")
def lookup(key: str) -> str:
    return key.upper()


@al.window("verify_w")
def work(key: str) -> str:
    al.select([0.5, 0.5], candidates=["x", "y"], name="doc")
    return lookup(key)


def recorded(path: Path) -> None:
    with al.record(path, seed=3, mode="w"):
        for _ in range(3):
            al.select([0.5, 0.5], candidates=["x", "y"], name="doc")
        work("k")


def rewritten(src: Path, dst: Path, change: Any) -> Path:
    """A copy of ``src`` with ``change(record)`` applied, written (and digested) anew."""
    trace = al.read(src)
    w = TraceWriter(dst)
    for rec in trace.records:
        if type(rec) is Blob:
            continue
        if type(rec) is RunEnd:  # the writer seals it anew: receipt and digest over the
            rec = msgspec.structs.replace(rec, digest=None, receipt=b"")  # new frames
        w.put(change(rec))
    for sel in trace.selections():
        w.put_blob(sel.pool, trace.blob(sel.pool), "pool")
    w.close()
    return dst


def kinds(path: Path) -> set[str]:
    return {p.kind for p in al.verify(path).problems}


def test_an_untouched_rewrite_verifies(tmp_path: Path) -> None:
    recorded(tmp_path / "a.zst")
    assert al.verify(tmp_path / "a.zst").ok
    assert kinds(rewritten(tmp_path / "a.zst", tmp_path / "b.zst", lambda r: r)) == set()


def test_an_edited_stored_tool_result_is_reported(tmp_path: Path) -> None:
    recorded(tmp_path / "a.zst")

    def edit(rec: Any) -> Any:
        if type(rec) is ToolCall:
            return msgspec.structs.replace(rec, result=encode_artifact("FORGED"))
        return rec

    report = al.verify(rewritten(tmp_path / "a.zst", tmp_path / "b.zst", edit))
    assert [p.kind for p in report.problems] == ["artifact-hash"]
    assert "result of tool 'verify_lookup' does not hash to its recorded" in str(
        report.problems[0])


def test_a_draw_below_the_windows_recorded_offset_is_reported(tmp_path: Path) -> None:
    recorded(tmp_path / "a.zst")

    def edit(rec: Any) -> Any:
        if type(rec) is WindowEnter:
            assert rec.steps == {"doc": 3}
            return msgspec.structs.replace(rec, steps={"doc": 4})
        return rec

    report = al.verify(rewritten(tmp_path / "a.zst", tmp_path / "b.zst", edit))
    assert [p.kind for p in report.problems] == ["stream-offset"]
    assert "'doc' step 3 is drawn inside window 'verify_w' (id 0), whose entry recorded the " \
        "stream at step 4" in str(report.problems[0])
