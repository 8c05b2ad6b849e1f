"""The OpenAI Agents SDK's ``examples/basic/tools.py``, instrumented as a new user would.

The example's own code (an ``Agent`` with a ``@function_tool`` returning a pydantic
``Weather``, run with ``await Runner.run``) plus three lines of agentlog: a wrapped
``AsyncOpenAI`` as the SDK's client, ``@al.tool`` under ``@function_tool``, and a window
around the entry point. The model is a scripted Responses API server on
``httpx2.MockTransport`` (a tool call, then the answer). Recorded live, then re-entered
frozen by ``intervene``: 0 live calls and 0 misses. Before agentlog awaited async windows
every unit was ``ok`` with an empty arm; before it served tool results with their type,
the ``Weather`` came back as a dict, the SDK rendered it differently into the next
request, and every run missed the cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

import httpx2  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.replay import Design, intervene  # noqa: E402

from ._providers import responses_body  # noqa: E402

APP = __name__


class ScriptedResponses:
    """A Responses API server: a ``get_weather`` call first, the answer once it has the
    tool's output. Counts requests and keeps their bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        items = body["input"] if isinstance(body["input"], list) else []
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        reply = responses_body(body["model"])
        if not outputs:
            reply["output"] = [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                                "name": "get_weather", "status": "completed",
                                "arguments": json.dumps({"city": "Tokyo"})}]
        else:
            text = f"Here is the weather: {outputs[0]['output']}"
            reply["output"][0]["content"][0].update(text=text, logprobs=[])
        return httpx2.Response(200, json=reply)


SERVER = ScriptedResponses()
# agentlog: the SDK's client, wrapped (as set_default_openai_client(client) would install it)
CLIENT = adapter.wrap(openai.AsyncOpenAI(
    api_key="sk-test", max_retries=0,
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(SERVER))))


# -- the example's code (examples/basic/tools.py), with agentlog's lines marked


class Weather(BaseModel):
    city: str = Field(description="The city name")
    temperature_range: str = Field(description="The temperature range in Celsius")
    conditions: str = Field(description="The weather conditions")


@agents.function_tool
@al.tool("get_weather")  # agentlog
def get_weather(city: Annotated[str, "The city to get the weather for"]) -> Weather:
    """Get the current weather information for a specified city."""
    return Weather(city=city, temperature_range="14-20C", conditions="Sunny with wind.")


agent = agents.Agent(
    name="Hello world",
    instructions="You are a helpful agent.",
    tools=[get_weather],
    model=agents.OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=CLIENT),
)


@al.window("agent")  # agentlog
async def main(question: str) -> str:
    result = await agents.Runner.run(agent, input=question,
                                     run_config=agents.RunConfig(tracing_disabled=True))
    return str(result.final_output)


def test_the_sdk_tools_example_re_enters_frozen_with_no_live_call(tmp_path: Path) -> None:
    import asyncio

    src = tmp_path / "runs.zst"
    with al.record(src, system="hello-world", seed=1, task="tokyo", mode="w"):
        live = asyncio.run(main("What's the weather in Tokyo?"))
    assert "Sunny with wind." in live and len(SERVER.bodies) == 2
    recorded = al.read(src)
    assert [c.status for c in recorded.llm_calls()] == [0, 0]
    (tool,) = recorded.tool_calls()
    assert tool.result_type == f"{__name__}:Weather"

    before = len(SERVER.bodies)
    res = intervene(src, window="agent", arms=Design(), out=tmp_path / "out", app=APP,
                    mode="frozen", scores=lambda answer: {"chars": len(answer)})
    assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
    assert res.summary.live_calls == 0 and res.summary.cache_misses == 0
    assert len(SERVER.bodies) == before  # nothing reached the server
    (arm_file,) = (tmp_path / "out" / "arms").glob("*.zst")
    arm = al.read(arm_file)
    assert [(c.status, c.cache) for c in arm.llm_calls()] == [(0, "hit"), (0, "hit")]
    (served,) = arm.tool_calls()
    assert served.served and served.status == 0 and served.result_type == tool.result_type
    (view,) = arm.windows("agent")
    assert view.exit_value() == live
