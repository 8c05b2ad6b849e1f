"""``agentlog.adapters.smolagents``: a ``ToolCallingAgent`` driven by a scripted model,
recorded with ``instrument`` and its tool served under a frozen replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("smolagents")

from smolagents import ToolCallingAgent

import agentlog as al
from agentlog.adapters import smolagents as smol
from agentlog.reentry import serving_tools

from . import _smol_tools as tools


def _agent() -> Any:
    return smol.instrument(ToolCallingAgent(tools=[tools.get_weather],
                                            model=tools.ScriptedModel(), verbosity_level=0))


def test_model_turns_and_tool_calls_are_windows_with_the_tool_recorded(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        assert _agent().run("Weather in Oslo?") == "sunny in Oslo"
    trace = al.read(path)
    names = [w.name for w in trace.windows()]
    assert names[:3] == ["smolagents.turn", "smolagents.tool.get_weather", "smolagents.turn"]
    (weather,) = [c for c in trace.tool_calls() if c.name == "get_weather"]
    assert weather.status == 0
    (window,) = trace.windows("smolagents.tool.get_weather")
    assert window.entry_value() == {"city": "Oslo"} and window.exit_value() == "Oslo: sunny"
    assert al.verify(path).ok


def test_a_frozen_replay_serves_the_tool_without_running_it(tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=1, mode="w"):
        _agent().run("Weather in Oslo?")
    tools.CALLS.clear()
    with al.record(tmp_path / "b.zst", seed=1, mode="w"), \
            serving_tools(al.read(tmp_path / "a.zst")) as served:
        assert _agent().run("Weather in Oslo?") == "sunny in Oslo"
    assert tools.CALLS == [] and served.misses == 0 and served.served >= 1


def test_instrumenting_twice_does_not_record_twice(tmp_path: Path) -> None:
    agent = smol.instrument(_agent())
    with al.record(tmp_path / "t.zst", seed=1, mode="w"):
        agent.run("Weather in Oslo?")
    names = [w.name for w in al.read(tmp_path / "t.zst").windows()]
    assert names.count("smolagents.tool.get_weather") == 1


def test_a_streamed_turn_is_a_window_holding_its_deltas(tmp_path: Path) -> None:
    """stream_outputs=True: the agent reads generate_stream; each turn is still a window,
    its exit the deltas as streamed, and the tool between the turns is recorded."""
    agent = smol.instrument(ToolCallingAgent(tools=[tools.get_weather],
                                             model=tools.StreamingModel(), verbosity_level=0,
                                             stream_outputs=True))
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        assert agent.run("Weather in Oslo?") == "sunny in Oslo"
    trace = al.read(path)
    names = [w.name for w in trace.windows()]
    assert names[:3] == ["smolagents.turn", "smolagents.tool.get_weather", "smolagents.turn"]
    first = trace.windows("smolagents.turn")[0]
    deltas = first.exit_value()
    assert len(deltas) == 2 and not first.failed
    assert deltas[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert deltas[1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    assert [c.name for c in trace.tool_calls()].count("get_weather") == 1
    assert al.verify(path).ok


def test_a_stream_the_agent_stops_reading_fails_its_turn_and_nests_nothing(
        tmp_path: Path) -> None:
    model = smol.record_model(tools.StreamingModel())
    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        stream = model.generate_stream([])
        next(stream)
        stream.close()  # what a consumer that raised or broke off does
        al.score("after", 1.0)
        with al.open_window("next") as nxt:
            nxt.close(exit=1)
    trace = al.read(path)
    (turn,) = trace.windows("smolagents.turn")
    assert turn.failed and "closed the model's stream after 1 deltas" in (
        turn.exit.error_message or "")
    (after,) = trace.windows("next")
    assert after.parent == -1  # not inside the abandoned turn
