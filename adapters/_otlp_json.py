"""OTLP/JSON files read: the requests of a file, their spans' ids and times, attribute values.

The encoding layer of ``agentlog.adapters.otlp`` (which maps spans to records). A file
is one ``ExportTraceServiceRequest`` in protobuf's JSON mapping or OTLP/JSON (ids in
base64 or hex, 64-bit integers as strings or numbers, JSON or proto field names), or
JSON Lines of them. ``scan`` is the first pass (format, digest, where each trace ends),
``documents`` the second (the requests, a line at a time).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from agentlog.scrubbing import is_credential_name, scrub_value

__all__ = ["Source", "SpanHead", "as_list", "documents", "key_values", "loads", "request_spans",
           "scan", "span_head"]

_MAX_DEPTH = 64
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # a surrogate's escape, paired or not
_INT64 = (-(1 << 63), 1 << 63)
_UINT64 = 1 << 64
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}
_TOP_LEVEL = ("OTLP logs (resourceLogs)", "OTLP metrics (resourceMetrics)")


class Source(NamedTuple):
    """A file checked by ``scan``: how to read it and where each trace ends in it."""

    path: Path
    lines: bool  # JSON Lines, streamed; else one JSON document, read whole
    last: dict[str, int]  # trace id -> the line holding its last span (0: the document)
    sha256: str


def loads(text: bytes) -> Any:
    """JSON without the non-standard NaN and Infinity (OTLP writes them as strings); an
    integer that no 64 bits hold stays its text (a trace stores 64-bit integers), and a
    lone surrogate escape (``"\\ud800"``, valid JSON but no text) becomes U+FFFD."""
    doc = json.loads(text, parse_constant=_no_constant, parse_int=_int)
    return _text(doc) if _SURROGATE.search(text) else doc


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int(text: str) -> int | str:
    number = int(text)
    return number if _INT64[0] <= number < _UINT64 else text


def _request_error(doc: Any) -> str | None:
    """What ``doc`` is when it is not an OTLP trace request (None when it is one)."""
    if not isinstance(doc, dict):
        return f"a JSON {_JSON_TYPES.get(type(doc), 'value')}, not an object"
    spans = _field(doc, "resourceSpans", "resource_spans")
    if isinstance(spans, list) or (spans is None and not doc):
        return None  # `{}` is an empty request (protobuf's JSON leaves empty lists out)
    if spans is not None:
        return "\"resourceSpans\" that is not a list"
    for key, what in zip(("resourceLogs", "resourceMetrics"), _TOP_LEVEL, strict=True):
        if key in doc:
            return what
    return f"an object with the keys {', '.join(map(repr, list(doc)[:5]))}"


def _not_otlp(path: Path, found: str) -> ValueError:
    return ValueError(
        f"{path}: not OTLP JSON: expected an ExportTraceServiceRequest (an object with "
        "\"resourceSpans\") or JSON Lines of them, one a line (the OpenTelemetry Collector's "
        f"file exporter); found {found}; export the spans with an OTLP JSON exporter (the "
        "Collector's file exporter in a traces pipeline, or agentlog export --format "
        "otlp-json)")


def scan(path: Path, skip: Callable[[str, str], None]) -> Source:
    """The first pass: the file's format, its digest and the line of each trace's last
    span; ``skip(reason, example)`` for each span and line that cannot be imported (the
    second pass, ``documents``, leaves them out silently).

    Raises:
        ValueError: the file is not OTLP JSON (its first line or whole text says what it
            is), or holds no span with valid ids.
    """
    digest = hashlib.sha256()
    last: dict[str, int] = {}
    lines: bool | None = None  # undecided until the first line that is not blank
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            digest.update(line)
            if lines is False or not line.strip():
                continue
            try:
                doc = loads(line)
            except (ValueError, RecursionError) as exc:
                if lines is None:  # not one document a line: maybe one document in all
                    lines = False
                else:
                    skip("line(s) of JSON Lines that are not JSON",
                         f"line {number}: {str(exc)[:80]}")
                continue
            problem = _request_error(doc)
            if lines is None:
                if problem is not None:
                    raise _not_otlp(path, f"{problem} (line {number})")
                lines = True
            elif problem is not None:
                skip("line(s) of JSON Lines that are no OTLP trace request",
                     f"line {number}: {problem}")
                continue
            _index(doc, number, last, skip)
    if lines is None:
        raise _not_otlp(path, "an empty file")
    if not lines:
        try:
            doc = loads(path.read_bytes())
        except (ValueError, RecursionError) as exc:
            raise _not_otlp(path, f"text that is not JSON ({str(exc)[:120]})") from None
        problem = _request_error(doc)
        if problem is not None:
            raise _not_otlp(path, problem)
        _index(doc, 0, last, skip)
    if not last:
        raise ValueError(f"{path}: holds no span with a trace id and a span id (OTLP JSON with "
                         "no spans); check that the exporter was given the spans (a traces "
                         "pipeline, the tracer provider the framework traces to)")
    return Source(path, bool(lines), last, digest.hexdigest())


def _index(doc: Any, number: int, last: dict[str, int],
           skip: Callable[[str, str], None]) -> None:
    for _, span in request_spans(doc):
        head = span_head(span)
        if isinstance(head, str):
            name = span.get("name") if isinstance(span, dict) else None
            skip(f"span(s) with {head}", f"span {name!r}")
        else:
            last.pop(head.trace_id, None)  # re-inserted: the dict's order is by last line
            last[head.trace_id] = number


def documents(source: Source) -> Iterator[tuple[int, Any]]:
    """(line, request) of every OTLP request of the file (those ``scan`` counted out left
    out), a line at a time; (0, the document) for one document."""
    if not source.lines:
        yield 0, loads(source.path.read_bytes())
        return
    with source.path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = loads(line)
            except (ValueError, RecursionError):
                continue
            if _request_error(doc) is None:
                yield number, doc


def _field(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field by its JSON name or its proto name (parsers of protobuf's JSON take both)."""
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def request_spans(doc: Mapping[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(the resource's attribute list, span) for every span of a request."""
    for resource_spans in as_list(_field(doc, "resourceSpans", "resource_spans")):
        if not isinstance(resource_spans, dict):
            continue
        resource = resource_spans.get("resource")
        attributes = resource.get("attributes") if isinstance(resource, dict) else None
        for scope_spans in as_list(_field(resource_spans, "scopeSpans", "scope_spans")):
            if isinstance(scope_spans, dict):
                for span in as_list(scope_spans.get("spans")):
                    yield attributes, span


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one (a field of the wrong type)."""
    return value if isinstance(value, list) else []


class SpanHead(NamedTuple):
    """A span's ids (hex) and times (ns since the epoch)."""

    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    start: int
    end: int


def span_head(span: Any) -> SpanHead | str:
    """The ids and times of a span, or what makes it malformed."""
    if not isinstance(span, dict):
        return "no JSON object"
    trace = _id(_field(span, "traceId", "trace_id"), 16)
    if trace is None:
        return "no valid trace id"
    span_id = _id(_field(span, "spanId", "span_id"), 8)
    if span_id is None:
        return "no valid span id"
    given = _field(span, "parentSpanId", "parent_span_id")
    parent = "" if given in (None, "") else _id(given, 8)
    if parent is None:
        return "a parent span id that is not 8 bytes"
    start = _nanos(_field(span, "startTimeUnixNano", "start_time_unix_nano"))
    end = _nanos(_field(span, "endTimeUnixNano", "end_time_unix_nano"))
    if start is None or end is None:
        return "a start or end time that is no count of nanoseconds"
    return SpanHead(trace, span_id, parent, start, end)


def _id(value: Any, size: int) -> str | None:
    """A trace or span id in hex (OTLP/JSON's form) or base64 (protobuf's JSON mapping), as
    hex; None unless it is ``size`` bytes, not all zero."""
    if not isinstance(value, str) or not value:
        return None
    raw: bytes | None = None
    if len(value) == 2 * size:
        with contextlib.suppress(ValueError):
            raw = bytes.fromhex(value)
    if raw is None:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
    return raw.hex() if len(raw) == size and any(raw) else None


def _nanos(value: Any) -> int | None:
    """A time in nanoseconds (a string or a number in the file); None when it is neither."""
    if value is None:
        return 0  # protobuf's JSON leaves a zero out
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _UINT64:
        return value
    return None


def _value(any_value: Any, known: set[str] | None, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as plain data (None for one that is empty or malformed); the
    keys of a key-value list as ``key_values`` keeps them."""
    if not isinstance(any_value, dict) or depth > _MAX_DEPTH:
        return None
    for name in ("stringValue", "string_value", "boolValue", "bool_value"):
        if name in any_value:
            value = any_value[name]
            return value if isinstance(value, str | bool) else None
    for name in ("intValue", "int_value"):
        if name in any_value:
            try:
                number = int(any_value[name])
            except (TypeError, ValueError):
                return None
            return number if _INT64[0] <= number < _INT64[1] else None
    for name in ("doubleValue", "double_value"):
        if name in any_value:
            try:
                real = float(any_value[name])  # "NaN" and "Infinity" come as strings
            except (TypeError, ValueError, OverflowError):
                return None
            return real if math.isfinite(real) else None
    for name in ("arrayValue", "array_value"):
        if isinstance(any_value.get(name), dict):
            return [_value(v, known, depth + 1) for v in as_list(any_value[name].get("values"))]
    for name in ("kvlistValue", "kvlist_value"):
        if isinstance(any_value.get(name), dict):
            return key_values(any_value[name].get("values"), known, depth + 1)
    for name in ("bytesValue", "bytes_value"):
        if isinstance(any_value.get(name), str):
            return any_value[name]  # base64, as OTLP/JSON writes it
    return None


def key_values(pairs: Any, known: set[str] | None, depth: int = 0) -> dict[str, Any]:
    """A list of OTLP ``KeyValue`` as a dict, without the keys that name a credential (their
    values join ``known``, to be removed wherever else they occur)."""
    out: dict[str, Any] = {}
    for pair in as_list(pairs):
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            continue
        key, value = pair["key"], _value(pair.get("value"), known, depth)
        credential = next((part for part in key.split(".") if is_credential_name(part)), None)
        if credential is not None:
            scrub_value({credential: value}, known)  # remembers the value in `known`
        elif value is not None:
            out[key] = value
    return out
