"""``agentlog.reentry.serving_tools``: ``@al.tool`` calls answered from a recording."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import agentlog as al
from agentlog.context import copy_context_executor
from agentlog.reentry import RecordedTool, serving_tools, tool_args_hash

calls: list[str] = []


@al.tool("lookup")
def lookup(query: str, k: int = 1) -> dict[str, object]:
    calls.append(query)
    if query == "bad":
        raise KeyError("no such page")
    return {"query": query, "hits": list(range(k))}


@al.tool("alookup")
async def alookup(query: str) -> str:
    calls.append(query)
    return query.upper()


@al.window("served_win")
def agent(queries: list[str]) -> list[object]:
    return [lookup(q, k=2) for q in queries]


def _record(tmp_path: Path) -> al.Trace:
    calls.clear()
    with al.record(tmp_path / "src.zst", seed=1, mode="w"):
        agent(["a", "b"])
        with pytest.raises(KeyError):
            lookup("bad")
        asyncio.run(alookup("x"))
    calls.clear()
    return al.read(tmp_path / "src.zst")


def test_a_served_call_returns_the_recorded_result_without_calling_the_tool(
    tmp_path: Path,
) -> None:
    src = _record(tmp_path)
    with al.record(tmp_path / "replay.zst", seed=1, mode="w"), serving_tools(src) as serving:
        out = agent(["b", "a"])
        assert asyncio.run(alookup("x")) == "X"
    assert calls == [] and serving.served == 3
    assert out == [{"query": "b", "hits": [0, 1]}, {"query": "a", "hits": [0, 1]}]
    replayed = al.read(tmp_path / "replay.zst").tool_calls()
    assert [r.served for r in replayed] == [True, True, True]
    by_args = {r.args_hash: r.result_hash for r in src.tool_calls()}
    assert all(by_args[r.args_hash] == r.result_hash for r in replayed)  # same results


def test_a_recorded_error_is_raised_again_and_a_builtin_keeps_its_type(tmp_path: Path) -> None:
    src = _record(tmp_path)
    with al.record(tmp_path / "replay.zst", seed=1, mode="w"), serving_tools(src), \
            pytest.raises(KeyError, match="no such page"):
        lookup("bad")
    assert calls == []
    (rec,) = al.read(tmp_path / "replay.zst").tool_calls()
    assert rec.status == 1 and rec.served and rec.error_type == "KeyError"


def test_a_non_builtin_recorded_error_comes_back_as_a_replay_error(tmp_path: Path) -> None:
    def recorded(name: str, args_hash: bytes) -> RecordedTool:
        return RecordedTool(1, error_type="os.system", error_message="boom")

    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(recorded), \
            pytest.raises(al.ReplayError, match=r"tool 'lookup': the recorded call raised "
                                                r"os.system: boom \(served"):
        lookup("q")
    assert calls == []


def test_differing_arguments_raise_cache_miss_naming_the_tool_and_the_hash(
    tmp_path: Path,
) -> None:
    src = _record(tmp_path)
    with al.record(tmp_path / "replay.zst", seed=1, mode="w"):
        expected = tool_args_hash(lookup, ("a",), {"k": 3}).hex()
        with serving_tools(src), pytest.raises(
                al.CacheMiss, match=rf"tool 'lookup' called with arguments {expected[:16]}… "
                                    r"was never recorded.*mode='branch' or 'rerun'") as info:
            lookup("a", k=3)  # k differs from the recording (k=2)
    assert info.value.key == expected and calls == []
    (rec,) = al.read(tmp_path / "replay.zst").tool_calls()
    assert rec.status == 1 and rec.served and rec.error_type == "CacheMiss"


def test_a_window_view_serves_only_that_window_instance(tmp_path: Path) -> None:
    src = _record(tmp_path)
    (view,) = src.windows("served_win")
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(view):
        assert lookup("a", k=2) == {"query": "a", "hits": [0, 1]}  # recorded in the window
        with pytest.raises(al.CacheMiss, match="tool 'lookup' called with arguments"):
            lookup("bad")  # recorded, but outside the window


def test_serving_reaches_copied_contexts_and_live_lets_calls_through(tmp_path: Path) -> None:
    src = _record(tmp_path)
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(src) as serving:
        with copy_context_executor(max_workers=2) as pool:
            assert list(pool.map(lambda q: lookup(q, k=2)["query"], ["a", "b"])) == ["a", "b"]

        async def both() -> list[str]:
            return list(await asyncio.gather(alookup("x"), alookup("x")))

        assert asyncio.run(both()) == ["X", "X"]
        assert calls == []
        serving.live = True
        assert lookup("new") == {"query": "new", "hits": [0]}
    assert calls == ["new"]
    recs = al.read(tmp_path / "r.zst").tool_calls()
    assert [r.served for r in recs] == [True] * 4 + [False]


def test_unset_nothing_changes_and_serving_needs_a_run(tmp_path: Path) -> None:
    src = _record(tmp_path)
    with al.record(tmp_path / "r.zst", seed=1, mode="w"):
        assert lookup("zzz") == {"query": "zzz", "hits": [0]}
    assert calls == ["zzz"]
    assert [r.served for r in al.read(tmp_path / "r.zst").tool_calls()] == [False]
    with pytest.raises(RuntimeError, match=r"serving_tools needs a run: call it inside "
                                           r"`with al.record\(...\)`"), serving_tools(src):
        pass
