"""Tool spans: a deterministic ``gen_ai.tool.call.id`` and opt-in, scrubbed content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.export import to_spans
from agentlog.testing import capture_spans
from tests.export._spans import signatures

CANARY = "Zq5-tool-canary-key-31337"


@al.tool("lookup")
def lookup(query: str, headers: dict[str, str]) -> dict[str, str]:
    return {"answer": query.upper(), "api_key": CANARY}


@al.window("ask")
def ask(question: str) -> str:
    first = lookup(question, {"Authorization": f"Bearer {CANARY}"})
    second = lookup(question + "!", {})
    return first["answer"] + second["answer"]


def _tool_spans(spans: list[Any]) -> list[Any]:
    return sorted((s for s in spans if s.name == "execute_tool lookup"),
                  key=lambda s: s.start_time)


def test_each_tool_call_has_one_call_id_live_and_exported(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with capture_spans() as captured, al.record(path, seed=1):
        ask("q")
    live = [s.attributes["gen_ai.tool.call.id"] for s in _tool_spans(captured.spans)]
    exported = [s.attributes["gen_ai.tool.call.id"] for s in _tool_spans(list(to_spans(path)))]
    again = [s.attributes["gen_ai.tool.call.id"] for s in _tool_spans(list(to_spans(path)))]
    assert live == exported == again
    assert len(set(live)) == 2 and all(len(i) == 32 for i in live)


def test_arguments_and_results_stay_off_spans_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    path = tmp_path / "t.zst"
    with capture_spans() as captured, al.record(path, seed=1):
        ask("q")
    for spans in (captured.spans, list(to_spans(path))):
        for span in _tool_spans(spans):
            attributes = dict(span.attributes or {})
            assert "gen_ai.tool.call.arguments" not in attributes
            assert "gen_ai.tool.call.result" not in attributes


def test_opted_in_content_is_scrubbed_and_equal_live_and_exported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    path = tmp_path / "t.zst"
    with capture_spans() as captured, al.record(path, seed=1):
        ask("q")
    live = captured.spans
    exported = list(to_spans(path, capture_content=True))
    assert signatures(live) == signatures(exported)
    first = dict(_tool_spans(live)[0].attributes or {})
    assert json.loads(first["gen_ai.tool.call.arguments"]) == {
        "query": "q", "headers": {"Authorization": "<redacted>"}}
    assert json.loads(first["gen_ai.tool.call.result"]) == {"answer": "Q",
                                                            "api_key": "<redacted>"}
    assert CANARY not in repr([dict(s.attributes or {}) for s in live])
