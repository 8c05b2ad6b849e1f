"""Stored traces as OpenTelemetry spans: for any exporter, an OTLP/HTTP backend or a file.

``to_spans(trace)`` yields the SDK's ``ReadableSpan`` objects a live run would have
produced (the same builder makes both), with the records' original timestamps, their
parent/child structure and events, and deterministic ids derived from (run id, window
id, record): exporting the same trace twice sends the same ids, and backends that key
spans by id keep one copy. ``to_otlp`` sends them to an OTLP/HTTP endpoint in batches,
with retries; ``to_otlp_json`` writes the OTLP JSON encoding for backends that import
files. Sending needs the ``otlp`` extra (``pip install 'agentlog[otlp]'``).

All three stream: a file is read a frame at a time, a run's spans are built once its end
is read and handed on a batch at a time, so memory does not grow with the number of runs
(``agentlog._spans.stream`` says what it holds).

Examples:
    >>> import agentlog as al
    >>> from agentlog.export import to_spans
    >>> from agentlog.testing import record_in_memory
    >>> @al.window("answer")
    ... def answer(q: str) -> str:
    ...     return q.upper()
    >>> with record_in_memory(system="demo-agent", seed=1) as rec:
    ...     _ = answer("hi")
    >>> sorted(s.name for s in to_spans(rec.trace))
    ['agentlog.window.answer', 'invoke_agent demo-agent']
"""

from __future__ import annotations

import logging
import os
import random
import socket
import stat
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from ._encoding import decode
from ._records import (
    EXIT_FAILED,
    Continuation,
    LLMCall,
    Score,
    Selection,
    ToolCall,
)
from ._scrub import scrub_text
from ._spans.builder import (
    call_key,
    continuation_event,
    id_variant,
    model_span,
    run_end_attributes,
    run_span,
    score_event,
    selection_event,
    span_id,
    tool_span,
    trace_id,
    window_attributes,
    window_span_name,
)
from ._spans.otlp_json import OtlpJsonWriter, need_otlp
from ._spans.otlp_json import otlp_json as otlp_json  # the request of given spans, as a dict
from ._spans.stream import RunRecords, RunStream
from ._trace import Trace
from ._version import __version__
from .dataset import to_parquet as to_parquet  # traces as a Parquet dataset
from .records import trace_files
from .retry import RetryPolicy

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import SpanContext

__all__ = ["ExportResult", "endpoint_problem", "to_otlp", "to_otlp_json", "to_parquet",
           "to_spans"]

TraceLike = Trace | str | os.PathLike[str]


@dataclass
class ExportResult:
    """What an export did.

    Attributes:
        spans_sent: spans the backend (or the file) accepted.
        spans_failed: spans of batches that still failed after the retries.
        batches: batches attempted.
        errors: one line per failed batch (what failed, the last error), and why an
            export stopped early (an endpoint that refused the connection or accepted no
            batch).
        incomplete: one line per trace cut short (truncated file, runs or windows that
            never closed: 100 per file, then a count); their spans were exported up to
            the last record.
    """

    spans_sent: int = 0
    spans_failed: int = 0
    batches: int = 0
    errors: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)


def _chosen_id(stream: RunStream, sel: Selection) -> Any:
    data = stream.blob(sel.pool)
    if data is None:  # the pool blob was lost with a truncated tail: summary only
        return None
    try:
        ids = decode(data)
    except Exception:  # a damaged pool: summary only
        return None
    if isinstance(ids, list) and 0 <= sel.choice < len(ids):
        return ids[sel.choice]
    return None


