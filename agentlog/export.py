"""Stored traces as OpenTelemetry spans: for any exporter, an OTLP/HTTP backend or a file.

``to_spans(trace)`` yields the SDK's ``ReadableSpan`` objects a live run would have
produced (the same builder makes both), with the records' original timestamps, their
parent/child structure and events, and deterministic ids derived from (run id, window
id, record): exporting the same trace twice sends the same ids, and backends that key
spans by id keep one copy. ``to_otlp`` sends them to an OTLP/HTTP endpoint in batches,
with retries; ``to_otlp_json`` writes the OTLP JSON encoding for backends that import
files. Sending needs the ``otlp`` extra (``pip install 'agentlog[otlp]'``).

Example:
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

import json
import logging
import os
import socket
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._encoding import decode
from ._errors import MissingDependencyError
from ._reader import read
from ._records import (
    EXIT_FAILED,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)
from ._scrub import scrub_text
from ._span_builder import (
    continuation_event,
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
from ._trace import Trace
from ._version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["ExportResult", "endpoint_problem", "to_otlp", "to_otlp_json", "to_spans"]

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
            never closed); their spans were exported up to the last record.
    """

    spans_sent: int = 0
    spans_failed: int = 0
    batches: int = 0
    errors: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)


class _Run:
    __slots__ = ("end", "last_t", "models", "records", "start", "tools", "windows")

    def __init__(self, start: RunStart) -> None:
        self.start = start
        self.end: RunEnd | None = None
        self.windows: dict[int, list[Any]] = {}  # id -> [enter, exit|None, events]
        self.tools: list[ToolCall] = []
        self.models: list[LLMCall] = []
        self.records: list[Any] = []  # run-level scores
        self.last_t = start.t_ns


def _group(trace: Trace) -> list[_Run]:
    runs: dict[int, _Run] = {}
    for rec in trace.records:
        if isinstance(rec, RunStart):
            runs[rec.run] = _Run(rec)
            continue
        run_index = getattr(rec, "run", None)
        run = None if run_index is None else runs.get(run_index)
        if run is None:
            continue  # a Blob, or a record of a run whose start was lost
        t = getattr(rec, "t_ns", 0)
        if t > run.last_t:
            run.last_t = t
        if isinstance(rec, RunEnd):
            run.end = rec
        elif isinstance(rec, WindowEnter):
            run.windows[rec.window] = [rec, None, []]
        elif isinstance(rec, WindowExit):
            entry = run.windows.get(rec.window)
            if entry is not None:
                entry[1] = rec
        elif isinstance(rec, ToolCall):
            run.tools.append(rec)
        elif isinstance(rec, LLMCall):
            run.models.append(rec)
        elif isinstance(rec, Selection | Continuation | Score):
            entry = run.windows.get(rec.window)
            if entry is not None:
                entry[2].append(rec)
            elif isinstance(rec, Score):
                run.records.append(rec)
    return list(runs.values())


def _chosen_id(trace: Trace, sel: Selection) -> Any:
    try:
        ids = decode(trace.blob(sel.pool))
    except Exception:  # the pool blob was lost with a truncated tail: summary only
        return None
    if isinstance(ids, list) and 0 <= sel.choice < len(ids):
        return ids[sel.choice]
    return None


def _events(trace: Trace, records: Iterable[Any], event: Callable[..., Any]) -> list[Any]:
    out = []
    for rec in records:
        if isinstance(rec, Selection):
            name, attributes = selection_event(rec, _chosen_id(trace, rec))
        elif isinstance(rec, Continuation):
            name, attributes = continuation_event(rec)
        else:
            name, attributes = score_event(rec)
        out.append(event(name, attributes, rec.t_ns))
    return out


