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


def _graph(fail: bool = False, checkpointer: Any = None) -> Any:
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
    return graph.compile(checkpointer=checkpointer)


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


# ----------------------------------------------------------------------------- forks


def _checkpointed() -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    return _graph(checkpointer=InMemorySaver())


def test_a_run_forked_from_a_checkpoint_is_a_branch_of_the_run_that_wrote_it(
        tmp_path: Path) -> None:
    from agentlog.adapters.langchain import FORK_META, fork_meta, graph_config

    graph = _checkpointed()
    thread = {"configurable": {"thread_id": "t1"}}
    with al.record(tmp_path / "t.zst", seed=1, task="q") as parent:
        assert graph.invoke({"x": 1}, graph_config(thread)) == {"x": 3}
    (after_a,) = [s for s in graph.get_state_history(thread) if s.next == ("b",)]
    # Time travel: run b again from the checkpoint after a, as it was.
    replayed = fork_meta(graph, after_a.config)
    with al.record(tmp_path / "t.zst", seed=1, task="q", meta=replayed):
        assert graph.invoke(None, graph_config(after_a.config)) == {"x": 3}
    # A fork: edit the state after a, then run b from the edit.
    edit = graph.update_state(after_a.config, {"x": 100})
    forked = fork_meta(graph, edit)
    with al.record(tmp_path / "t.zst", seed=2, task="q", meta=forked) as branch:
        assert graph.invoke(None, graph_config(edit)) == {"x": 101}
    runs = al.read(tmp_path / "t.zst").runs
    assert [r.start.meta.get(FORK_META, {}).get("parent_run") for r in runs] == [
        None, parent.run_id, parent.run_id]
    link = runs[2].start.meta[FORK_META]
    assert link["checkpoint_id"] == edit["configurable"]["checkpoint_id"]
    assert link["from_checkpoint"] == after_a.config["configurable"]["checkpoint_id"]
    assert (link["thread_id"], link["step"], link["edited"]) == ("t1", 1, True)
    assert runs[1].start.meta[FORK_META]["edited"] is False
    # The branch re-ran node b alone, from the edited state.
    assert [(w.name, w.entry_value(), w.exit_value()) for w in runs[2].windows] == [
        ("langgraph.b", {"x": 100}, {"x": 101})]
    # Its own checkpoints name it: a fork of the branch links to the branch.
    head = graph.get_state(thread)
    assert fork_meta(graph, head.config)[FORK_META]["parent_run"] == branch.run_id


def test_a_checkpoint_no_recorded_run_wrote_is_refused_with_the_fix(tmp_path: Path) -> None:
    from agentlog.adapters.langchain import fork_meta

    graph = _checkpointed()
    thread = {"configurable": {"thread_id": "t2"}}
    graph.invoke({"x": 1}, thread)  # no graph_config: its checkpoints name no run
    with pytest.raises(ValueError, match=r"not written by a recorded run.*graph_config"):
        fork_meta(graph, thread)
    with pytest.raises(ValueError, match="no checkpoint of thread 'nope'"):
        fork_meta(graph, {"configurable": {"thread_id": "nope"}})


def test_afork_meta_walks_an_async_checkpointer(tmp_path: Path) -> None:
    from agentlog.adapters.langchain import FORK_META, afork_meta, graph_config

    graph = _checkpointed()
    thread = {"configurable": {"thread_id": "t3"}}

    async def main() -> dict[str, Any]:
        with al.record(tmp_path / "a.zst", seed=1) as run:
            await graph.ainvoke({"x": 1}, graph_config(thread))
        (after_a,) = [s async for s in graph.aget_state_history(thread) if s.next == ("b",)]
        edit = await graph.aupdate_state(after_a.config, {"x": 5})
        meta = await afork_meta(graph, edit)
        assert meta[FORK_META]["parent_run"] == run.run_id
        return meta

    assert asyncio.run(main())[FORK_META]["edited"] is True
