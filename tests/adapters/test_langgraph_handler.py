"""``agentlog.adapters.langchain.AgentlogCallbackHandler``: a LangGraph graph's nodes as
windows, holding the calls each node makes, sync and async."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph

import agentlog as al
from agentlog.adapters.langchain import AgentlogCallbackHandler


class State(TypedDict):
    x: int


@al.tool("double")
def double(x: int) -> int:
    return 2 * x


def _graph(fail: bool = False) -> Any:
    def a(state: State) -> dict[str, int]:
        return {"x": double(state["x"])}

    def b(state: State) -> dict[str, int]:
        if fail:
            raise ValueError("node b failed")
        return {"x": state["x"] + 1}

    graph = StateGraph(State)
    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    return graph.compile()


def _windows(path: Path) -> list[tuple[str, Any, Any, int]]:
    return [(w.name, w.entry_value(), w.exit_value(), w.exit.tool_calls)
            for w in al.read(path).windows() if w.exit is not None]


EXPECTED = [("langgraph.a", {"x": 1}, {"x": 2}, 1), ("langgraph.b", {"x": 2}, {"x": 3}, 0)]


def test_each_node_is_a_window_holding_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        out = _graph().invoke({"x": 1}, config={"callbacks": [AgentlogCallbackHandler()]})
    assert out == {"x": 3} and _windows(path) == EXPECTED
    assert al.verify(path).ok


def test_the_async_graph_records_the_same_windows(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    async def main() -> Any:
        async with al.record(path, seed=1):
            return await _graph().ainvoke({"x": 1},
                                          config={"callbacks": [AgentlogCallbackHandler()]})

    assert asyncio.run(main()) == {"x": 3} and _windows(path) == EXPECTED


def test_a_node_that_raises_is_a_failed_window(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1), pytest.raises(ValueError, match="node b failed"):
        _graph(fail=True).invoke({"x": 1}, config={"callbacks": [AgentlogCallbackHandler()]})
    (b,) = al.read(path).windows("langgraph.b")
    assert b.exit is not None and b.exit.status == 1
