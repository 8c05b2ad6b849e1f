"""OpenTelemetry: one span per window, summaries not vectors, nothing when no SDK."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog import _otel
from agentlog._recorder import log_llm_call
from agentlog.testing import capture_spans


@al.window("retrieval")
def retrieve(q: str) -> int:
    i = al.select(np.full(1000, 1e-3), candidates=[f"d{j}" for j in range(1000)], name="doc")
    al.proceed(0.5, name="stop")
    return i


@al.window("outer")
def outer(q: str) -> int:
    return retrieve(q)


def test_each_window_is_a_span_with_hashes_receipt_and_resources(trace_path: Path) -> None:
    with capture_spans() as spans, al.record(trace_path, seed=3) as run:
        outer("q")
    by_name = {s.name: s for s in spans.spans}
    inner, top = by_name["agentlog.window.retrieval"], by_name["agentlog.window.outer"]
    assert inner.parent is not None and inner.parent.span_id == top.context.span_id
    attrs = dict(inner.attributes or {})
    assert attrs["agentlog.window"] == "retrieval"
    assert attrs["agentlog.run_id"] == run.run_id
    assert len(attrs["agentlog.entry_hash"]) == 64 and len(attrs["agentlog.receipt"]) == 64
    assert attrs["agentlog.selections"] == 1
    trace = al.read(trace_path)
    exits = {w.name: w for w in trace.windows()}
    assert attrs["agentlog.exit_hash"] == exits["retrieval"].exit.exit_hash.hex()


def test_selections_are_span_events_with_a_summary_never_the_vector(trace_path: Path) -> None:
    with capture_spans() as spans, al.record(trace_path, seed=3):
        outer("q")
    span = spans.by_name("agentlog.window.retrieval")[0]
    select_event, proceed_event = span.events
    attrs = dict(select_event.attributes or {})
    assert attrs["agentlog.n_candidates"] == 1000
    assert abs(attrs["agentlog.entropy"] - np.log(1000)) < 1e-9
    assert attrs["agentlog.chosen_p"] == 1e-3 and len(attrs["agentlog.probs_sha256"]) == 64
    assert all(not isinstance(v, tuple | list) for v in attrs.values())
    assert proceed_event.name == "agentlog.proceed"


def test_a_failed_window_span_has_error_status_and_the_exception(trace_path: Path) -> None:
    @al.window("boom")
    def boom() -> None:
        raise RuntimeError("x")

    with capture_spans() as spans, al.record(trace_path, seed=1), contextlib.suppress(
        RuntimeError
    ):
        boom()
    (span,) = spans.spans
    assert span.status.status_code.name == "ERROR"
    assert span.events[0].name == "exception"


def test_llm_calls_follow_the_gen_ai_conventions(trace_path: Path) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(provider="openai", model="gpt-x", request={"messages": []}, response={},
                     input_tokens=12, output_tokens=3)

    with capture_spans() as spans, al.record(trace_path, seed=1):
        ask()
    (span,) = spans.spans
    assert span.attributes["gen_ai.usage.input_tokens"] == 12
    assert span.attributes["agentlog.llm_calls"] == 1
    event = dict(span.events[0].attributes or {})
    assert event["gen_ai.request.model"] == "gpt-x" and event["gen_ai.operation.name"] == "chat"


def test_without_an_sdk_no_tracer_is_used_at_all(trace_path: Path) -> None:
    assert _otel.tracer() is None  # the API's proxy provider only
    with al.record(trace_path, seed=1) as run:
        outer("q")
    assert run.tracer is None


def test_the_sdks_record_exception_is_never_called_and_the_event_is_scrubbed(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """span.record_exception copies str(exc) unscrubbed: agentlog writes its own event."""
    from opentelemetry.sdk.trace import Span

    calls: list[BaseException] = []
    monkeypatch.setattr(Span, "record_exception",
                        lambda self, exc, *a, **k: calls.append(exc))

    @al.window("call")
    def call(api_key: str) -> None:
        raise PermissionError(f"401: Incorrect API key provided: {api_key}")

    with capture_spans() as spans, al.record(trace_path), pytest.raises(PermissionError):
        call("Zq-otel-canary-0042")
    assert calls == []
    (span,) = spans.by_name("agentlog.window.call")
    (event,) = [e for e in span.events if e.name == "exception"]
    attributes = dict(event.attributes or {})
    assert attributes["exception.type"] == "PermissionError"
    assert attributes["exception.message"] == "401: Incorrect API key provided: <redacted>"
    assert "Zq-otel-canary-0042" not in repr(attributes)
