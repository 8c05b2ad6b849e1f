"""Live spans built from the records the recorder has just written (one builder for both).

The recorder, window and tool code call these only when the run has a tracer (a real
SDK provider is configured), right after handing a record to the writer; each call feeds
that record to ``agentlog._spans.builder``, the same code ``agentlog.export`` runs on a stored
trace. A tool or model span is created when its record exists (at the call's end) with
the record's own start and end times, so live and exported spans agree to the
nanosecond. Nothing here raises into the host: a failing tracer loses a span, never a
result.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from agentlog._errors import InstrumentationWarning
from agentlog._records import LLMCall, RunEnd, RunStart, Score, ToolCall
from agentlog._spans.builder import (
    call_key,
    model_span,
    run_end_attributes,
    run_span,
    score_event,
    span_id,
    tool_span,
    trace_id,
)
from agentlog._spans.events import emit
from agentlog._spans.tracer import run_contexts, run_spans, start_span
from agentlog._state import Run, WindowState, current_run_var, window_in

_run_spans = run_spans
_lock = threading.Lock()


def start_run(run: Run, start: RunStart) -> Any:
    """Start the run's ``invoke_agent`` span and make it current; returns a detach token.

    Called while the enclosing run (if any) is still the current one. A nested run's span
    is the child of the enclosing window's span, else of the enclosing run's span: the
    parent its stored ``RunStart`` names (``parent_run``, ``parent_window``), so export
    gives it the same parent even from a separate file. A root run's parent is the span
    current in the caller's context (the user's own, if any), which no trace records.
    """
    name, attributes = run_span(start)
    parent = current_run_var.get()
    context = None
    if parent is not None:
        window = window_in(parent)
        span = window.span if window is not None and window.span is not None else (
            _run_spans.get(parent.run_id))
        if span is not None:
            context = trace.set_span_in_context(span)
    ids = (trace_id(start.root_run or start.run_id), span_id(start.run_id, "run"))
    span = start_span(run.tracer, name, ids, context=context, kind=trace.SpanKind.INTERNAL,
                      attributes=attributes, start_time=start.t_ns)
    context = trace.set_span_in_context(span)
    with _lock:
        _run_spans[run.run_id] = span
        run_contexts[run.run_id] = context
    return otel_context.attach(context)


def end_run(run: Run, end: RunEnd, token: Any) -> None:
    with _lock:
        span = _run_spans.pop(run.run_id, None)
        run_contexts.pop(run.run_id, None)
    if token is not None:
        # Exited in another context: the span still ends below.
        with contextlib.suppress(Exception):
            otel_context.detach(token)
    if span is None:
        return
    attributes = run_end_attributes(end)
    if attributes:
        span.set_attributes(attributes)
    if end.status != 0:
        span.set_status(trace.Status(trace.StatusCode.ERROR, end.error_type))
    span.end(end_time=end.t_ns)


def _parent(run: Run, window: WindowState | None) -> Any:
    span = window.span if window is not None else None
    if span is None:
        span = _run_spans.get(run.run_id)
    return None if span is None else trace.set_span_in_context(span)


def _child(run: Run, window: WindowState | None, name: str, kind: trace.SpanKind,
           attributes: dict[str, Any], start_ns: int, end_ns: int, error: str | None,
           key: str) -> None:
    span = start_span(run.tracer, name, (0, span_id(run.run_id, key)),
                      context=_parent(run, window), kind=kind, attributes=attributes,
                      start_time=start_ns)
    if error is not None:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    span.end(end_time=end_ns)


CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_tool_content() -> bool:
    """Whether live tool spans carry their arguments and result (opt-in).

    The switch the OpenTelemetry GenAI instrumentations share: the environment variable
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; off by default.
    """
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


def tool(run: Run, window: WindowState | None, call: ToolCall) -> None:
    """The ``execute_tool {name}`` span of a tool call that has just been recorded."""
    name, attributes = tool_span(run.run_id, call, capture_content=capture_tool_content())
    _child(run, window, name, trace.SpanKind.INTERNAL, attributes, call.t_ns - call.wall_ns,
           call.t_ns, call.error_type if call.status else None, call_key(call))


#: ``gen_ai.operation.name`` values of a model call's span (GenAI semantic conventions).
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})


def traced_elsewhere() -> bool:
    """Whether the span current in this context is another instrumentation's span of a
    model call: an OpenInference ``LLM`` span, or a GenAI model-call span not agentlog's.
    A call made inside it (a framework's instrumentor, pydantic-ai's own spans) is shown
    by it already, so agentlog's span of the call would show it twice."""
    span = trace.get_current_span()
    if not span.is_recording():
        return False
    scope = getattr(span, "instrumentation_scope", None)
    if scope is not None and scope.name == "agentlog":
        return False
    attributes = getattr(span, "attributes", None) or {}
    return (attributes.get("openinference.span.kind") == "LLM"
            or attributes.get("gen_ai.operation.name") in MODEL_OPERATIONS)


def model(run: Run, window: WindowState | None, call: LLMCall, *,
          capture_content: bool = False) -> None:
    """The ``{operation} {model}`` span of a model call that has just been recorded.

    CLIENT, or INTERNAL for an in-process engine. A failing tracer loses the span with an
    ``InstrumentationWarning``, never the call.
    """
    try:
        name, attributes = model_span(run.run_id, call, capture_content=capture_content)
        _child(run, window, name,
               trace.SpanKind.INTERNAL if call.in_process else trace.SpanKind.CLIENT,
               attributes, call.t_ns - call.latency_ns, call.t_ns,
               call.error_type if call.status else None, call_key(call))
    except Exception as exc:  # a span is a copy: losing it must not break the host
        warnings.warn(f"could not emit the span of a model call: {exc}",
                      InstrumentationWarning, stacklevel=3)


def score(run: Run, window: WindowState | None, rec: Score) -> None:
    """``gen_ai.evaluation.result`` on the scored window's span (the run's outside one)."""
    span = window.span if window is not None else None
    if span is None:
        span = _run_spans.get(run.run_id)
    if span is not None:
        name, attributes = score_event(rec)
        emit(run, span, name, attributes, rec.t_ns)