def to_spans(
    trace: TraceLike | Iterable[TraceLike],
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    incomplete: list[str] | None = None,
    capture_content: bool = False,
) -> Iterator[ReadableSpan]:
    """Yield stored traces' spans: run, window, tool and model spans, with their events.

    A file is streamed a frame at a time and a run's spans are built when its end has been
    read, one span at a time: memory holds one frame, what the runs still open need for
    their spans (summaries, not vectors or prompts; a run of more than 16,384 records
    hands over its finished spans in parts as it goes), and the file's candidate pools,
    whatever the number of runs; the spans are the caller's to keep or drop. Runs come
    out in the order they end; the ids and parents of their spans do not depend on it.

    Args:
        trace: a ``Trace``, the path of a trace file, a folder (every ``*.zst`` below it)
            or an iterable of those.
        service_name: the resource's ``service.name``; the run's system when None.
        resource_attributes: extra resource attributes (``openinference.project.name``...).
        incomplete: when given, a line is appended per run or window that never closed
            (its span ends at the run's last record and carries ``agentlog.incomplete``),
            ``INCOMPLETE_LINES`` per file at most and then one that counts the rest, and
            one per truncated file, before the lines of its runs.
        capture_content: put each model call's stored (scrubbed) request and response on
            its span as ``gen_ai.input.messages`` / ``gen_ai.output.messages``, as a live
            call with ``capture_content=True`` does, and each tool call's stored arguments
            and result as ``gen_ai.tool.call.arguments`` / ``.result``, as live spans do
            with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; off by
            default.

    Yields:
        ``opentelemetry.sdk.trace.ReadableSpan`` objects, ready for any ``SpanExporter``.
    """
    maker = _SpanMaker(service_name, resource_attributes, capture_content)
    for source in _sources(trace):
        yield from maker.file_spans(source, incomplete)


