"""OpenTelemetry spans (OTLP JSON) as agentlog traces (``agentlog import otlp FILE... --out DIR``).

``import_spans(files, out)`` reads spans in the OTLP/JSON encoding, of a framework traced
only with OpenTelemetry (GenAI semantic conventions or OpenInference), and writes one
trace per file into folder ``out``, named after the file (``spans.json`` → ``spans.zst``).
A file is an ``ExportTraceServiceRequest`` (``{"resourceSpans": [{"resource": ...,
"scopeSpans": [{"scope": ..., "spans": [...]}]}]}``), or JSON Lines of them, one a line,
as the OpenTelemetry Collector's file exporter writes them. Nothing but the standard
library reads them: no OpenTelemetry package is needed.

Examples:
    >>> from agentlog.adapters.otlp import import_spans
    >>> import_spans(["no-such-spans.json"], "traces")
    Traceback (most recent call last):
    ...
    ValueError: no-such-spans.json: no such file or folder; pass OTLP JSON files ...

==================================  ====================================================
OTLP                                agentlog
==================================  ====================================================
a file                              one trace file
a trace id                          one run: ``system`` the root span's resource
                                    ``service.name`` (or ``system=``), ``task`` the
                                    ``gen_ai.conversation.id`` or ``session.id`` (the
                                    root span's first), else the trace id; ``seed`` 0
                                    (OTLP records none); ``meta``: provenance (below)
a model span: GenAI operation       ``LLMCall``: provider ``gen_ai.provider.name``
``chat``, ``text_completion``,      (``gen_ai.system``, ``llm.provider``,
``generate_content``,               ``llm.system``), model ``gen_ai.request.model``
``embeddings`` (or no operation     (``gen_ai.response.model``, ``llm.model_name``,
and a ``gen_ai.request.model``);    ``embedding.model_name``), request and response
OpenInference kind ``LLM``,         (below), tokens ``gen_ai.usage.input_tokens``/
``EMBEDDING``                       ``output_tokens`` (``..prompt_tokens``/
                                    ``completion_tokens``, ``llm.token_count.prompt``/
                                    ``completion``), latency end − start, response
                                    model, id and finish reasons
a tool span: GenAI operation        ``ToolCall``: name ``gen_ai.tool.name``
``execute_tool``; OpenInference     (``tool.name``), arguments
kind ``TOOL``                       ``gen_ai.tool.call.arguments`` (``input.value``),
                                    result ``gen_ai.tool.call.result``
                                    (``output.value``)
a span's status code 2 (error) or   the call failed: ``OtlpSpanError``, its message
its ``error.type``                  ``error.type`` (else the ``exception`` event's
                                    type) and the status message
a ``gen_ai.evaluation.result``      run-level ``Score(name, channel=name)``:
event (or span)                     ``gen_ai.evaluation.name``,
                                    ``gen_ai.evaluation.score.value``
agent, chain, workflow and other    nothing: their calls are the run's (no window)
spans
==================================  ====================================================

A model call's request is every ``gen_ai.request.*`` attribute but the model, by the
name after the prefix (``temperature``, ``top_p``, ``max_tokens``), the keys of
``llm.invocation_parameters``, ``system_instructions`` (``gen_ai.system_instructions``),
``tools`` (``gen_ai.tool.definitions``, ``llm.tools.N.tool.json_schema``) and
``messages``: the first found of ``gen_ai.input.messages`` (on the span or its
``gen_ai.client.inference.operation.details`` event), ``gen_ai.prompt`` (on the span or
its ``gen_ai.content.prompt`` event), ``gen_ai.prompt.N.*``, the
``gen_ai.{system,user,assistant,tool}.message`` events and
``llm.input_messages.N.message.*`` (read as OpenAI Chat messages: ``role``,
``content``, ``contents``, ``tool_calls``); else ``input`` (``input.value``). Its
response is ``{"messages": ...}`` of the output counterparts (``gen_ai.output.messages``,
``gen_ai.completion``, ``gen_ai.completion.N.*``, the ``gen_ai.choice`` events,
``llm.output_messages.N.message.*``), else ``{"output": output.value}``, else None: an
instrumentation that does not capture content leaves none. GenAI attributes of type
"any" (messages, tool arguments and results, definitions) recorded as JSON text are
decoded; OpenInference's ``input.value``/``output.value`` by their ``mime_type`` (a JSON
object or array without one). Two instrumentations of one call (a framework's span
around the SDK's) are two calls: trace one layer.

Calls come in the order of a depth-first walk of the span tree, children by start time;
spans whose parent is not in the file are walked after the root, by start time. The root
span is the trace's span without a parent (the earliest when several); a trace whose
root is missing starts at its earliest top span. A span without a valid trace id or span
id, with a malformed parent id or time, or repeated (the same span id twice, as a
retrying exporter writes it), a line of JSON Lines that is no OTLP request (a line cut
short when the Collector stopped), and an evaluation without a finite score value are
left out and counted (``ImportResult.skipped``, ``notes``): no number is invented.

Provenance (``meta``): ``source`` (``"otlp"``), ``otlp_file`` (file name),
``otlp_file_sha256``, ``trace_id`` (hex), ``root_span`` (its name), ``convention``
(``"gen_ai"``, ``"openinference"``, both joined by ``+``, or ``"none"``), ``resource``
(the root span's resource attributes), ``model`` (when every model call of the run names
one: what ``estimate reliability --by model`` groups by) and ``agent``
(``gen_ai.agent.name``). Secrets: an attribute whose key names a credential in any of its
dotted parts (``http.request.header.authorization``, ``openai.api_key``, ``*.token``,
``*.password``, ``*.cookie``) is dropped wherever it occurs, and its value removed from
everything else; requests, responses, error messages and ``meta`` pass agentlog's
credential scrubber (``agentlog.scrubbing``: ``sk-…`` keys, ``Bearer`` tokens, URL
userinfo and credential query parameters such as ``url.full``'s ``?api_key=…``).

Imported runs can be estimated on (``agentlog estimate reliability``), not replayed: no
function is registered for them, so nothing re-enters them, and their model calls never
went through agentlog's cache. Record times are the import's; model-call latencies are
the spans'; a tool call's time is the import's (``ToolCall`` times its own call). JSON
Lines are streamed: a run is written once the last line holding one of its spans is
read, so memory holds the traces still open at a line (and one index entry per trace),
not the file; a single JSON document is read whole. A trace appears under its name only
complete (it is written as ``.NAME.partial`` first); an existing trace is replaced only
with ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import agentlog as al
from agentlog.scrubbing import scrub_value

from ._import_files import QUEUE_BYTES, out_folder, trace_targets, written_whole
from ._otlp_json import (
    Source,
    SpanHead,
    as_list,
    documents,
    key_values,
    loads,
    request_spans,
    scan,
    span_head,
)

__all__ = ["NO_REPLAY", "ImportResult", "OtlpSpanError", "import_spans"]

SUFFIXES = (".json", ".jsonl")  # of the files a folder is searched for
NO_REPLAY = ("imported runs can be estimated on (agentlog estimate reliability), not "
             "replayed: no function is registered for them, and their model calls never went "
             "through agentlog's cache")
_FIXES = ("pass OTLP JSON files (an ExportTraceServiceRequest, or JSON Lines of them as the "
          "OpenTelemetry Collector's file exporter writes) or folders holding them (*.json, "
          "*.jsonl)")
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_OPENINFERENCE_MODEL = {"LLM": "chat", "EMBEDDING": "embeddings"}
_MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                   "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_EVALUATION = "gen_ai.evaluation.result"
_EVENT_NOISE = frozenset({"gen_ai.system", "gen_ai.provider.name", "gen_ai.event.content"})
_WRAPPERS = frozenset({"message", "message_content", "tool_call"})  # OpenInference's nesting
_REQUEST_PREFIX = "gen_ai.request."


class OtlpSpanError(Exception):
    """A span's error (status code 2 or an ``error.type``): the error type of the failed
    agentlog record, its message the span's error type and status message."""


