"""Model and tool calls of any framework that emits OpenTelemetry spans, as agentlog records.

CrewAI, LlamaIndex, Google ADK and many others are instrumented with the OpenTelemetry
GenAI semantic conventions or with OpenInference. ``RecordingSpanProcessor`` is an OTel
``SpanProcessor``: add it to the ``TracerProvider`` the framework traces to, and each of
its model spans (``gen_ai.operation.name`` ``chat``/``text_completion``/
``generate_content``/``embeddings``, or OpenInference kind ``LLM``/``EMBEDDING``) becomes
an ``LLMCall``, and each tool span (``execute_tool``, or kind ``TOOL``) a ``ToolCall``, of
the run and window current where the span ends. agentlog's own spans are skipped (their
instrumentation scope is ``agentlog``), so the records agentlog writes, and the spans
they emit, never come back through the bridge.

One span per call in the backend: by default (``spans="framework"``) the bridged calls
are recorded without agentlog's own model and tool spans, since the framework's spans are
already there; ``spans="both"`` emits agentlog's too (two spans per call, and token totals
counted twice by a backend that sums them). agentlog's window and run spans are emitted
either way: the framework's spans nest under them.

What a span carries is what is recorded: provider, model, token usage, latency, status,
the tool's name, arguments and result where the instrumentation put them on the span. A
bridged call is recorded, not served: a frozen replay of a framework seen only through
its spans re-runs its calls (give the framework agentlog's HTTP client to serve them).

Examples:
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from agentlog.adapters.otel_bridge import RecordingSpanProcessor
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(RecordingSpanProcessor())
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import agentlog as al
from agentlog import InstrumentationWarning

from ._recording import require

_sdk_trace = require("opentelemetry.sdk.trace", "otlp")

__all__ = ["RecordingSpanProcessor"]

_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_OPENINFERENCE_MODEL = frozenset({"LLM", "EMBEDDING"})


def _first(attributes: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = attributes.get(name)
        if value is not None:
            return value
    return None


def _json(value: Any) -> Any:
    """A span attribute that holds JSON text, decoded; anything else as it is."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return list(value) if isinstance(value, tuple) else value


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class _SpanError(Exception):
    """A bridged span's error status, recorded as the call's error."""


class RecordingSpanProcessor(_sdk_trace.SpanProcessor):  # type: ignore[misc,name-defined]
    """Turns other instrumentation's model and tool spans into records (module docs).

    Never raises into the tracer: a span it cannot record is skipped, with one
    ``InstrumentationWarning`` per kind of failure.
    """

    def __init__(self, *, spans: Literal["framework", "both"] = "framework") -> None:
        if spans not in ("framework", "both"):
            raise ValueError(f"`spans` must be 'framework' or 'both'; found {spans!r}")
        self._span = spans == "both"
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def on_end(self, span: Any) -> None:
        scope = getattr(span, "instrumentation_scope", None)
        if scope is not None and scope.name == "agentlog":
            return  # agentlog's own span: its record is already written
        if al.current_run() is None:
            return
        attributes = dict(span.attributes or {})
        operation = attributes.get("gen_ai.operation.name")
        kind = attributes.get("openinference.span.kind")
        try:
            if operation in _MODEL_OPERATIONS or kind in _OPENINFERENCE_MODEL:
                self._model(span, attributes, operation or str(kind).lower())
            elif operation == "execute_tool" or kind == "TOOL":
                self._tool(span, attributes)
        except Exception as exc:  # never into the framework's tracer
            self._warn(type(exc).__name__, f"agentlog could not record the span "
                       f"{span.name!r} ({type(exc).__name__}: {exc}); it was skipped")

    def _model(self, span: Any, a: Mapping[str, Any], operation: str) -> None:
        provider = _first(a, "gen_ai.provider.name", "gen_ai.system", "llm.provider",
                          "llm.system") or "unknown"
        model = _first(a, "gen_ai.request.model", "gen_ai.response.model",
                       "llm.model_name", "embedding.model_name") or "unknown"
        request = {key: _json(value) for key, value in a.items()
                   if key.startswith(("gen_ai.request.", "gen_ai.input.", "llm.input",
                                      "input.", "llm.invocation_parameters"))}
        response = {key: _json(value) for key, value in a.items()
                    if key.startswith(("gen_ai.output.", "llm.output", "output."))} or None
        finish = a.get("gen_ai.response.finish_reasons")
        al.llm_call(
            f"{provider}.bridged", str(model), request=request, response=response,
            operation="chat" if operation == "llm" else operation,
            input_tokens=_int(_first(a, "gen_ai.usage.input_tokens", "llm.token_count.prompt")),
            output_tokens=_int(_first(a, "gen_ai.usage.output_tokens",
                                      "llm.token_count.completion")),
            latency_ns=max(0, (span.end_time or 0) - (span.start_time or 0)),
            error=self._error(span),
            response_model=a.get("gen_ai.response.model"),
            response_id=a.get("gen_ai.response.id"),
            finish_reasons=list(finish) if isinstance(finish, list | tuple) else (),
            span=self._span,
        )

    def _tool(self, span: Any, a: Mapping[str, Any]) -> None:
        name = str(_first(a, "gen_ai.tool.name", "tool.name") or span.name)
        # OpenInference's arguments are the span's input.value; its tool.parameters is the
        # tool's declared JSON schema, not the call's arguments.
        arguments = _json(_first(a, "gen_ai.tool.call.arguments", "input.value"))
        result = _json(_first(a, "gen_ai.tool.call.result", "output.value"))
        if not isinstance(arguments, Mapping):
            arguments = {} if arguments is None else {"input": arguments}
        error = self._error(span)

        def outcome() -> Any:
            if error is not None:
                raise error
            return result

        try:
            al.tool_call(name, arguments, outcome, span=self._span)
        except _SpanError:
            pass  # recorded as the call's error
        except al.CacheMiss:
            pass  # under a frozen replay: the live call already happened in the framework

    @staticmethod
    def _error(span: Any) -> _SpanError | None:
        status = getattr(span, "status", None)
        code = getattr(getattr(status, "status_code", None), "name", "")
        if code != "ERROR":
            return None
        return _SpanError(getattr(status, "description", None) or "the span ended in error")

    def _warn(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        warnings.warn(message, InstrumentationWarning, stacklevel=2)