class _SpanMaker:
    """Builds the spans of stored runs: what every run of an export shares (the OTel
    classes, the scope, a ``Resource`` per service name)."""

    def __init__(self, service_name: str | None, resource_attributes: Mapping[str, Any] | None,
                 capture_content: bool) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        self.Resource, self.Event, self.ReadableSpan = Resource, Event, ReadableSpan
        self.SpanContext, self.SpanKind, self.Status, self.StatusCode = (
            SpanContext, SpanKind, Status, StatusCode)
        self.scope = InstrumentationScope("agentlog", __version__)
        self.flags = TraceFlags(TraceFlags.SAMPLED)
        self.service_name = service_name
        self.resource_attributes = dict(resource_attributes or {})
        self.capture_content = capture_content
        # Ids of their own when the spans differ from the live ones (content, resource):
        # re-exported with other options, they arrive instead of being dropped as copies.
        self.variant = id_variant(capture_content=capture_content, service_name=service_name,
                                  resource_attributes=resource_attributes)
        self._resources: dict[str, Any] = {}
        self._stream: RunStream  # the file being read (its Blobs: selections' pools)

    def resource(self, system: str) -> Any:
        # Resource.create runs the resource detectors (a thread pool per call: 4 ms, most
        # of an export's time at 20,000 runs); its result depends on the name only.
        name = self.service_name or system
        resource = self._resources.get(name)
        if resource is None:
            if len(self._resources) >= 256:  # a file whose every run names its own system
                self._resources.clear()
            resource = self._resources[name] = self.Resource.create({
                "service.name": name,
                "agentlog.version": __version__,
                **self.resource_attributes,
            })
        return resource

    def file_spans(self, source: Trace | Path, incomplete: list[str] | None
                   ) -> Iterator[ReadableSpan]:
        """One file's spans, run by run; a truncated file is named first in ``incomplete``."""
        stream = self._stream = RunStream(source, self)
        lines = None if incomplete is None else _Lines()
        for run, last in stream:
            yield from self.run_spans(stream, run, last, lines)
        if incomplete is None or lines is None:
            return
        if stream.truncated:
            incomplete.append(f"{stream.path}: truncated ({stream.bytes_dropped} bytes "
                              "dropped)")
        incomplete.extend(lines)
        if lines.more:
            incomplete.append(f"{stream.path}: {lines.more} more runs or windows never "
                              "closed")

    def event(self, rec: Selection | Continuation | Score) -> Any:
        """The span event of a record (``Prepare.event``), made as the record is read."""
        if isinstance(rec, Selection):
            name, attributes = selection_event(rec, _chosen_id(self._stream, rec))
        elif isinstance(rec, Continuation):
            name, attributes = continuation_event(rec)
        else:
            name, attributes = score_event(rec)
        return self.Event(name, attributes, timestamp=rec.t_ns)

    def call(self, run_id: str, rec: ToolCall | LLMCall) -> _Call:
        """What a tool or model call's span needs (``Prepare.call``), made as the record is
        read: its request and response are not kept."""
        Status, StatusCode = self.Status, self.StatusCode
        status = Status(StatusCode.ERROR, rec.error_type) if rec.status else Status(
            StatusCode.UNSET)
        if isinstance(rec, ToolCall):
            name, attributes = tool_span(run_id, rec, capture_content=self.capture_content)
            return _Call(name, attributes, rec.window, rec.t_ns - rec.wall_ns, rec.t_ns,
                         status, self.SpanKind.INTERNAL, call_key(rec))
        name, attributes = model_span(run_id, rec, capture_content=self.capture_content)
        kind = self.SpanKind.INTERNAL if rec.in_process else self.SpanKind.CLIENT
        return _Call(name, attributes, rec.window, rec.t_ns - rec.latency_ns, rec.t_ns,
                     status, kind, call_key(rec))

    def run_spans(self, stream: RunStream, run: RunRecords, last: bool,
                  incomplete: _Lines | None) -> Iterator[ReadableSpan]:
        """The spans of a run (``last``), or of the part of it that is done: the run's own
        span (with its last part), its windows', tools' and model calls'."""
        ReadableSpan, SpanKind, Status, StatusCode = (
            self.ReadableSpan, self.SpanKind, self.Status, self.StatusCode)
        scope, flags = self.scope, self.flags
        start = run.start
        rid = start.run_id
        tid = trace_id(stream.root_of(start), self.variant)
        resource = self.resource(start.system)

        def ctx(key: str) -> SpanContext:
            return self.SpanContext(tid, span_id(rid, key, self.variant), is_remote=False,
                                    trace_flags=flags)

        run_ctx = ctx("run")
        if last:
            parent_key = stream.parent_key(start)
            run_parent = None if parent_key is None or start.parent_run is None else (
                self.SpanContext(tid, span_id(start.parent_run, parent_key, self.variant),
                                 is_remote=False, trace_flags=flags))
            name, attributes = run_span(start)
            status = Status(StatusCode.UNSET)
            end_t = run.last_t
            if run.end is not None:
                attributes.update(run_end_attributes(run.end))
                end_t = run.end.t_ns
                if run.end.status != 0:
                    status = Status(StatusCode.ERROR, run.end.error_type)
            else:
                attributes["agentlog.incomplete"] = True
                if incomplete is not None:
                    incomplete.append(f"{stream.path}: run {rid} never ended")
            yield ReadableSpan(
                name, run_ctx, run_parent, resource, attributes,
                list(run.scores), (), SpanKind.INTERNAL, status=status,
                start_time=start.t_ns, end_time=end_t, instrumentation_scope=scope,
            )

        def parent_of(window: int) -> SpanContext:
            return ctx(f"w{window}") if run.has_window(window) else run_ctx

        for wid, (enter, exit, records) in run.windows.items():
            if exit is None and not last:
                continue  # still open: in a later part
            status = Status(StatusCode.UNSET)
            events = list(records or ())
            if exit is None:
                attributes = {"agentlog.window": enter.name, "agentlog.run_id": rid,
                              "agentlog.entry_hash": enter.entry_hash.hex(),
                              "agentlog.incomplete": True}
                end_t = run.last_t
                if incomplete is not None:
                    incomplete.append(f"{stream.path}: window {enter.name!r} (id {wid}) "
                                      f"never closed in run {rid}")
            else:
                attributes = window_attributes(rid, enter.entry_hash, exit)
                end_t = exit.t_ns
                if exit.status == EXIT_FAILED:
                    status = Status(StatusCode.ERROR, exit.error_type)
                    exc_attrs = {"exception.type": exit.error_type or "",
                                 "exception.message": exit.error_message or ""}
                    events.append(self.Event("exception", exc_attrs, timestamp=exit.t_ns))
            yield ReadableSpan(
                window_span_name(enter.name), ctx(f"w{wid}"), parent_of(enter.parent),
                resource, attributes, events, (), SpanKind.INTERNAL, status=status,
                start_time=enter.t_ns, end_time=end_t, instrumentation_scope=scope,
            )
        for calls in (run.tools, run.models):
            for call in calls:
                yield ReadableSpan(
                    call.name, ctx(call.key), parent_of(call.window), resource,
                    call.attributes, (), (), call.kind, status=call.status,
                    start_time=call.start_t, end_time=call.end_t, instrumentation_scope=scope,
                )