@dataclass(frozen=True)
class ImportResult:
    """What ``import_spans`` wrote.

    Attributes:
        files: the trace files written, one per OTLP file, in the order of the files.
        runs: runs written, one per trace id.
        spans: spans imported (those with valid ids and times, each span id once).
        llm_calls: ``LLMCall`` records written.
        tool_calls: ``ToolCall`` records written.
        scores: ``Score`` records written (``gen_ai.evaluation.result`` events).
        skipped: spans, lines and evaluation results left out (``notes`` say why).
        notes: one line per file and reason something was left out, per file whose
            traces hold no model or tool span, and ``NO_REPLAY``.
    """

    files: tuple[Path, ...]
    runs: int
    spans: int
    llm_calls: int
    tool_calls: int
    scores: int
    skipped: int
    notes: tuple[str, ...]


@dataclass
class _Tally:
    runs: int = 0
    spans: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    scores: int = 0
    skipped: dict[tuple[str, str], list[Any]] = field(default_factory=dict)  # [n, example]
    empty: dict[str, int] = field(default_factory=dict)  # file -> runs without calls
    rootless: dict[str, int] = field(default_factory=dict)  # file -> traces without root

    def skip(self, file: str, reason: str, example: str) -> None:
        self.skipped.setdefault((file, reason), [0, example])[0] += 1

    def result(self, files: list[Path]) -> ImportResult:
        notes = [f"{file}: {n} {reason}, left out (e.g. {example})"
                 for (file, reason), (n, example) in self.skipped.items()]
        notes += [f"{file}: {n} trace(s) without their root span: each run starts at its "
                  "earliest top span" for file, n in self.rootless.items()]
        notes += [f"{file}: {n} trace(s) hold no model or tool span (GenAI or OpenInference): "
                  "their runs hold no calls" for file, n in self.empty.items()]
        return ImportResult(
            files=tuple(files), runs=self.runs, spans=self.spans, llm_calls=self.llm_calls,
            tool_calls=self.tool_calls, scores=self.scores,
            skipped=sum(n for n, _ in self.skipped.values()), notes=(*notes, NO_REPLAY))


