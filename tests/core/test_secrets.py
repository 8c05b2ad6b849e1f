"""Secrets never reach a trace file or a span."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import agentlog as al
from agentlog._recorder import log_llm_call
from agentlog.testing import capture_spans

CANARY = "sk-CANARY-7f3a9c1e5b"


def _span_text(spans: Any) -> str:
    parts = []
    for s in spans.spans:
        parts.append(repr(dict(s.attributes or {})))
        parts.extend(repr(dict(e.attributes or {})) for e in s.events)
    return "\n".join(parts)


def test_a_parameter_declared_secret_is_never_written(trace_path: Path) -> None:
    @al.window("call", secret=("api_key",))
    def call(prompt: str, api_key: str) -> str:
        return prompt.upper()

    @al.window("call2")
    def call2(prompt: str, api_key: Annotated[str, al.Secret]) -> str:
        return prompt

    @al.tool("fetch", secret=("token",))
    def fetch(url: str, token: str) -> str:
        return url

    with capture_spans() as spans, al.record(trace_path, seed=1):
        assert call("hi", CANARY) == "HI"
        assert call2("hi", api_key=CANARY) == "hi"
        assert call2("hi", CANARY) == "hi"
        fetch("u", CANARY)
    assert CANARY.encode() not in trace_path.read_bytes()
    assert CANARY not in _span_text(spans)
    assert al.verify(trace_path).ok


def test_auth_headers_and_key_fields_of_model_calls_are_dropped(trace_path: Path) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(
            provider="openai",
            model="m",
            request={"messages": [{"role": "user", "content": "hi"}], "api_key": CANARY},
            headers={"Authorization": f"Bearer {CANARY}", "X-Api-Key": CANARY,
                     "User-Agent": "x"},
            response={"choices": [], "echo_authorization": CANARY},
        )

    with capture_spans() as spans, al.record(trace_path, seed=1):
        ask()
    data = trace_path.read_bytes()
    assert CANARY.encode() not in data
    assert CANARY not in _span_text(spans)
    call = al.read(trace_path).llm_calls()[0]
    assert al._encoding.decode(call.request)["headers"]["User-Agent"] == "x"


def test_the_redact_hook_runs_before_encoding(trace_path: Path) -> None:
    seen: list[Any] = []

    def redact(payload: Any) -> Any:
        seen.append(payload)
        if isinstance(payload, dict):
            return {k: ("<email>" if isinstance(v, str) and "@" in v else v)
                    for k, v in payload.items()}
        return "<email>" if isinstance(payload, str) and "@" in payload else payload

    @al.window("lookup")
    def lookup(email: str) -> str:
        return email

    with al.record(trace_path, seed=1, redact=redact, meta={"owner": "a@b.org"}):
        assert lookup("jane@example.org") == "jane@example.org"
    data = trace_path.read_bytes()
    assert b"jane@example.org" not in data and b"a@b.org" not in data
    assert seen  # the hook saw the payloads
    assert al.verify(trace_path).ok


def test_a_failing_redact_hook_writes_a_marker_not_the_payload(trace_path: Path) -> None:
    import pytest

    def redact(payload: Any) -> Any:
        raise RuntimeError("hook bug")

    @al.window("lookup")
    def lookup(secret_text: str) -> str:
        return "ok"

    with pytest.warns(al.InstrumentationWarning, match="raised RuntimeError"), al.record(
        trace_path, seed=1, redact=redact
    ):
        assert lookup(CANARY) == "ok"
    assert CANARY.encode() not in trace_path.read_bytes()