INCOMPLETE_LINES = 100  # runs and windows never closed named per file (hostile: millions)


class _Lines(list[str]):
    """A file's lines for ``ExportResult.incomplete``: ``INCOMPLETE_LINES`` at most, the
    rest counted."""

    more = 0

    def append(self, line: str) -> None:
        if len(self) < INCOMPLETE_LINES:
            super().append(line)
        else:
            self.more += 1


class _Call(NamedTuple):
    """A tool or model call, as its span needs it."""

    name: str
    attributes: dict[str, Any]
    window: int
    start_t: int
    end_t: int
    status: Any
    kind: Any
    key: str  # its span_id key (builder.call_key): the same live and exported


def _sources(traces: TraceLike | Iterable[TraceLike]) -> Iterator[Trace | Path]:
    """Each trace named, one file at a time (a folder stands for the ``*.zst`` below it),
    resolved as the export reaches it."""
    items = [traces] if isinstance(traces, Trace | str | os.PathLike) else traces
    for item in items:
        yield from trace_files(item, name="traces")


def _all_spans(traces: TraceLike | Iterable[TraceLike], result: ExportResult,
               service_name: str | None, resource: Mapping[str, Any] | None,
               capture_content: bool = False) -> Iterator[ReadableSpan]:
    return to_spans(traces, service_name=service_name, resource_attributes=resource,
                    incomplete=result.incomplete, capture_content=capture_content)