def import_spans(
    files: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    system: str | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Write each OTLP JSON file of ``files`` as an agentlog trace into folder ``out``.

    Args:
        files: OTLP JSON files (one ``ExportTraceServiceRequest``, or JSON Lines of them),
            or folders (every ``*.json``/``*.jsonl`` below them).
        out: the folder to write to (created when missing); one ``<file stem>.zst`` per file.
        system: the runs' system; by default each trace's ``service.name``.
        overwrite: replace traces already in ``out``; without it they are refused.
        progress: called as ``progress(traces done, traces in all)`` after each trace.

    Returns:
        An ``ImportResult``: the files, runs, calls and scores written, what was left out.

    Raises:
        ValueError: a path that is missing or not OTLP JSON, a file or folder without
            spans, two files that would write one trace, ``out`` not a folder, an empty
            ``system``.
        agentlog.TracePathError: a trace to write exists and ``overwrite`` is False.
    """
    if system is not None and (not isinstance(system, str) or not system.strip()):
        raise ValueError(f"`system` must be a non-empty string or None; found {system!r}")
    paths = _span_files([files] if isinstance(files, str | os.PathLike) else list(files))
    folder = out_folder(out)
    targets = trace_targets(paths, folder, overwrite=overwrite, command="otlp")
    tally = _Tally()
    # Every file is checked before anything is written.
    sources = [scan(p, partial(tally.skip, p.name)) for p in paths]
    total = sum(len(s.last) for s in sources)
    folder.mkdir(parents=True, exist_ok=True)
    for source, dst in zip(sources, targets, strict=True):
        # A fresh context: the imported runs never nest in a run the caller is recording.
        contextvars.Context().run(_import_file, source, dst, system, tally, total, progress)
    return tally.result(targets)


def _span_files(paths: list[str | os.PathLike[str]]) -> list[Path]:
    if not paths:
        raise ValueError(f"no OTLP JSON files given; {_FIXES}")
    found: dict[Path, Path] = {}
    for given in map(Path, paths):
        if given.is_dir():
            below = sorted(p for p in given.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not below:
                raise ValueError(f"{given}: a folder without OTLP JSON files (no *.json or "
                                 "*.jsonl file below it); pass the folder or file the "
                                 "Collector's file exporter writes to (its `path`)")
        elif not given.exists():
            raise ValueError(f"{given}: no such file or folder; {_FIXES}")
        else:
            below = [given]  # a file named by the user: its content decides, not its suffix
        for p in below:
            found.setdefault(p.resolve(), p)
    return list(found.values())


# ----------------------------------------------------------------------------- the spans


class _Span(NamedTuple):
    head: SpanHead
    name: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]  # (name, attributes), in the file's order
    error: OtlpSpanError | None
    resource: dict[str, Any]


def _span(head: SpanHead, span: Mapping[str, Any], resource: dict[str, Any],
          known: set[str]) -> _Span:
    attributes = key_values(span.get("attributes"), known)
    events = [(str(e.get("name") or ""), key_values(e.get("attributes"), known))
              for e in as_list(span.get("events")) if isinstance(e, dict)]
    return _Span(head, str(span.get("name") or ""), attributes, events,
                 _error(span, attributes, events), resource)


def _error(span: Mapping[str, Any], a: Mapping[str, Any],
           events: list[tuple[str, dict[str, Any]]]) -> OtlpSpanError | None:
    status: dict[str, Any] = span.get("status") or {}
    if not isinstance(status, dict):
        status = {}
    failed = status.get("code") in (2, "STATUS_CODE_ERROR")
    if not failed and a.get("error.type") is None:
        return None
    exception = next((attrs for name, attrs in events if name == "exception"), {})
    kind = a.get("error.type") or exception.get("exception.type") or "error"
    message = status.get("message") or exception.get("exception.message")
    return OtlpSpanError(f"{kind}: {message}" if message else str(kind))


# ----------------------------------------------------------------------------- a file


def _import_file(source: Source, dst: Path, system: str | None, tally: _Tally, total: int,
                 progress: Callable[[int, int], None] | None) -> None:
    known: set[str] = set()  # credential values dropped by name: removed everywhere
    ends: dict[int, list[str]] = {}
    for trace_id, number in source.last.items():
        ends.setdefault(number, []).append(trace_id)
    open_traces: dict[str, list[_Span]] = {}
    resources: dict[int, dict[str, Any]] = {}  # id of an attribute list -> decoded, per line
    with written_whole(dst) as partial_path:
        for number, doc in documents(source):
            resources.clear()
            for attributes, raw in request_spans(doc):
                head = span_head(raw)
                if isinstance(head, str):
                    continue  # counted by scan
                resource = resources.get(id(attributes))
                if resource is None:
                    resource = resources[id(attributes)] = key_values(attributes, known)
                open_traces.setdefault(head.trace_id, []).append(
                    _span(head, raw, resource, known))
            ended = [open_traces.pop(t) for t in ends.get(number, ()) if t in open_traces]
            ended.sort(key=lambda spans: (min(s.head.start for s in spans), spans[0].head))
            for spans in ended:
                _import_trace(spans, source, partial_path, system, known, tally)
                tally.runs += 1
                if progress is not None:
                    progress(tally.runs, total)


def _walk(spans: list[_Span], file: str, tally: _Tally) -> tuple[_Span, list[_Span]]:
    """The root span and every span in depth-first order, children by start time (a span
    id seen twice counted and left out)."""
    by_id: dict[str, _Span] = {}
    for span in spans:
        if span.head.span_id in by_id:
            tally.skip(file, "span(s) repeated (a span id seen twice)", f"span {span.name!r}")
        else:
            by_id[span.head.span_id] = span
    children: dict[str, list[_Span]] = {}
    tops: list[_Span] = []
    for span in by_id.values():
        parent = span.head.parent_id
        if parent in by_id and parent != span.head.span_id:
            children.setdefault(parent, []).append(span)
        else:
            tops.append(span)
    roots = _by_start([s for s in tops if not s.head.parent_id])
    if not roots:
        tally.rootless[file] = tally.rootless.get(file, 0) + 1
    order = roots + _by_start([s for s in tops if s.head.parent_id])  # the root first
    walked: list[_Span] = []
    seen: set[str] = set()
    stack = order[::-1]
    # A cycle of parent ids has no top span: its spans are walked after the others.
    remaining = iter(_by_start(list(by_id.values())))
    while stack or len(seen) < len(by_id):
        span = stack.pop() if stack else next(remaining)
        if span.head.span_id in seen:
            continue
        seen.add(span.head.span_id)
        walked.append(span)
        stack.extend(_by_start(children.get(span.head.span_id, []))[::-1])
    return walked[0], walked


def _by_start(spans: list[_Span]) -> list[_Span]:
    return sorted(spans, key=lambda s: (s.head.start, s.head.span_id))


def _import_trace(spans: list[_Span], source: Source, path: Path, system: str | None,
                  known: set[str], tally: _Tally) -> None:
    file = source.path.name
    root, walked = _walk(spans, file, tally)
    tally.spans += len(walked)
    kinds = [_kind(s.attributes) for s in walked]
    conventions = sorted({c for s in walked for c in _conventions(s.attributes)})
    models = {_model(s.attributes) for s, k in zip(walked, kinds, strict=True) if k == "llm"}
    meta: dict[str, Any] = {
        "source": "otlp", "otlp_file": file, "otlp_file_sha256": source.sha256,
        "trace_id": root.head.trace_id, "root_span": root.name,
        "convention": "+".join(conventions) or "none",
        "resource": scrub_value(root.resource, known),
    }
    models.discard("unknown")
    if len(models) == 1:
        meta["model"] = models.pop()
    agent = _first_of(walked, root, "gen_ai.agent.name")
    if agent is not None:
        meta["agent"] = agent
    task = _first_of(walked, root, "gen_ai.conversation.id", "session.id")
    service = root.resource.get("service.name")
    if not any(kinds):
        tally.empty[file] = tally.empty.get(file, 0) + 1
    if task in (None, ""):
        task = root.head.trace_id
    with al.record(path, system=system or str(service or "unknown_service"), task=str(task),
                   seed=0, mode="a", meta=meta, max_queue_bytes=QUEUE_BYTES,
                   redact=partial(scrub_value, known=known) if known else None):
        for span, kind in zip(walked, kinds, strict=True):
            if kind == "llm":
                _llm_call(span)
                tally.llm_calls += 1
            elif kind == "tool":
                _tool_call(span)
                tally.tool_calls += 1
            _scores(span, file, tally)


def _first_of(walked: list[_Span], root: _Span, *names: str) -> Any:
    """The first of the attributes ``names`` on the root span, else on any span in order."""
    for span in (root, *walked):
        value = _first(span.attributes, *names)
        if value is not None:
            return value
    return None


def _first(a: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = a.get(name)
        if value is not None:
            return value
    return None


def _conventions(a: Mapping[str, Any]) -> list[str]:
    found = ["openinference"] if "openinference.span.kind" in a else []
    if any(key.startswith("gen_ai.") for key in a):
        found.append("gen_ai")
    return found


def _kind(a: Mapping[str, Any]) -> str | None:
    """``"llm"``, ``"tool"`` or None (agent, chain, workflow, any other span)."""
    operation, kind = _str(a, "gen_ai.operation.name"), _str(a, "openinference.span.kind")
    if operation in _MODEL_OPERATIONS or kind in _OPENINFERENCE_MODEL:
        return "llm"
    if operation == "execute_tool" or kind == "TOOL":
        return "tool"
    if operation is None and kind is None and "gen_ai.request.model" in a:
        return "llm"  # GenAI conventions from before gen_ai.operation.name
    return None


def _str(a: Mapping[str, Any], key: str) -> str | None:
    """A text attribute; None when absent or of another type (a list is no name)."""
    value = a.get(key)
    return value if isinstance(value, str) else None


def _model(a: Mapping[str, Any]) -> str:
    return str(_first(a, "gen_ai.request.model", "gen_ai.response.model", "llm.model_name",
                      "embedding.model_name") or "unknown")


def _json(value: Any) -> Any:
    """An attribute that holds a JSON object or array as text, decoded; else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        return _decoded(value)
    return value


def _decoded(value: Any) -> Any:
    """A GenAI attribute of type "any" (messages, tool arguments and results): recorded as
    its JSON text where a span cannot hold the structure, so text that is JSON is decoded;
    other text stays text."""
    if not isinstance(value, str):
        return value
    try:
        return loads(value.encode())
    except (ValueError, RecursionError):
        return value


def _io_value(a: Mapping[str, Any], side: str) -> Any:
    """OpenInference's ``input.value``/``output.value``: decoded when its ``mime_type`` is
    JSON, an object or array in text without a mime type decoded too, else text."""
    value = a.get(f"{side}.value")
    mime = a.get(f"{side}.mime_type")
    return _decoded(value) if mime == "application/json" else (
        _json(value) if mime is None else value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value)) if math.isfinite(value) else 0


