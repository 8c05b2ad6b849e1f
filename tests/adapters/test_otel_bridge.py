"""``agentlog.adapters.otel_bridge``: another framework's GenAI and OpenInference spans
become records of the current run, agentlog's own spans never come back through it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

import agentlog as al
from agentlog.adapters.otel_bridge import RecordingSpanProcessor
from agentlog.records import decode_artifact
from agentlog.testing import capture_spans


@pytest.fixture
def provider() -> Any:
    """The TracerProvider agentlog's runs use here, with the bridge on it (and the
    in-memory exporter capture_spans puts there)."""
    with capture_spans() as spans:
        spans.provider.add_span_processor(RecordingSpanProcessor())
        yield spans.provider


def test_a_genai_model_span_and_an_openinference_tool_span_become_records(
        tmp_path: Path, provider: Any) -> None:
    framework = provider.get_tracer("crewai.telemetry")
    path = tmp_path / "t.zst"
    with al.record(path, seed=1), al.open_window("task", "q"):
        with framework.start_as_current_span("chat gpt-4o-mini") as span:
            span.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.request.temperature": 0.2,
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.usage.input_tokens": 31, "gen_ai.usage.output_tokens": 4})
        with framework.start_as_current_span("search") as span:
            span.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "search",
                                 # the declared schema, not the arguments
                                 "tool.parameters": json.dumps({"type": "object"}),
                                 "input.value": json.dumps({"q": "oslo"}),
                                 "input.mime_type": "application/json",
                                 "output.value": "3 hits"})
    trace = al.read(path)
    (call,) = trace.llm_calls()
    assert (call.provider, call.model, call.input_tokens, call.output_tokens) == (
        "openai.bridged", "gpt-4o-mini", 31, 4)
    assert decode_artifact(call.request)["gen_ai.request.temperature"] == 0.2
    assert call.finish_reasons == ["stop"] and call.window == 0
    (tool,) = trace.tool_calls()
    assert (tool.name, tool.status, tool.window) == ("search", 0, 0)
    assert decode_artifact(tool.args) == {"q": "oslo"}
    assert decode_artifact(tool.result) == "3 hits"
    (window,) = trace.windows("task")
    assert window.exit is not None
    assert (window.exit.llm_calls, window.exit.tool_calls) == (1, 1)
    assert al.verify(path).ok


def test_agentlogs_own_spans_do_not_come_back_through_the_bridge(
        tmp_path: Path, provider: Any) -> None:
    """A naive bridge recursed (322 records for 2 calls): agentlog's model span ends
    inside the same provider and must be skipped."""
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        al.llm_call("openai", "m", request={"messages": []}, input_tokens=3)
        al.tool_call("lookup", {"q": 1}, lambda: 2)
    trace = al.read(path)
    assert len(list(trace.llm_calls())) == 1 and len(list(trace.tool_calls())) == 1


def test_an_error_span_is_a_failed_call_and_no_run_records_nothing(
        tmp_path: Path, provider: Any) -> None:
    framework = provider.get_tracer("llama_index")
    with framework.start_as_current_span("outside") as span:  # no run: nothing happens
        span.set_attributes({"openinference.span.kind": "LLM", "llm.model_name": "m"})
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        with framework.start_as_current_span("llm") as span:
            span.set_attributes({"openinference.span.kind": "LLM", "llm.model_name": "m",
                                 "llm.provider": "anthropic", "llm.token_count.prompt": 9})
            span.set_status(Status(StatusCode.ERROR, "rate limited"))
        with framework.start_as_current_span("tool") as span:
            span.set_attributes({"gen_ai.operation.name": "execute_tool",
                                 "gen_ai.tool.name": "fetch"})
            span.set_status(Status(StatusCode.ERROR, "timeout"))
    trace = al.read(path)
    (call,) = trace.llm_calls()
    assert (call.provider, call.status, call.input_tokens) == ("anthropic.bridged", 1, 9)
    assert "rate limited" in (call.error_message or "")
    (tool,) = trace.tool_calls()
    assert tool.status == 1 and "timeout" in (tool.error_message or "")


def test_the_bridge_needs_the_otel_sdk_named_in_its_error() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['opentelemetry.sdk.trace'] = None\n"
            "try:\n    import agentlog.adapters.otel_bridge\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "MissingDependencyError" in out and "agentlog[otlp]" in out


@pytest.mark.parametrize(("spans", "ours"), [("framework", 0), ("both", 1)])
def test_one_span_per_call_in_the_backend_unless_both_are_asked_for(
        tmp_path: Path, spans: str, ours: int) -> None:
    with capture_spans() as captured:
        bridge = RecordingSpanProcessor(spans=spans)  # type: ignore[arg-type]
        captured.provider.add_span_processor(bridge)
        framework = captured.provider.get_tracer("crewai.telemetry")
        with al.record(tmp_path / "t.zst", seed=1), \
                framework.start_as_current_span("chat m") as span:
            span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                 "gen_ai.usage.input_tokens": 5})
    chat = [s for s in captured.spans if s.name == "chat m"]
    by_agentlog = [s for s in chat if s.instrumentation_scope.name == "agentlog"]
    assert len(by_agentlog) == ours and len(chat) == 1 + ours
    assert len(list(al.read(tmp_path / "t.zst").llm_calls())) == 1  # recorded either way
    # Token totals a backend sums over the spans: the model's usage, counted once.
    total = sum(dict(s.attributes or {}).get("gen_ai.usage.input_tokens", 0)
                for s in captured.spans)
    assert total == 5 * (1 + ours)


def test_a_bad_spans_switch_is_refused() -> None:
    with pytest.raises(ValueError, match="`spans` must be 'framework' or 'both'"):
        RecordingSpanProcessor(spans="agentlog")  # type: ignore[arg-type]
