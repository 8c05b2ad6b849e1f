"""Every call shape of a window goes through its one open/close path and writes the same records.

Positional and keyword calls, defaults, coroutines, failures and scrubbed arguments, in a
run that cuts a frame at every exit and in one that does not: durability changes where
frames end, never what a window writes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import WindowEnter, WindowExit
from tests.conftest import of_type


@al.window("leaf")
def leaf(x: int, y: str = "d") -> dict[str, Any]:
    return {"x": x, "y": y}


@al.window("aleaf")
async def aleaf(x: int, y: str = "d") -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"x": x, "y": y}


@al.window("only")
def only(x: int, /, y: str = "d") -> str:
    return y


@al.window("afail")
async def afail(x: int) -> None:
    await asyncio.sleep(0)
    raise KeyError(x)


async def _async_calls() -> None:
    await aleaf(1)
    await aleaf(2, "e")
    await aleaf(3, y="f")
    await aleaf(x=4)
    await aleaf(y="g", x=5)
    with pytest.raises(KeyError):
        await afail(x=6)


@al.window("parent")
def parent() -> None:
    leaf(1)
    leaf(2, "e")
    leaf(3, y="f")
    leaf(x=4)
    leaf(y="g", x=5)
    leaf(6, y="Bearer abcdefghijklmnopqrstuvwxyz0123456789")  # scrubbed at either durability
    with pytest.raises(TypeError):
        leaf(7, z=1)  # unknown keyword: the real call raises, ⊥ is recorded
    with pytest.raises(TypeError):
        leaf(8, x=8)  # given twice
    with pytest.raises(TypeError):
        only(x=9)  # positional-only passed by keyword
    asyncio.run(_async_calls())


def test_every_call_shape_writes_the_same_records_whatever_the_durability(
    tmp_path: Path,
) -> None:
    fields = ("name", "parent", "entry_hash", "entry", "args_hash")
    exit_fields = ("name", "status", "exit_hash", "exit", "error_type", "tool_calls",
                   "selections")
    results = []
    for durability in ("frame", "window"):
        path = tmp_path / f"{durability}.zst"
        with al.record(path, seed=1, durability=durability):
            parent()
        trace = al.read(path)
        results.append((
            [tuple(getattr(e, f) for f in fields) for e in of_type(trace, WindowEnter)],
            [tuple(getattr(e, f) for f in exit_fields) for e in of_type(trace, WindowExit)],
        ))
        assert al.verify(path).ok
    assert len(results[0][0]) == 16
    assert results[0] == results[1]
    assert b"abcdefghijklmnop" not in (tmp_path / "frame.zst").read_bytes()


def test_keyword_and_positional_calls_seal_the_same_entry(tmp_path: Path) -> None:
    with al.record(tmp_path / "t.zst", seed=1):
        assert leaf(1) == leaf(x=1) == leaf(1, "d") == leaf(y="d", x=1) == {"x": 1, "y": "d"}
        assert asyncio.run(aleaf(x=2, y="k")) == {"x": 2, "y": "k"}
        asyncio.run(aleaf(2, "k"))
    trace = al.read(tmp_path / "t.zst")
    leaves = {e.entry_hash for e in of_type(trace, WindowEnter) if e.name == "leaf"}
    aleaves = {e.entry_hash for e in of_type(trace, WindowEnter) if e.name == "aleaf"}
    assert len(leaves) == len(aleaves) == 1
    assert [e.name for e in of_type(trace, WindowExit)] == ["leaf"] * 4 + ["aleaf"] * 2


def test_a_failing_coroutine_records_its_failure_and_reraises(tmp_path: Path) -> None:
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(KeyError, match="6"):
        asyncio.run(afail(6))
    (exit_,) = of_type(al.read(tmp_path / "t.zst"), WindowExit)
    assert (exit_.status, exit_.error_type) == (al.records.EXIT_FAILED, "KeyError")