# ----------------------------------------------------------------------------- the records


def _llm_call(span: _Span) -> None:
    a = span.attributes
    operation = _str(a, "gen_ai.operation.name")
    if operation not in _MODEL_OPERATIONS:
        operation = _OPENINFERENCE_MODEL.get(_str(a, "openinference.span.kind") or "", "chat")
    finish = a.get("gen_ai.response.finish_reasons")
    response_model, response_id = a.get("gen_ai.response.model"), a.get("gen_ai.response.id")
    fingerprint = _first(a, "openai.response.system_fingerprint",
                         "gen_ai.openai.response.system_fingerprint")
    al.llm_call(
        str(_first(a, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
            or "unknown"),
        _model(a), request=_request(span), response=_response(span), operation=operation,
        input_tokens=_count(_first(a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                                   "llm.token_count.prompt")),
        output_tokens=_count(_first(a, "gen_ai.usage.output_tokens",
                                    "gen_ai.usage.completion_tokens",
                                    "llm.token_count.completion")),
        latency_ns=max(0, span.head.end - span.head.start), error=span.error,
        response_model=response_model if isinstance(response_model, str) else None,
        response_id=response_id if isinstance(response_id, str) else None,
        finish_reasons=[str(r) for r in finish] if isinstance(finish, list) else (),
        fingerprint=fingerprint if isinstance(fingerprint, str) else None,
        span=False)  # an import emits no spans: the calls are not happening now


def _tool_call(span: _Span) -> None:
    a = span.attributes
    name = _first(a, "gen_ai.tool.name", "tool.name") or span.name.removeprefix("execute_tool ")
    arguments = (_decoded(a["gen_ai.tool.call.arguments"]) if "gen_ai.tool.call.arguments" in a
                 else _io_value(a, "input"))
    if not isinstance(arguments, Mapping):
        arguments = {} if arguments is None else {"input": arguments}
    result = (_decoded(a["gen_ai.tool.call.result"]) if "gen_ai.tool.call.result" in a
              else _io_value(a, "output"))

    def call() -> Any:
        if span.error is not None:
            raise span.error
        return result

    with contextlib.suppress(OtlpSpanError):  # recorded as the call's error
        al.tool_call(str(name) or "tool", arguments, call, span=False)


def _scores(span: _Span, file: str, tally: _Tally) -> None:
    results = [attrs for name, attrs in span.events if name == _EVALUATION]
    if "gen_ai.evaluation.name" in span.attributes:  # an evaluation traced as a span
        results.append(span.attributes)
    for attrs in results:
        name = attrs.get("gen_ai.evaluation.name")
        value = attrs.get("gen_ai.evaluation.score.value")
        if not isinstance(name, str) or not name:
            tally.skip(file, "evaluation result(s) without a gen_ai.evaluation.name",
                       f"span {span.name!r}")
        elif attrs.get("error.type") is not None:
            tally.skip(file, "evaluation result(s) that failed (error.type)",
                       f"{name!r}: {attrs['error.type']!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            label = attrs.get("gen_ai.evaluation.score.label")
            tally.skip(file, "evaluation result(s) without a finite score value",
                       f"{name!r}: label {label!r}")
        else:  # _value leaves no NaN nor infinity
            al.score(name, float(value), channel=name)
            tally.scores += 1


def _request(span: _Span) -> dict[str, Any]:
    a = span.attributes
    request: dict[str, Any] = {}
    parameters = _decoded(a.get("llm.invocation_parameters"))
    if isinstance(parameters, dict):
        request.update(parameters)
    for key, value in a.items():
        if key.startswith(_REQUEST_PREFIX) and key != "gen_ai.request.model":
            request[key.removeprefix(_REQUEST_PREFIX)] = value
    if "gen_ai.system_instructions" in a:
        request["system_instructions"] = _decoded(a["gen_ai.system_instructions"])
    tools = _decoded(a.get("gen_ai.tool.definitions"))
    if tools is None:
        listed = _indexed(a, "llm.tools.")
        tools = [_decoded(t.get("tool", t).get("json_schema")) if isinstance(t, dict) else t
                 for t in listed] if listed else None
    if tools is not None:
        request["tools"] = tools
    messages = _messages(span, "input")
    if messages is not None:
        request["messages"] = messages
    elif "input.value" in a:
        request["input"] = _io_value(a, "input")
    return request


def _response(span: _Span) -> Any:
    messages = _messages(span, "output")
    if messages is not None:
        return {"messages": messages}
    if "output.value" in span.attributes:
        return {"output": _io_value(span.attributes, "output")}
    return None


def _messages(span: _Span, side: str) -> Any:
    """A model span's input or output messages, from the first convention that holds them
    (module docstring)."""
    a, events = span.attributes, span.events
    legacy, legacy_event = (("gen_ai.prompt", "gen_ai.content.prompt") if side == "input"
                            else ("gen_ai.completion", "gen_ai.content.completion"))
    whole = (a.get(f"gen_ai.{side}.messages"), _on_event(events, _DETAILS_EVENT,
                                                         f"gen_ai.{side}.messages"),
             a.get(legacy), _on_event(events, legacy_event, legacy))
    for value in whole:
        if value is not None:
            return _decoded(value)
    flat = _indexed(a, f"{legacy}.") or _indexed(a, f"llm.{side}_messages.")
    if flat:
        return flat
    if side == "input":
        found = [{"role": _MESSAGE_EVENTS[name], **_event_body(attrs)}
                 for name, attrs in events if name in _MESSAGE_EVENTS]
    else:
        found = [_event_body(attrs) for name, attrs in events if name == "gen_ai.choice"]
    return found or None


def _on_event(events: list[tuple[str, dict[str, Any]]], event: str, key: str) -> Any:
    return next((attrs[key] for name, attrs in events if name == event and key in attrs), None)


def _event_body(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A message event's body: its ``gen_ai.event.content`` JSON, else its attributes."""
    content = _decoded(attrs.get("gen_ai.event.content"))
    body = {k: _json(v) for k, v in attrs.items() if k not in _EVENT_NOISE}
    return {**body, **content} if isinstance(content, dict) else body


def _indexed(a: Mapping[str, Any], prefix: str) -> list[Any] | None:
    """Flattened attributes ``{prefix}N.path`` as a list by N of nested dicts, single-key
    wrappers (``message``, ``message_content``, ``tool_call``) removed; None when there
    are none. ``llm.input_messages.0.message.role`` → ``[{"role": ...}]``."""
    tree: dict[str, Any] = {}
    for key, value in a.items():
        if not key.startswith(prefix):
            continue
        path = key[len(prefix):].split(".")
        if not path[0].isdigit():
            continue  # gen_ai.prompt.name and the like
        node = tree
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break  # a path both a value and a container: the value stays
            node = child
        else:
            node.setdefault(path[-1], value)  # text as it was: tool arguments are JSON text
    if not tree:
        return None
    shaped = _shape(tree)
    return shaped if isinstance(shaped, list) else None


def _shape(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and next(iter(node)) in _WRAPPERS:
        return _shape(next(iter(node.values())))
    if node and all(k.isdigit() for k in node):
        return [_shape(node[k]) for k in sorted(node, key=int)]
    return {k: _shape(v) for k, v in node.items()}
