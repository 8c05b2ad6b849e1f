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


def _spans_of_model_calls(tmp_path: Path, *, instrument: bool, spans: str) -> list[str]:
    """The scopes of the model-call spans one request through agentlog's client gives,
    pydantic-ai's instrumentation on or off (both trace to the same provider)."""
    httpx2 = pytest.importorskip("httpx2")
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from agentlog.adapters import async_http_client
    from agentlog.testing import capture_spans
    from tests.adapters._providers import chat_body

    def handler(request: Any) -> Any:
        return httpx2.Response(200, json=chat_body(model="m", content="hi"))

    async def main(captured: Any) -> str:
        client = async_http_client(base=httpx2.MockTransport(handler))
        model = OpenAIChatModel("m", provider=OpenAIProvider(api_key="k", http_client=client))
        agent: Agent[None, str] = Agent(
            model, capabilities=[AgentlogCapability(spans=spans)])  # type: ignore[arg-type]
        agent.instrument = (InstrumentationSettings(tracer_provider=captured.provider)
                            if instrument else False)
        async with al.record(tmp_path / f"{instrument}-{spans}.zst", seed=1, mode="w"):
            return (await agent.run("Hi?")).output

    with capture_spans() as captured:
        assert asyncio.run(main(captured)).endswith("hi")
        finished = captured.spans
    assert len(al.read(tmp_path / f"{instrument}-{spans}.zst").llm_calls()) == 1  # recorded
    return sorted((s.instrumentation_scope.name if s.instrumentation_scope else "").split(".")[0]
                  for s in finished
                  if (s.attributes or {}).get("gen_ai.operation.name") == "chat")


@pytest.mark.parametrize(("instrument", "spans", "expected"), [
    (True, "auto", ["pydantic-ai"]),         # the framework traces it: its span only
    (False, "auto", ["agentlog"]),           # nobody else does: agentlog's
    (True, "both", ["agentlog", "pydantic-ai"]),
    (False, "framework", []),
])
def test_each_model_call_is_one_span_by_default(tmp_path: Path, instrument: bool, spans: str,
                                                expected: list[str]) -> None:
    assert _spans_of_model_calls(tmp_path, instrument=instrument, spans=spans) == expected


def test_a_bad_spans_value_is_named() -> None:
    with pytest.raises(ValueError, match="`spans` must be 'auto', 'framework' or 'both'"):
        AgentlogCapability(spans="agentlog")  # type: ignore[arg-type]
