"""Captured content as the OpenTelemetry GenAI message list, live and exported alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.export import to_spans
from agentlog.testing import capture_spans

CHAT_REQUEST = {"model": "m", "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}
CHAT_RESPONSE = {"id": "r", "model": "m", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sunny."}}]}
ANTHROPIC_REQUEST = {"model": "c", "system": "Be brief.", "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather",
                                       "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                  "content": "sunny"}]}]}
ANTHROPIC_RESPONSE = {"type": "message", "role": "assistant", "stop_reason": "end_turn",
                      "content": [{"type": "text", "text": "Sunny."}]}
RESPONSES_REQUEST = {"model": "r", "instructions": "Be brief.", "input": "Weather?"}
RESPONSES_RESPONSE = {"object": "response", "status": "completed", "output": [
    {"type": "function_call", "call_id": "f1", "name": "weather", "arguments": "{}"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "Sunny."}]}]}

SYSTEM = {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}
USER = {"role": "user", "parts": [{"type": "text", "content": "Weather?"}]}
ANSWER = {"type": "text", "content": "Sunny."}


@pytest.mark.parametrize(("provider", "request_", "response", "inputs", "outputs"), [
    ("openai.chat", CHAT_REQUEST, CHAT_RESPONSE, [
        SYSTEM, USER,
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather",
                                         "arguments": "{\"city\": \"Oslo\"}"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                    "response": "sunny"}]}],
     [{"role": "assistant", "finish_reason": "stop", "parts": [ANSWER]}]),
    ("anthropic.messages", ANTHROPIC_REQUEST, ANTHROPIC_RESPONSE, [
        SYSTEM, USER,
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "weather",
                                         "arguments": {"city": "Oslo"}}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "t1",
                                    "response": "sunny"}]}],
     [{"role": "assistant", "finish_reason": "end_turn", "parts": [ANSWER]}]),
    ("openai.responses", RESPONSES_REQUEST, RESPONSES_RESPONSE, [SYSTEM, USER],
     [{"role": "assistant", "finish_reason": "completed", "parts": [
         {"type": "tool_call", "id": "f1", "name": "weather", "arguments": "{}"}, ANSWER]}]),
])
def test_captured_content_is_the_genai_message_list_live_and_exported(
        tmp_path: Path, provider: str, request_: Any, response: Any, inputs: Any,
        outputs: Any) -> None:
    path = tmp_path / "t.zst"
    with capture_spans() as captured, al.record(path, seed=1):
        al.llm_call(provider, "m", request=request_, response=response, capture_content=True)
    (live,) = [s for s in captured.spans if s.name == "chat m"]
    (exported,) = [s for s in to_spans(path, capture_content=True) if s.name == "chat m"]
    for span in (live, exported):
        attributes = dict(span.attributes or {})
        assert json.loads(attributes["gen_ai.input.messages"]) == inputs
        assert json.loads(attributes["gen_ai.output.messages"]) == outputs


def test_a_shape_it_does_not_know_is_captured_as_stored(tmp_path: Path) -> None:
    with capture_spans() as captured, al.record(tmp_path / "t.zst", seed=1):
        al.llm_call("custom", "m", request={"query": "q"}, response={"text": "ok"},
                    capture_content=True)
    (span,) = captured.by_name("chat m")
    assert json.loads(span.attributes["gen_ai.input.messages"]) == {"query": "q"}
    assert json.loads(span.attributes["gen_ai.output.messages"]) == {"text": "ok"}
