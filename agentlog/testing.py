"""Helpers for testing code instrumented with agentlog (public API).

Examples:
    >>> import agentlog as al
    >>> from agentlog.testing import capture_spans, record_in_memory
    >>> @al.window("answer")
    ... def answer(q: str) -> str:
    ...     return q.upper()
    >>> with capture_spans() as spans, record_in_memory(seed=3) as rec:
    ...     _ = answer("hi")
    >>> [s.name for s in spans.spans]
    ['agentlog.window.answer', 'invoke_agent agent']
    >>> [w.name for w in rec.trace.windows()]
    ['answer']
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._recorder import record
from ._spans import events as _events
from ._spans import tracer as _otel

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from ._state import Run
    from ._trace import Trace

__all__ = ["CapturedSpans", "RecordedRun", "capture_spans", "record_in_memory"]


class CapturedSpans:
    """Spans finished inside ``capture_spans()``; ``.spans`` lists them in end order.

    ``.provider`` is the SDK ``TracerProvider`` runs opened in the block use: add a
    processor to it, or trace a framework's spans to it, to see them beside agentlog's.
    ``.events`` lists the log-based events (OpenTelemetry Logs API records with an event
    name: selections, stop decisions, evaluation results) of those runs.
    """

    def __init__(self, exporter: Any, provider: Any = None, log_exporter: Any = None) -> None:
        self._exporter = exporter
        self._log_exporter = log_exporter
        self.provider = provider

    @property
    def events(self) -> list[Any]:
        """The log-based events emitted in the block (SDK ``ReadableLogRecord``s)."""
        if self._log_exporter is None:
            return []
        return list(self._log_exporter.get_finished_logs())

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self._exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def clear(self) -> None:
        self._exporter.clear()


@contextmanager
def capture_spans() -> Iterator[CapturedSpans]:
    """Route agentlog's spans to an in-memory exporter (the real OpenTelemetry SDK).

    Runs opened inside the block use a private SDK ``TracerProvider`` with a
    ``SimpleSpanProcessor`` and ``InMemorySpanExporter``; the global provider is untouched.
    The override is a context variable: another thread, or another test running at the
    same time, neither sees these spans nor sends its own here (a run keeps the provider
    it started with, so its windows in worker threads still land here).
    """
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    previous = _otel.set_provider_override(provider)
    previous_logs = _events.set_provider_override(logs)
    try:
        yield CapturedSpans(exporter, provider, log_exporter)
    finally:
        _otel.set_provider_override(previous)
        _events.set_provider_override(previous_logs)
        provider.shutdown()
        logs.shutdown()


class RecordedRun:
    """What ``record_in_memory()`` yields: the run, and after the block its ``trace``."""

    def __init__(self, run: Run, path: str) -> None:
        self.run = run
        self.path = path
        self._trace: Trace | None = None

    @property
    def trace(self) -> Trace:
        if self._trace is None:
            raise RuntimeError("the trace is available after the record_in_memory() block")
        return self._trace


@contextmanager
def record_in_memory(**kwargs: Any) -> Iterator[RecordedRun]:
    """Record a run to a private temporary file, read it back at exit, delete the file.

    Keyword arguments go to ``al.record``. After the block, ``.trace`` holds the run.
    """
    from ._reader import read

    folder = tempfile.mkdtemp(prefix="agentlog-test-")
    path = os.path.join(folder, "run.zst")
    try:
        with record(path, **kwargs) as run:
            recorded = RecordedRun(run, path)
            yield recorded
        recorded._trace = read(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
