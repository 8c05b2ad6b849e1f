"""``agentlog.adapters.pydantic_ai``: a pydantic-ai agent driven offline by its own
``FunctionModel``, recorded with the capability and its tool served frozen."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentlog as al
from agentlog.adapters.pydantic_ai import AgentlogCapability
from agentlog.reentry import serving_tools

CALLS: list[str] = []


def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
    """Asks for the weather first, answers with the tool's return once it has it."""
    returned = [p for m in messages for p in getattr(m, "parts", ())
                if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"},
                                                 tool_call_id="call_1")])
    return ModelResponse(parts=[TextPart(f"Weather: {returned[0].content}")])


def _agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[AgentlogCapability()])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        CALLS.append(city)
        return f"{city}: sunny"

    return agent


def _run(path: Path) -> str:
    async def main() -> str:
        async with al.record(path, seed=1, mode="w"):
            return (await _agent().run("Weather in Oslo?")).output

    return asyncio.run(main())


def test_each_request_and_tool_call_is_a_window_with_the_tool_recorded(
        tmp_path: Path) -> None:
    assert _run(tmp_path / "t.zst") == "Weather: Oslo: sunny"
    trace = al.read(tmp_path / "t.zst")
    assert [w.name for w in trace.windows()] == [
        "pydantic_ai.turn", "pydantic_ai.tool.get_weather", "pydantic_ai.turn"]
    first = trace.windows("pydantic_ai.turn")[0]
    assert first.exit_value()[0]["tool_name"] == "get_weather"
    (call,) = trace.tool_calls()
    assert (call.name, call.status) == ("get_weather", 0)
    assert al.verify(tmp_path / "t.zst").ok


def test_the_same_run_seals_the_same_windows_and_a_frozen_replay_serves_the_tool(
        tmp_path: Path) -> None:
    _run(tmp_path / "a.zst")
    CALLS.clear()

    async def replay() -> str:
        async with al.record(tmp_path / "b.zst", seed=1, mode="w"):
            with serving_tools(al.read(tmp_path / "a.zst")) as served:
                out = (await _agent().run("Weather in Oslo?")).output
            assert served.served == 1 and served.misses == 0
            return out

    assert asyncio.run(replay()) == "Weather: Oslo: sunny" and CALLS == []
    a, b = (al.read(tmp_path / f).windows() for f in ("a.zst", "b.zst"))
    assert [w.enter.entry_hash for w in a] == [w.enter.entry_hash for w in b]
