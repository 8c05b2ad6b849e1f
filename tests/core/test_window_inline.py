"""Keyword and coroutine calls take the inlined window path, writing what the general one does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog import _window
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
    leaf(6, y="Bearer abcdefghijklmnopqrstuvwxyz0123456789")  # scrubbed on both paths
    with pytest.raises(TypeError):
        leaf(7, z=1)  # unknown keyword: the real call raises, both paths record ⊥
    with pytest.raises(TypeError):
        leaf(8, x=8)  # given twice
    with pytest.raises(TypeError):
        only(x=9)  # positional-only passed by keyword
    asyncio.run(_async_calls())


def test_keyword_calls_and_coroutines_write_what_the_general_path_writes(tmp_path: Path) -> None:
    fields = ("name", "parent", "entry_hash", "entry", "args_hash")
    exit_fields = ("name", "status", "exit_hash", "exit", "error_type", "tool_calls",
                   "selections")
    results = []
    for plain, path in ((True, tmp_path / "fast.zst"), (False, tmp_path / "general.zst")):
        # durability="window" keeps every call on the general path (the run is not "plain")
        with al.record(path, seed=1, durability="frame" if plain else "window") as run:
            assert run.plain is plain
            parent()
        trace = al.read(path)
        results.append((
            [tuple(getattr(e, f) for f in fields) for e in of_type(trace, WindowEnter)],
            [tuple(getattr(e, f) for f in exit_fields) for e in of_type(trace, WindowExit)],
        ))
        assert al.verify(path).ok
    assert len(results[0][0]) == 16
    assert results[0] == results[1]
    assert b"abcdefghijklmnop" not in (tmp_path / "fast.zst").read_bytes()


def test_keyword_calls_and_coroutines_do_not_go_through_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def general(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the general path was taken")

    monkeypatch.setattr(_window, "_open", general)
    with al.record(tmp_path / "t.zst", seed=1):
        assert leaf(x=1, y="k") == {"x": 1, "y": "k"}
        assert leaf(2, y="k") == {"x": 2, "y": "k"}
        assert asyncio.run(aleaf(3)) == {"x": 3, "y": "d"}
        assert asyncio.run(aleaf(x=4, y="k")) == {"x": 4, "y": "k"}
    exits = of_type(al.read(tmp_path / "t.zst"), WindowExit)
    assert [e.name for e in exits] == ["leaf", "leaf", "aleaf", "aleaf"]


def test_a_failing_coroutine_on_the_inlined_path_records_its_failure_and_reraises(
    tmp_path: Path
) -> None:
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(KeyError, match="6"):
        asyncio.run(afail(6))
    (exit_,) = of_type(al.read(tmp_path / "t.zst"), WindowExit)
    assert (exit_.status, exit_.error_type) == (al.records.EXIT_FAILED, "KeyError")
