"""End to end with a real model: the OpenAI Agents SDK on the vLLM CPU server (the tiny
random model) through ``agentlog.adapters.openai_agents``, 10 runs recorded, verified,
re-entered frozen with no live call, and one span per model call carrying its usage.

The random-weight model never calls a tool by itself, so a scripting transport sits
between the client and the server: every request still goes to vLLM, and on an agent's
first turn the scripted transport turns the model's reply into a ``get_weather`` call
(what a tool-using model would have answered); the second turn's reply is the model's
own. The recording transport sits in front of it, so what is recorded and served is what
the agent saw.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

import httpx2  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters import openai_agents  # noqa: E402
from agentlog.export import to_spans  # noqa: E402
from agentlog.replay import Design, ExecutionOptions, ModelCache, intervene  # noqa: E402
from agentlog.testing import capture_spans  # noqa: E402
from tests._phoenix import read_back  # noqa: E402
from tests.cli._cli import invoke  # noqa: E402

from .conftest import VllmServer  # noqa: E402

pytestmark = pytest.mark.slow  # starts vLLM (shared with test_vllm_server.py)

APP = __name__
CITIES = ["Oslo", "Tokyo", "Lima", "Cairo", "Perth", "Quito", "Dakar", "Hanoi", "Bern", "Riga"]


class ScriptedToolCalls(httpx2.AsyncBaseTransport):
    """Forwards to the server; on a first turn, replaces the reply by a tool call."""

    forwarded = 0  # requests that reached the server, over every run

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()  # one per run: a pool is bound to its loop

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        response = await self.inner.handle_async_request(self._for_server(request, body))
        ScriptedToolCalls.forwarded += 1
        data = await response.aread()
        await response.aclose()
        turn_one = not any(m.get("role") == "tool" for m in body.get("messages") or ())
        chat = request.url.path.endswith("/chat/completions")
        if response.status_code == 200 and turn_one and chat:
            reply = json.loads(data)
            city = body["messages"][-1]["content"].rsplit(" ", 1)[-1].rstrip("?")
            reply["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {
                    "name": "get_weather", "arguments": json.dumps({"city": city})}}]}
            reply["choices"][0]["finish_reason"] = "tool_calls"
            data = json.dumps(reply).encode()
        return httpx2.Response(response.status_code, headers={"content-type": "application/json"},
                               content=data, request=request)

    @staticmethod
    def _for_server(request: httpx2.Request, body: dict[str, Any]) -> httpx2.Request:
        """The request as a model without tool calling takes it: no tools, and the tool
        turns as plain text (the tiny model's chat template knows user and assistant)."""
        messages = []
        for m in body.get("messages") or ():
            if m.get("role") == "tool":
                messages.append({"role": "user", "content": f"tool result: {m.get('content')}"})
            elif m.get("tool_calls"):
                messages.append({"role": "assistant", "content": "calling get_weather"})
            else:
                messages.append({"role": m.get("role"), "content": m.get("content") or ""})
        sent = {k: v for k, v in body.items()
                if k not in ("tools", "tool_choice", "parallel_tool_calls")}
        sent["messages"] = messages
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        return httpx2.Request(request.method, request.url, headers=headers, json=sent)

    async def aclose(self) -> None:
        await self.inner.aclose()


SERVER: dict[str, str] = {}


@openai_agents.function_tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"{city}: sunny, 21C"


def _agent() -> Any:
    http = httpx2.AsyncClient(transport=ScriptedToolCalls())
    client = openai.AsyncOpenAI(base_url=SERVER["base_url"], api_key="sk-e2e", max_retries=0,
                                timeout=120, http_client=http)
    provider = openai_agents.model_provider(client, use_responses=False)
    agent = agents.Agent(name="weather", instructions="Answer with the weather.",
                         tools=[get_weather], model="tiny",
                         model_settings=agents.ModelSettings(max_tokens=8, temperature=0.0))
    return agent, agents.RunConfig(model_provider=provider, tracing_disabled=True), http


@al.window("agent")
async def ask(question: str) -> str:
    agent, config, http = _agent()
    try:
        result = await agents.Runner.run(agent, input=question, run_config=config)
    finally:
        await http.aclose()  # its connections belong to this run's event loop
    return str(result.final_output)


def test_ten_runs_recorded_verified_and_re_entered_frozen_with_no_live_call(
        vllm_server: VllmServer, phoenix: str, tmp_path: Path) -> None:
    SERVER["base_url"] = vllm_server.base_url
    runs = tmp_path / "runs"
    runs.mkdir()
    with capture_spans() as captured:
        for city in CITIES:
            with al.record(runs / f"{city}.zst", seed=1, task=city, mode="w"):
                asyncio.run(ask(f"What is the weather in {city}?"))
    paths = sorted(runs.glob("*.zst"))
    assert len(paths) == 10 and all(al.verify(p).ok for p in paths)
    calls = [c for p in paths for c in al.read(p).llm_calls()]
    assert len(calls) == 20 and all(c.status == 0 and c.input_tokens > 0 for c in calls)
    assert all(len(al.read(p).windows("agents.tool.get_weather")) == 1 for p in paths)
    # One span per model call, carrying the call's usage: a backend's token total is the
    # model's (window spans carry no gen_ai.usage.*).
    usage = sum(dict(s.attributes or {}).get("gen_ai.usage.input_tokens", 0)
                for s in captured.spans)
    assert usage == sum(c.input_tokens for c in calls)
    assert len([s for s in captured.spans if s.name == "chat tiny"]) == 20

    forwarded = ScriptedToolCalls.forwarded
    res = intervene(paths, window="agent", arms=Design(), out=tmp_path / "frozen", app=APP,
                    mode="frozen", cache=ModelCache.from_traces(paths),
                    execution=ExecutionOptions(concurrency=1, progress=False))
    assert res.summary.done == 10 and res.summary.failed == 0, res.summary.failures
    assert res.summary.live_calls == 0 and ScriptedToolCalls.forwarded == forwarded
    for arm_file in (tmp_path / "frozen" / "arms").glob("*.zst"):
        arm = al.read(arm_file)
        assert all(c.cache == "hit" for c in arm.llm_calls())
        assert all(t.served for t in arm.tool_calls())

    # Exported to Phoenix: every span once, one per model call, and the backend's token
    # total is the model's usage (no window span carries gen_ai.usage.*).
    project = "vllm-e2e"
    result = invoke("export", runs, "--otlp", f"{phoenix}/v1/traces", "--project", project)
    assert result.exit_code == 0, result.output
    expected = [s for p in paths for s in to_spans(
        p, resource_attributes={"openinference.project.name": project})]
    got = read_back(phoenix, project, len(expected))
    assert len(got) == len(expected) and len({g["span_id"] for g in got}) == len(got)
    assert len([g for g in got if g["name"] == "chat tiny"]) == 20
    stored = [g["gen_ai"].get("usage", {}) for g in got]
    assert sum(int(u.get("input_tokens", 0)) for u in stored) == sum(
        c.input_tokens for c in calls)
    assert sum(int(u.get("output_tokens", 0)) for u in stored) == sum(
        c.output_tokens for c in calls)