def _batches(spans: Iterator[ReadableSpan], size: int) -> Iterator[list[ReadableSpan]]:
    batch: list[ReadableSpan] = []
    for span in spans:
        batch.append(span)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def to_otlp(
    traces: TraceLike | Iterable[TraceLike],
    *,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    batch: int = 512,
    retries: int = 3,
    backoff_s: float = 0.5,
    timeout_s: float = 10.0,
    exporter: SpanExporter | None = None,
    progress: Callable[[int], None] | None = None,
    capture_content: bool = False,
) -> ExportResult:
    """Send stored traces to an OTLP/HTTP endpoint (``http://host:4318/v1/traces``).

    The spans are built as the traces stream and sent ``batch`` at a time, in memory
    bounded as ``to_spans``'s whatever the number of runs. The OTLP exporter retries a
    batch's transient failures itself (429, 5xx, a dropped connection: with backoff,
    within ``timeout_s``), so agentlog adds no retries of its own to it; an ``exporter`` of
    your own gets ``retries`` more attempts per batch under the one retry policy agentlog
    uses everywhere (``agentlog.retry.RetryPolicy``: full-jitter exponential backoff from
    ``backoff_s``). A batch that still fails is counted in ``spans_failed`` and named in
    ``errors``, and the export goes on with the next batch, unless the endpoint has
    accepted no batch yet:
    then it is taken to be unreachable (nothing listens, a wrong URL, refused
    credentials) and the export stops there, counting the spans left in ``spans_failed``
    and saying so in ``errors``, instead of waiting out every batch's retries in turn.
    Before the first batch one TCP connection tests the endpoint (not behind an HTTP proxy,
    nor with an ``exporter`` of your own): a refused port or an unknown host stops the
    export at once, every span counted in ``spans_failed``. URL userinfo and tokens are
    redacted in ``errors``.

    Args:
        traces: traces, trace paths or folders of them.
        endpoint: the full URL of the traces endpoint.
        headers: HTTP headers (authentication), sent as given.
        service_name: ``service.name``; each run's system when None.
        resource_attributes: extra resource attributes.
        batch: spans per request.
        retries: extra attempts per failed batch, for an ``exporter`` of your own (the
            OTLP exporter retries itself).
        backoff_s: the ceiling of the first wait between those attempts.
        timeout_s: the timeout of one request.
        exporter: a ``SpanExporter`` to use instead of the OTLP/HTTP one.
        progress: called with the number of spans of each batch done.
        capture_content: put the stored (scrubbed) model messages and tool arguments and
            results on the spans (``to_spans``); off by default.

    Returns:
        An ``ExportResult``.
    """
    if batch < 1:
        raise ValueError(f"`batch` must be at least 1; found {batch}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"`retries` must be an int >= 0; found {retries!r}")
    # The OTLP exporter retries transient failures itself: one policy, not two in a row.
    policy = RetryPolicy(max_attempts=1 + (retries if exporter is not None else 0),
                         base=backoff_s, cap=max(backoff_s, 30.0))
    jitter = random.Random()
    if exporter is None:
        problem = endpoint_problem(endpoint)
        if problem is not None:
            raise ValueError(f"`endpoint` {problem}")
    from opentelemetry.sdk.trace.export import SpanExportResult

    result = ExportResult()
    shown = scrub_text(endpoint)  # no URL userinfo or token in a message
    chunks = _batches(_all_spans(traces, result, service_name, resource_attributes,
                                 capture_content), batch)  # lazy: read as batches go
    if exporter is None:
        need_otlp()
        refused = _unreachable(endpoint, timeout_s)
        if refused is not None:  # nothing listens: say so now, not after the retries
            _give_up(result, chunks, progress, f"cannot connect to {shown} ({refused})")
            return result
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}),
                                    timeout=timeout_s)
    # The OTLP exporter logs each failure (with a traceback); the result reports it instead.
    reasons = _LastError()
    loggers = [logging.getLogger(n) for n in ("opentelemetry.exporter.otlp.proto.http",
                                               "opentelemetry.exporter.otlp")]
    saved = [(lg, lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(reasons)
        lg.propagate = False
    try:
        for chunk in chunks:
            result.batches += 1
            for attempt in range(1, policy.max_attempts + 1):
                if exporter.export(chunk) is SpanExportResult.SUCCESS:
                    result.spans_sent += len(chunk)
                    break
                if attempt < policy.max_attempts:
                    time.sleep(policy.delay(attempt, rng=jitter))
            else:
                result.spans_failed += len(chunk)
                why = f" (last error: {scrub_text(reasons.last)})" if reasons.last else ""
                tries = policy.max_attempts
                result.errors.append(
                    f"batch {result.batches} ({len(chunk)} spans) was not accepted by "
                    f"{shown} after {tries} attempt{'s' * (tries != 1)}{why}"
                )
            if progress is not None:
                progress(len(chunk))
            if result.spans_sent == 0 and result.spans_failed:  # unreachable: stop
                _give_up(result, chunks, progress, f"stopped: {shown} accepted no batch")
                break
    finally:
        exporter.shutdown()
        for lg, propagate, level in saved:
            lg.removeHandler(reasons)
            lg.propagate = propagate
            lg.setLevel(level)
    return result


def endpoint_problem(endpoint: str) -> str | None:
    """What is wrong with ``endpoint`` as an OTLP/HTTP traces URL (None: nothing seen).

    Checked before any connection: the scheme, the host, and a path, which OTLP/HTTP
    exporters post to as given (``http://host:4318`` would post to ``/`` and fail as if
    nothing listened). A path of its own (a gateway's ``/api/otel/v1/traces``) is kept.

    Examples:
        >>> from agentlog.export import endpoint_problem
        >>> endpoint_problem("http://127.0.0.1:4318/v1/traces") is None
        True
        >>> print(endpoint_problem("http://127.0.0.1:4318"))
        has no path: the OTLP/HTTP traces endpoint ends in /v1/traces; found http://127.0.0.1:4318 — try http://127.0.0.1:4318/v1/traces
    """  # noqa: E501 - a doctest's output line is as long as it is
    shown = scrub_text(endpoint)  # no URL userinfo or token in a message
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return (f"{shown!r}: expected an OTLP/HTTP traces endpoint such as "
                "http://127.0.0.1:4318/v1/traces")
    path = parts.path.rstrip("/")
    if not path:
        return (f"has no path: the OTLP/HTTP traces endpoint ends in /v1/traces; found "
                f"{shown} — try {_with_path(parts, '/v1/traces')}")
    if path.endswith(("/v1/logs", "/v1/metrics")):
        fixed = _with_path(parts, path.rsplit("/", 1)[0] + "/traces")
        return (f"is another signal's endpoint: traces go to the path ending in /v1/traces; "
                f"found {shown} — try {fixed}")
    return None


def _with_path(parts: urllib.parse.SplitResult, path: str) -> str:
    return scrub_text(urllib.parse.urlunsplit(parts._replace(path=path)))


def _give_up(result: ExportResult, chunks: Iterator[list[ReadableSpan]],
             progress: Callable[[int], None] | None, why: str) -> None:
    """Count the batches left unsent as failed (building their spans sends nothing)."""
    left = spans_left = 0
    for chunk in chunks:
        left += 1
        spans_left += len(chunk)
        if progress is not None:
            progress(len(chunk))
    result.spans_failed += spans_left
    if left or not result.errors:  # a refused connection is named even with no span
        result.errors.append(f"{why}, so the {left} batch{'es' * (left != 1)} left "
                             f"({spans_left} spans) {'was' if left == 1 else 'were'} not "
                             "sent")


def _unreachable(endpoint: str, timeout_s: float) -> str | None:
    """Why nothing can be sent to ``endpoint`` (its host unknown, its port refused), or
    None. One TCP connection before the first batch: the OTLP exporter retries a refused
    connection with backoff until its timeout, our retries multiply that, and a closed
    port took ~30 s to report. Skipped behind a proxy (the proxy is what is reached)."""
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # a port that is not a number, or out of range
        return str(exc)
    if not host or (urllib.request.getproxies().get(parts.scheme)
                    and not urllib.request.proxy_bypass(host)):
        return None
    try:
        socket.create_connection((host, port), timeout=min(timeout_s, 5.0)).close()
    except socket.gaierror as exc:
        return f"unknown host {host!r}: {exc.strerror or exc}"
    except ConnectionRefusedError:
        return f"nothing listens on port {port} of {host}: connection refused"
    except TimeoutError:  # slow, not refused: the exporter, with its own timeout, may get in
        return None
    except OSError as exc:  # an unreachable network or host
        return f"{host}:{port}: {exc.strerror or exc}"
    return None


class _LastError(logging.Handler):
    """Keeps the exporter's last error line (first line only: no traceback)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage().splitlines()[0][:300]
        except Exception:
            self.last = record.msg if isinstance(record.msg, str) else ""


_JSON_BATCH = 512  # spans encoded at once into the OTLP/JSON file


def to_otlp_json(
    traces: TraceLike | Iterable[TraceLike],
    out: str | os.PathLike[str],
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    capture_content: bool = False,
) -> ExportResult:
    """Write the OTLP/JSON encoding of stored traces to ``out`` (one request, all spans).

    The spans are built and encoded a batch at a time and written as they go, in memory
    bounded as ``to_spans``'s whatever the number of runs (the spans of a second resource,
    such as a second system without ``service_name``, wait in a temporary file beside
    ``out`` until the end). The file is written to a temporary name beside ``out`` and
    renamed at the end: an error leaves no half-written file. A device or a pipe
    (``/dev/null``, ``/dev/stdout``) is written to directly. ``capture_content`` is
    ``to_spans``'s (off by default).
    """
    need_otlp()
    result = ExportResult()
    target = os.fspath(out)
    try:
        mode = os.stat(target).st_mode
    except OSError:
        mode = 0
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):  # nothing to replace: never rename over it
        with open(target, "wb") as f:
            _write_otlp_json(f, traces, result, service_name, resource_attributes,
                             capture_content, spool_dir=None)
        return result
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".agentlog-export-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_otlp_json(f, traces, result, service_name, resource_attributes,
                             capture_content, spool_dir=folder)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return result


def _write_otlp_json(f: IO[bytes], traces: TraceLike | Iterable[TraceLike],
                     result: ExportResult, service_name: str | None,
                     resource_attributes: Mapping[str, Any] | None, capture_content: bool,
                     spool_dir: str | None) -> None:
    writer = OtlpJsonWriter(f, spool_dir=spool_dir)
    try:
        spans = _all_spans(traces, result, service_name, resource_attributes,
                           capture_content)
        for chunk in _batches(spans, _JSON_BATCH):
            writer.write(chunk)
            result.spans_sent += len(chunk)
        writer.finish()
    finally:
        writer.close()
    result.batches = 1
