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
