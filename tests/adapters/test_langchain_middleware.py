"""``agentlog.adapters.langchain``: a LangChain v1 ``create_agent`` agent, driven offline by
LangChain's own fake chat model, recorded with the middleware and re-run frozen."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

import agentlog as al
from agentlog.adapters.langchain import AgentlogMiddleware
from agentlog.reentry import serving_tools

CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    CALLS.append(city)
    return f"{city}: sunny"


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, taking tools as a tool-calling model does."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _agent() -> Any:
    model = ScriptedModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"},
                                           "id": "call_1"}]),
        AIMessage(content="It is sunny in Oslo.")]))
    return create_agent(model, tools=[get_weather], middleware=[AgentlogMiddleware()])


QUESTION = {"messages": [{"role": "user", "content": "Weather in Oslo?"}]}


def test_each_turn_and_tool_call_is_a_window_and_the_tool_a_recorded_call(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        out = _agent().invoke(QUESTION)
    assert out["messages"][-1].content == "It is sunny in Oslo."
    trace = al.read(path)
    assert [w.name for w in trace.windows()] == [
        "langchain.turn", "langchain.tool.get_weather", "langchain.turn"]
    first, _ = trace.windows("langchain.turn")
    assert first.entry_value()["messages"][0]["content"] == "Weather in Oslo?"
    assert first.exit_value()[0]["tool_calls"][0]["args"] == {"city": "Oslo"}
    (call,) = trace.tool_calls()
    assert call.name == "get_weather" and call.status == 0
    assert al.verify(path).ok


def test_a_frozen_replay_serves_the_tool_message_without_running_the_tool(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "src.zst", seed=1, mode="w"):
        live = _agent().invoke(QUESTION)
    CALLS.clear()
    with al.record(tmp_path / "replay.zst", seed=1, mode="w"), \
            serving_tools(al.read(tmp_path / "src.zst")) as served:
        again = _agent().invoke(QUESTION)
    assert CALLS == [] and served.served == 1 and served.misses == 0
    live_tool = [m for m in live["messages"] if isinstance(m, ToolMessage)]
    again_tool = [m for m in again["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in again_tool] == [m.content for m in live_tool] == ["Oslo: sunny"]
    assert type(again_tool[0]) is ToolMessage


def test_the_async_path_records_the_same_windows(tmp_path: Path) -> None:
    async def main() -> Any:
        async with al.record(tmp_path / "t.zst", seed=1, mode="w"):
            return await _agent().ainvoke(QUESTION)

    out = asyncio.run(main())
    assert out["messages"][-1].content == "It is sunny in Oslo."
    assert [w.name for w in al.read(tmp_path / "t.zst").windows()] == [
        "langchain.turn", "langchain.tool.get_weather", "langchain.turn"]
