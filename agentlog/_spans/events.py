"""Events (a selection, a stop decision, an evaluation result) as span events and as
log-based events through the OpenTelemetry Logs API.

The Span Events API is being deprecated in favour of log records with an event name (OTEP
4430); backends read one or the other today. agentlog emits both: the span event on the
window's span (``AGENTLOG_SPAN_EVENTS=false`` turns it off once a backend reads log-based
events), and, when a ``LoggerProvider`` is configured (``opentelemetry._logs.
set_logger_provider``), a log record with the same name and attributes in the span's
context (its trace and span ids), so a backend joins it to the span. With no provider
configured no log work is done at all, as with spans.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
import weakref
from typing import Any

from opentelemetry import _logs, trace

from agentlog._errors import InstrumentationWarning
from agentlog._version import __version__

SPAN_EVENTS_ENV = "AGENTLOG_SPAN_EVENTS"
INSTRUMENTATION = "agentlog"
# A LoggerProvider set by agentlog.testing.capture_spans(): per context, as the tracer's.
_override: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agentlog_logger_provider_override", default=None)
_loggers: weakref.WeakKeyDictionary[Any, _logs.Logger] = weakref.WeakKeyDictionary()


def set_provider_override(provider: Any) -> Any:
    """Use ``provider`` instead of the global LoggerProvider in this context (tests);
    returns the previous override."""
    previous = _override.get()
    _override.set(provider)
    return previous


def event_logger() -> _logs.Logger | None:
    """A logger of the configured LoggerProvider; None when only the API's no-op is there
    (what a run keeps beside its tracer)."""
    override = _override.get()
    provider = override if override is not None else _logs.get_logger_provider()
    if isinstance(provider, _logs.NoOpLoggerProvider) or type(provider).__name__ in (
            "ProxyLoggerProvider", "NoOpLoggerProvider"):
        return None
    try:
        return _loggers[provider]
    except (KeyError, TypeError):
        pass
    logger = provider.get_logger(INSTRUMENTATION, __version__)
    with contextlib.suppress(TypeError):  # a provider that cannot be weakly referenced
        _loggers[provider] = logger
    return logger


def span_events() -> bool:
    """Whether events also go on spans (``AGENTLOG_SPAN_EVENTS``, default true); read once
    per run, when it starts, as its tracer and logger are."""
    return os.environ.get(SPAN_EVENTS_ENV, "").strip().lower() not in ("false", "0", "no")


def emit(run: Any, span: Any, name: str, attributes: dict[str, Any],
         timestamp: int | None = None) -> None:
    """The event ``name`` on ``span`` (unless the run was started with span events off) and,
    with the run's ``event_logger``, as a log record in the span's context. A failing logger
    loses the record with an ``InstrumentationWarning``."""
    if run.span_events:
        span.add_event(name, attributes, timestamp=timestamp)
    logger = run.event_logger
    if logger is None:
        return
    try:
        logger.emit(event_name=name, attributes=attributes, timestamp=timestamp,
                    context=trace.set_span_in_context(span))
    except Exception as exc:  # an event is a copy: losing it must not break the host
        warnings.warn(f"could not emit the log event {name!r}: {exc}",
                      InstrumentationWarning, stacklevel=3)
