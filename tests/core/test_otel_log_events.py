"""Events as log records through the OpenTelemetry Logs API (the Span Events API is being
deprecated, OTEP 4430): each selection, stop decision and evaluation result is a log
record with an event name, the span event's attributes and the span's trace and span ids;
span events stay on unless ``AGENTLOG_SPAN_EVENTS=false``."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog.testing import capture_spans


@al.window("pick")
def pick() -> int:
    i = al.select(np.array([0.25, 0.75]), candidates=["a", "b"], name="doc")
    al.proceed(0.5, name="stop")
    al.score("f1", 0.5, channel="quote")
    return i


def test_each_span_event_is_also_a_log_event_in_the_spans_context(trace_path: Path) -> None:
    with capture_spans() as spans, al.record(trace_path, seed=3):
        pick()
    (window,) = spans.by_name("agentlog.window.pick")
    assert [e.name for e in window.events] == [
        "agentlog.select", "agentlog.proceed", "gen_ai.evaluation.result"]
    logs = [r.log_record for r in spans.events]
    assert [r.event_name for r in logs] == [e.name for e in window.events]
    for record, event in zip(logs, window.events, strict=True):
        assert dict(record.attributes or {}) == dict(event.attributes or {})
        assert record.trace_id == window.context.trace_id
        assert record.span_id == window.context.span_id
    # The score's time is the record's; the others are stamped when emitted.
    assert logs[2].timestamp == window.events[2].timestamp


def test_span_events_can_be_turned_off_while_log_events_stay(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_SPAN_EVENTS", "false")
    with capture_spans() as spans, al.record(trace_path, seed=3):
        pick()
    (window,) = spans.by_name("agentlog.window.pick")
    assert window.events == ()
    assert [r.log_record.event_name for r in spans.events] == [
        "agentlog.select", "agentlog.proceed", "gen_ai.evaluation.result"]


def test_a_run_keeps_its_logger_in_worker_threads(trace_path: Path) -> None:
    """As its tracer: a window in a worker thread whose context sees no provider."""
    from agentlog._spans import events

    def work() -> None:
        events.set_provider_override(None)  # this thread's context: no LoggerProvider
        assert events.event_logger() is None
        pick()

    with capture_spans() as spans, al.record(trace_path, seed=3):
        worker = threading.Thread(target=contextvars.copy_context().run, args=(work,))
        worker.start()
        worker.join(timeout=30)
    assert [r.log_record.event_name for r in spans.events] == [
        "agentlog.select", "agentlog.proceed", "gen_ai.evaluation.result"]


def test_without_a_logger_provider_nothing_is_emitted_and_nothing_breaks(
        trace_path: Path) -> None:
    from agentlog._spans import events

    assert events.event_logger() is None  # only the API's proxy is configured
    with al.record(trace_path, seed=3):
        assert pick() in (0, 1)


def test_a_failing_logger_loses_the_event_with_a_warning_never_the_draw(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog._spans import events

    class Broken:
        def emit(self, **kwargs: object) -> None:
            raise RuntimeError("exporter down")

    with capture_spans() as spans, al.record(trace_path, seed=3) as run:
        run.event_logger = Broken()
        with pytest.warns(al.InstrumentationWarning, match="could not emit the log event"):
            choice = pick()
    assert choice in (0, 1) and len(spans.by_name("agentlog.window.pick")[0].events) == 3
    assert events.span_events()
