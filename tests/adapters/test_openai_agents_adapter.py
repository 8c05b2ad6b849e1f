"""``agentlog.adapters.openai_agents``: the Agents SDK's tools example with the adapter's
hooks, tool decorator and model provider instead of hand-placed windows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

import httpx2  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters import openai_agents  # noqa: E402
from agentlog.records import WindowEnter, WindowExit  # noqa: E402
from agentlog.replay import Design, ModelCache, intervene  # noqa: E402

from .test_openai_agents_example import ScriptedResponses  # noqa: E402

APP = __name__
SERVER = ScriptedResponses()
PROVIDER = openai_agents.model_provider(openai.AsyncOpenAI(
    api_key="sk-test", max_retries=0,
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(SERVER))))


class Weather(BaseModel):
    city: str
    temperature_range: str
    conditions: str


@openai_agents.function_tool
def get_weather(city: Annotated[str, "The city to get the weather for"]) -> Weather:
    """Get the current weather information for a specified city."""
    return Weather(city=city, temperature_range="14-20C", conditions="Sunny with wind.")


agent = agents.Agent(name="Hello world", instructions="You are a helpful agent.",
                     tools=[get_weather], model="gpt-4.1-mini")


@al.window("agent")
async def main(question: str) -> str:
    result = await agents.Runner.run(
        agent, input=question, hooks=openai_agents.RecordingHooks(),
        run_config=agents.RunConfig(model_provider=PROVIDER, tracing_disabled=True))
    return str(result.final_output)


def test_each_model_turn_and_tool_call_is_a_window_with_its_calls(tmp_path: Path) -> None:
    src = tmp_path / "runs.zst"
    with al.record(src, seed=1, task="tokyo", mode="w"):
        live = asyncio.run(main("What's the weather in Tokyo?"))
    assert "Sunny with wind." in live
    assert al.verify(src).ok
    entered = [r.name for r in al.iter_records(src) if isinstance(r, WindowEnter)]
    assert entered == ["agent", "agents.turn", "agents.tool.get_weather", "agents.turn"]
    exits = {}
    for r in al.iter_records(src):
        if isinstance(r, WindowExit):
            exits.setdefault(r.name, []).append(r)
    assert [e.llm_calls for e in exits["agents.turn"]] == [1, 1]
    assert [e.tool_calls for e in exits["agents.tool.get_weather"]] == [1]
    (tool,) = al.read(src).tool_calls()
    assert tool.result_type == f"{__name__}:Weather"
    (turn, _) = al.read(src).windows("agents.turn")
    assert turn.entry_value()["instructions"] == "You are a helpful agent."


def test_a_frozen_re_entry_of_the_run_makes_no_live_call(tmp_path: Path) -> None:
    src = tmp_path / "runs.zst"
    with al.record(src, seed=1, task="tokyo", mode="w"):
        live = asyncio.run(main("What's the weather in Tokyo?"))
    before = len(SERVER.bodies)
    res = intervene(src, window="agent", arms=Design(), out=tmp_path / "out", app=APP,
                    mode="frozen", cache=ModelCache.from_traces([src]))
    assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
    assert res.summary.live_calls == 0 and len(SERVER.bodies) == before
    (arm_file,) = (tmp_path / "out" / "arms").glob("*.zst")
    (view,) = al.read(arm_file).windows("agent")
    assert view.exit_value() == live
    assert [t.served for t in al.read(arm_file).tool_calls()] == [True]


def test_the_adapter_names_the_install_line_when_the_sdk_is_missing() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['agents'] = None\n"
            "try:\n    import agentlog.adapters.openai_agents\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "MissingDependencyError" in out and "pip install 'agentlog[openai-agents]'" in out


def test_hooks_give_a_tool_the_adapter_did_not_make_its_window(tmp_path: Path) -> None:
    @agents.function_tool(name_override="get_weather")
    def plain_weather(city: str) -> str:
        return f"{city}: Sunny with wind."

    plain = agents.Agent(name="plain", instructions="You are a helpful agent.",
                         tools=[plain_weather], model="gpt-4.1-mini")

    async def run() -> str:
        result = await agents.Runner.run(
            plain, input="Tokyo?", hooks=openai_agents.RecordingHooks(),
            run_config=agents.RunConfig(model_provider=PROVIDER, tracing_disabled=True))
        return str(result.final_output)

    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        assert "Sunny with wind." in asyncio.run(run())
    (tool,) = al.read(path).windows("agents.tool.get_weather")
    assert tool.entry_value()["arguments"] == '{"city": "Tokyo"}'
    assert tool.exit_value() == "Tokyo: Sunny with wind."
    assert al.verify(path).ok


class StreamedResponses(ScriptedResponses):
    """The same server, answering ``stream=True`` requests as a Responses event stream."""

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        import json

        reply = super().__call__(request)
        if not json.loads(request.content).get("stream"):
            return reply
        body = reply.json()
        events = [("response.created", {"type": "response.created", "sequence_number": 0,
                                        "response": {**body, "status": "in_progress",
                                                     "output": []}}),
                  ("response.completed", {"type": "response.completed", "sequence_number": 1,
                                          "response": body})]
        sse = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               content=sse.encode())


def test_a_streamed_run_records_each_turn_as_a_window(tmp_path: Path) -> None:
    server = StreamedResponses()
    provider = openai_agents.model_provider(openai.AsyncOpenAI(
        api_key="sk-test", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server))))

    async def run() -> str:
        result = agents.Runner.run_streamed(
            agent, input="What's the weather in Tokyo?",
            run_config=agents.RunConfig(model_provider=provider, tracing_disabled=True))
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    path = tmp_path / "t.zst"
    with al.record(path, seed=1, mode="w"):
        assert "Sunny with wind." in asyncio.run(run())
    turns = al.read(path).windows("agents.turn")
    assert len(turns) == 2 and all(t.exit is not None and t.exit.status == 0 for t in turns)
    assert [t.exit.llm_calls for t in turns if t.exit is not None] == [1, 1]
    assert turns[0].exit_value()[0]["type"] == "function_call"
    assert al.verify(path).ok
