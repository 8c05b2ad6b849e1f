"""``agentlog.adapters.openai_agents.TracingProcessor``: the SDK's own agent, handoff and
guardrail spans as windows around the turns and tools the other pieces record, with a
triage agent handing off to a weather agent (the SDK's handoffs example, scripted)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

import httpx2  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters import openai_agents  # noqa: E402
from agentlog.records import WindowEnter  # noqa: E402

from ._providers import responses_body  # noqa: E402


@openai_agents.function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


weather_agent = agents.Agent(name="Weather agent", instructions="Answer about weather.",
                             tools=[get_weather], model="gpt-4.1-mini")
TRANSFER = agents.handoff(weather_agent).tool_name


@agents.input_guardrail
async def on_topic(context: Any, agent: Any, input: Any) -> Any:
    return agents.GuardrailFunctionOutput(output_info={"ok": True}, tripwire_triggered=False)


triage = agents.Agent(name="Triage", instructions="Route the question.",
                      handoffs=[weather_agent], input_guardrails=[on_topic],
                      model="gpt-4.1-mini")


def script(request: httpx2.Request) -> httpx2.Response:
    """The triage model hands off; the weather model calls its tool, then answers."""
    body = json.loads(request.content)
    tools = {t.get("name") for t in body.get("tools") or []}
    items = body["input"] if isinstance(body["input"], list) else []
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    reply = responses_body(body["model"])
    if TRANSFER in tools:
        call = (TRANSFER, "{}")
    elif "get_weather" in tools and not any(o["call_id"] == "call_w" for o in outputs):
        call = ("get_weather", json.dumps({"city": "Oslo"}))
    else:
        reply["output"][0]["content"][0].update(text="It is sunny in Oslo.", logprobs=[])
        return httpx2.Response(200, json=reply)
    reply["output"] = [{"type": "function_call", "id": "fc", "status": "completed",
                        "call_id": "call_t" if call[0] == TRANSFER else "call_w",
                        "name": call[0], "arguments": call[1]}]
    return httpx2.Response(200, json=reply)


PROVIDER = openai_agents.model_provider(openai.AsyncOpenAI(
    api_key="sk-test", max_retries=0,
    http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(script))))


@pytest.fixture
def processor() -> Iterator[openai_agents.TracingProcessor]:
    """The SDK's processors replaced by agentlog's alone (offline: no uploader)."""
    proc = openai_agents.TracingProcessor()
    agents.set_trace_processors([proc])
    try:
        yield proc
    finally:
        agents.set_trace_processors([])


async def run(question: str) -> str:
    result = await agents.Runner.run(triage, input=question,
                                     run_config=agents.RunConfig(model_provider=PROVIDER))
    return str(result.final_output)


def test_agents_handoffs_and_guardrails_are_windows_around_turns_and_tools(
        tmp_path: Path, processor: openai_agents.TracingProcessor) -> None:
    path = tmp_path / "runs.zst"
    with al.record(path, seed=1, task="oslo", mode="w"):
        assert asyncio.run(run("Weather in Oslo?")) == "It is sunny in Oslo."
    assert al.verify(path).ok
    trace = al.read(path)
    entered = [r.name for r in al.iter_records(path) if isinstance(r, WindowEnter)]
    assert entered[0] == "agents.agent.Triage"
    assert {"agents.guardrail.on_topic", "agents.handoff",
            "agents.agent.Weather agent", "agents.tool.get_weather"} <= set(entered)
    assert entered.count("agents.turn") == 3  # triage, weather (tool call), weather (answer)
    (handoff,) = trace.windows("agents.handoff")
    assert handoff.entry_value() == {"from_agent": "Triage"}
    assert handoff.exit_value() == {"to_agent": "Weather agent"}
    (guard,) = trace.windows("agents.guardrail.on_topic")
    assert guard.exit_value() == {"triggered": False}
    (weather,) = trace.windows("agents.agent.Weather agent")
    assert weather.exit_value()["tools"] == ["get_weather"]
    # The weather agent's window holds its turns and its tool: nested in it, in order.
    inner = [w.name for w in trace.windows() if w.parent == weather.window]
    assert inner == ["agents.turn", "agents.tool.get_weather", "agents.turn"]
    assert sum(w.exit.llm_calls for w in trace.windows("agents.turn")) == 3
    (call,) = trace.tool_calls()  # recorded once, by function_tool, not by the processor
    assert call.name == "get_weather"


def test_a_tripped_guardrail_and_a_span_that_ended_with_an_error(
        tmp_path: Path, processor: openai_agents.TracingProcessor) -> None:
    @agents.input_guardrail
    async def refuse(context: Any, agent: Any, input: Any) -> Any:
        return agents.GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    path = tmp_path / "runs.zst"
    with al.record(path, seed=1, task="oslo", mode="w"):
        with pytest.raises(agents.InputGuardrailTripwireTriggered):
            asyncio.run(agents.Runner.run(triage.clone(input_guardrails=[refuse]), input="Hi",
                                          run_config=agents.RunConfig(model_provider=PROVIDER)))
        with pytest.raises(agents.MaxTurnsExceeded):  # the SDK fails the agent's span
            asyncio.run(agents.Runner.run(triage, input="Hi", max_turns=2,
                                          run_config=agents.RunConfig(model_provider=PROVIDER)))
    trace = al.read(path)
    (guard,) = trace.windows("agents.guardrail.refuse")
    assert guard.exit_value() == {"triggered": True} and not guard.failed
    (weather,) = trace.windows("agents.agent.Weather agent")
    assert weather.failed and weather.exit.error_message == "Max turns exceeded"
    assert not any(w.failed for w in trace.windows("agents.agent.Triage"))