def to_spans(
    trace: TraceLike,
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    incomplete: list[str] | None = None,
    capture_content: bool = False,
) -> Iterator[ReadableSpan]:
    """Yield a stored trace's spans: run, window, tool and model spans, with their events.

    Args:
        trace: a ``Trace`` or the path of a trace file.
        service_name: the resource's ``service.name``; the run's system when None.
        resource_attributes: extra resource attributes (``openinference.project.name``...).
        incomplete: when given, a line is appended per run or window that never closed
            (its span ends at the run's last record and carries ``agentlog.incomplete``).
        capture_content: put each model call's stored (scrubbed) request and response on
            its span as ``gen_ai.input.messages`` / ``gen_ai.output.messages``, as a live
            call with ``capture_content=True`` does, and each tool call's stored arguments
            and result as ``gen_ai.tool.call.arguments`` / ``.result``, as live spans do
            with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; off by
            default.

    Yields:
        ``opentelemetry.sdk.trace.ReadableSpan`` objects, ready for any ``SpanExporter``.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    tr = trace if isinstance(trace, Trace) else read(trace)
    scope = InstrumentationScope("agentlog", __version__)
    flags = TraceFlags(TraceFlags.SAMPLED)
    runs = _group(tr)
    by_id = {r.start.run_id: r for r in runs}
    if tr.truncated and incomplete is not None:
        incomplete.append(f"{tr.path}: truncated ({tr.bytes_dropped} bytes dropped)")

    def root_of(run: _Run) -> str:
        seen = {run.start.run_id}
        while run.start.parent_run in by_id and run.start.parent_run not in seen:
            run = by_id[run.start.parent_run]
            seen.add(run.start.run_id)
        return run.start.run_id

    def event(name: str, attributes: dict[str, Any], t_ns: int) -> Event:
        return Event(name, attributes, timestamp=t_ns)

    for run in runs:
        start = run.start
        rid = start.run_id
        tid = trace_id(start.root_run or root_of(run))
        resource = Resource.create({
            "service.name": service_name or start.system,
            "agentlog.version": __version__,
            **(resource_attributes or {}),
        })

        def ctx(key: str, rid: str = rid, tid: int = tid) -> SpanContext:
            return SpanContext(tid, span_id(rid, key), is_remote=False, trace_flags=flags)

        run_ctx = ctx("run")
        run_parent = _run_parent(start, by_id, tid, flags, SpanContext)
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
                incomplete.append(f"{tr.path}: run {rid} never ended")
        yield ReadableSpan(
            name, run_ctx, run_parent, resource, attributes,
            _events(tr, run.records, event), (), SpanKind.INTERNAL, status=status,
            start_time=start.t_ns, end_time=end_t, instrumentation_scope=scope,
        )

        def parent_of(window: int, run: _Run = run, run_ctx: SpanContext = run_ctx
                      ) -> SpanContext:
            return run_ctx if window < 0 or window not in run.windows else ctx(f"w{window}")

        for wid, (enter, exit, records) in run.windows.items():
            status = Status(StatusCode.UNSET)
            events = _events(tr, records, event)
            if exit is None:
                attributes = {"agentlog.window": enter.name, "agentlog.run_id": rid,
                              "agentlog.entry_hash": enter.entry_hash.hex(),
                              "agentlog.incomplete": True}
                end_t = run.last_t
                if incomplete is not None:
                    incomplete.append(f"{tr.path}: window {enter.name!r} (id {wid}) never "
                                      f"closed in run {rid}")
            else:
                attributes = window_attributes(rid, enter.entry_hash, exit)
                end_t = exit.t_ns
                if exit.status == EXIT_FAILED:
                    status = Status(StatusCode.ERROR, exit.error_type)
                    exc_attrs = {"exception.type": exit.error_type or "",
                                 "exception.message": exit.error_message or ""}
                    events.append(event("exception", exc_attrs, exit.t_ns))
            yield ReadableSpan(
                window_span_name(enter.name), ctx(f"w{wid}"), parent_of(enter.parent),
                resource, attributes, events, (), SpanKind.INTERNAL, status=status,
                start_time=enter.t_ns, end_time=end_t, instrumentation_scope=scope,
            )
        for i, call in enumerate(run.tools):
            name, attributes = tool_span(rid, call, capture_content=capture_content)
            status = Status(StatusCode.ERROR, call.error_type) if call.status else Status(
                StatusCode.UNSET)
            yield ReadableSpan(
                name, ctx(f"t{i}"), parent_of(call.window), resource, attributes, (), (),
                SpanKind.INTERNAL, status=status, start_time=call.t_ns - call.wall_ns,
                end_time=call.t_ns, instrumentation_scope=scope,
            )
        for i, llm in enumerate(run.models):
            name, attributes = model_span(rid, llm, capture_content=capture_content)
            status = Status(StatusCode.ERROR, llm.error_type) if llm.status else Status(
                StatusCode.UNSET)
            yield ReadableSpan(
                name, ctx(f"m{i}"), parent_of(llm.window), resource, attributes, (), (),
                SpanKind.INTERNAL if llm.in_process else SpanKind.CLIENT, status=status,
                start_time=llm.t_ns - llm.latency_ns, end_time=llm.t_ns,
                instrumentation_scope=scope,
            )


def _run_parent(start: RunStart, by_id: Mapping[str, Any], tid: int, flags: Any,
                span_context: Any) -> Any:
    """The parent of a run's span: where a nested run was opened, in whatever file.

    The rule live spans follow too: a nested run is the child of the enclosing run's
    window it was opened in (``RunStart.parent_window``), else of that run's span, and
    joins the outermost run's trace (``RunStart.root_run``), so a nested run stored in its
    own file exports into its parent's trace. A trace written before those fields
    existed links a nested run to its parent run's span when both are in this file.
    """
    if start.parent_run is None:
        return None
    if start.root_run is None:  # older trace
        if start.parent_run not in by_id:
            return None
        key = "run"
    else:
        key = "run" if start.parent_window is None or start.parent_window < 0 else (
            f"w{start.parent_window}")
    return span_context(tid, span_id(start.parent_run, key), is_remote=False,
                        trace_flags=flags)


def _traces(traces: TraceLike | Iterable[TraceLike]) -> list[TraceLike]:
    if isinstance(traces, Trace | str | os.PathLike):
        return [traces]
    return list(traces)


def _all_spans(traces: TraceLike | Iterable[TraceLike], result: ExportResult,
               service_name: str | None, resource: Mapping[str, Any] | None,
               capture_content: bool = False) -> Iterator[ReadableSpan]:
    for t in _traces(traces):
        yield from to_spans(t, service_name=service_name, resource_attributes=resource,
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


def _need_otlp() -> None:
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "exporting to OTLP needs the OTLP/HTTP exporter, which is not installed; "
            "install it with: pip install 'agentlog[otlp]'"
        ) from None


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

    Each batch is retried ``retries`` times with exponential backoff (``backoff_s``,
    doubled each try); a batch that still fails is counted in ``spans_failed`` and
    named in ``errors``, and the export goes on with the next batch, unless the endpoint
    has accepted no batch yet: then it is taken to be unreachable (nothing listens, a
    wrong URL, refused credentials) and the export stops there, counting the spans left
    in ``spans_failed`` and saying so in ``errors``, instead of waiting out every batch's
    retries in turn (the OTLP exporter's own retries take up to ``timeout_s`` per attempt).
    Before the first batch one TCP connection tests the endpoint (not behind an HTTP proxy,
    nor with an ``exporter`` of your own): a refused port or an unknown host stops the
    export at once, every span counted in ``spans_failed``. URL userinfo and tokens are
    redacted in ``errors``.

    Args:
        traces: traces or trace paths.
        endpoint: the full URL of the traces endpoint.
        headers: HTTP headers (authentication), sent as given.
        service_name: ``service.name``; each run's system when None.
        resource_attributes: extra resource attributes.
        batch: spans per request.
        retries: extra attempts per failed batch.
        backoff_s: the first wait between attempts.
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
        _need_otlp()
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
            wait = backoff_s
            for attempt in range(retries + 1):
                if exporter.export(chunk) is SpanExportResult.SUCCESS:
                    result.spans_sent += len(chunk)
                    break
                if attempt < retries:
                    time.sleep(wait)
                    wait *= 2
            else:
                result.spans_failed += len(chunk)
                why = f" (last error: {scrub_text(reasons.last)})" if reasons.last else ""
                result.errors.append(
                    f"batch {result.batches} ({len(chunk)} spans) was not accepted by "
                    f"{shown} after {retries + 1} attempts{why}"
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

    Example:
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


def _hex_ids(obj: Any) -> Any:
    # OTLP/JSON writes trace and span ids as hex, not the base64 of protobuf's JSON.
    import base64

    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                out[key] = base64.b64decode(value).hex()
            else:
                out[key] = _hex_ids(value)
        return out
    if isinstance(obj, list):
        return [_hex_ids(v) for v in obj]
    return obj


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceRequest`` of ``spans`` (ids in hex)."""
    _need_otlp()
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return _hex_ids(MessageToDict(encode_spans(spans)))  # type: ignore[no-any-return]


def to_otlp_json(
    traces: TraceLike | Iterable[TraceLike],
    out: str | os.PathLike[str],
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    capture_content: bool = False,
) -> ExportResult:
    """Write the OTLP/JSON encoding of stored traces to ``out`` (one request, all spans).

    The file is written to a temporary name beside ``out`` and renamed at the end: an
    error leaves no half-written file. ``capture_content`` is ``to_spans``'s (off by
    default).
    """
    result = ExportResult()
    spans = list(_all_spans(traces, result, service_name, resource_attributes,
                            capture_content))
    document = otlp_json(spans)
    target = os.fspath(out)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".agentlog-export-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, separators=(",", ":"))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    result.spans_sent = len(spans)
    result.batches = 1
    return result
