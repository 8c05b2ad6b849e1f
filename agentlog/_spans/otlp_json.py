"""OTLP/JSON for ``agentlog.export``: one ``ExportTraceServiceRequest``, written batch by batch.

``otlp_json(spans)`` is the request as a dict (what the OTLP exporter sends, in the
protobuf JSON mapping, trace and span ids in hex as OTLP/JSON writes them): the
reference. ``OtlpJsonWriter`` writes the same document for spans handed over in batches,
holding one batch at a time: the text is exactly ``json.dumps(otlp_json(all_spans))``'s
(compact separators), spans grouped by resource in order of first appearance, as the
OTLP encoder groups them. The spans of the first resource go straight to the output;
those of any other resource (a second system in the same export) wait in a temporary
file beside it until the end. A span is encoded straight from its fields, without the
protobuf message and its conversion to a dict (two thirds of the time of an export to
OTLP/JSON); what that direct encoding does not cover (links, a trace state, attribute
values other than scalars and flat sequences of them) goes through the reference.
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import tempfile
from array import array
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from agentlog._errors import MissingDependencyError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OtlpJsonWriter", "need_otlp", "otlp_json"]

_SEPARATORS = (",", ":")
_IDS = ("traceId", "spanId", "parentSpanId")


def need_otlp() -> None:
    """Raise ``MissingDependencyError`` (with the install line) without the OTLP exporter."""
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "exporting to OTLP needs the OTLP/HTTP exporter, which is not installed; "
            "install it with: pip install 'agentlog[otlp]'"
        ) from None


def _hex_ids(span: dict[str, Any]) -> None:
    # OTLP/JSON writes trace and span ids as hex, not the base64 of protobuf's JSON. Only a
    # span and its links hold ids (attribute and event keys are "key"/"value" pairs).
    for holder in (span, *span.get("links", ())):
        for key in _IDS:
            value = holder.get(key)
            if isinstance(value, str):
                holder[key] = base64.b64decode(value).hex()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceRequest`` of ``spans`` (ids in hex)."""
    need_otlp()
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    document: dict[str, Any] = MessageToDict(encode_spans(spans))
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
    return document


class _Unusual(Exception):
    """A span the direct encoding does not cover: ``otlp_json`` encodes it instead."""


_INT64 = (-(1 << 63), 1 << 63)
_KINDS: dict[Any, str] = {}  # SpanKind -> its OTLP enum name, filled on first use
_CODES = {0: None, 1: "STATUS_CODE_OK", 2: "STATUS_CODE_ERROR"}


def _text(value: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")  # the encoder drops a value protobuf cannot hold
        except UnicodeEncodeError:
            raise _Unusual from None
    return value


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": _text(value)}
    if isinstance(value, int):
        if not _INT64[0] <= value < _INT64[1]:
            raise _Unusual
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else
                ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, tuple | list):
        values = [_value(v) for v in value]
        return {"arrayValue": {"values": values} if values else {}}
    raise _Unusual  # None, bytes, a mapping: rare enough for the reference encoding


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    out = []
    for key, value in attributes.items():
        if not isinstance(key, str) or not key:
            raise _Unusual
        out.append({"key": _text(key), "value": _value(value)})
    return out


def _span_dict(span: ReadableSpan) -> dict[str, Any]:
    """``otlp_json``'s dict of one span, without the protobuf round trip (a third of the
    time); ``_Unusual`` for what it does not cover (links, trace state, dropped counts,
    attribute values other than scalars and flat sequences)."""
    if span.links or span.dropped_attributes or span.dropped_events or span.dropped_links:
        raise _Unusual
    context, parent = span.context, span.parent
    if context is None or context.trace_state:
        raise _Unusual
    out: dict[str, Any] = {"traceId": f"{context.trace_id:032x}",
                           "spanId": f"{context.span_id:016x}"}
    if parent is not None:
        out["parentSpanId"] = f"{parent.span_id:016x}"
    if span.name:
        out["name"] = _text(span.name)
    if not _KINDS:
        from opentelemetry.trace import SpanKind

        _KINDS.update({k: f"SPAN_KIND_{k.name}" for k in SpanKind})
    out["kind"] = _KINDS[span.kind]
    if span.start_time:
        out["startTimeUnixNano"] = str(span.start_time)
    if span.end_time:
        out["endTimeUnixNano"] = str(span.end_time)
    if span.attributes:
        out["attributes"] = _attributes(span.attributes)
    if span.events:
        events = []
        for event in span.events:
            if event.dropped_attributes:
                raise _Unusual
            encoded: dict[str, Any] = {}
            if event.timestamp:
                encoded["timeUnixNano"] = str(event.timestamp)
            if event.name:
                encoded["name"] = _text(event.name)
            if event.attributes:
                encoded["attributes"] = _attributes(event.attributes)
            events.append(encoded)
        out["events"] = events
    status: dict[str, Any] = {}
    if span.status.description:
        status["message"] = _text(span.status.description)
    code = _CODES[span.status.status_code.value]
    if code is not None:
        status["code"] = code
    out["status"] = status
    out["flags"] = 0x300 if parent is not None and parent.is_remote else 0x100
    return out


def _only_span(document: dict[str, Any]) -> dict[str, Any]:
    (resource_spans,) = document["resourceSpans"]
    (scope_spans,) = resource_spans["scopeSpans"]
    (span,) = scope_spans["spans"]
    return span  # type: ignore[no-any-return]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=_SEPARATORS)


def _around(obj: dict[str, Any], key: str, inner: tuple[str, str]) -> tuple[str, str]:
    """The JSON text of ``obj`` before and after the value of ``key``, that value being
    ``inner[0] … inner[1]``: ``_dumps(obj)`` cut open where the spans go."""
    items = list(obj.items())
    at = next(i for i, (k, _) in enumerate(items) if k == key)
    before = "".join(f"{_dumps(k)}:{_dumps(v)}," for k, v in items[:at])
    after = "".join(f",{_dumps(k)}:{_dumps(v)}" for k, v in items[at + 1:])
    return "{" + before + _dumps(key) + ":" + inner[0], inner[1] + after + "}"


class _Group:
    """One ``resourceSpans`` entry: its text around the spans, and where its spans wait."""

    __slots__ = ("chunks", "head", "tail")

    def __init__(self, head: str, tail: str) -> None:
        self.head = head
        self.tail = tail
        self.chunks = array("q")  # offset, length, offset, length... in the spool


class OtlpJsonWriter:
    """Writes one OTLP/JSON request to ``out`` (a binary file) from batches of spans.

    Call ``write(batch)`` for each batch, then ``finish()`` once; ``close()`` drops the
    temporary files (``finish`` does too). Memory holds one batch, plus 16 bytes per
    batch of a resource other than the first. Past ``MAX_GROUPS`` distinct resources (a
    file whose every run names its own system), the spans of each further resource are
    written as entries of their own, batch by batch, rather than grouped.
    """

    MAX_GROUPS = 64

    def __init__(self, out: IO[bytes], *, spool_dir: str | None = None) -> None:
        self._out = out
        self._spool_dir = spool_dir
        self._spool: IO[bytes] | None = None
        self._loose: IO[bytes] | None = None  # whole entries past MAX_GROUPS
        self._groups: dict[tuple[str, str], _Group] = {}
        self._first: _Group | None = None
        self._frames: dict[tuple[int, int], tuple[tuple[str, str], Any, Any]] = {}

    def _temporary(self) -> IO[bytes]:
        return tempfile.TemporaryFile(prefix=".agentlog-export-", dir=self._spool_dir)

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        """Add a batch of spans to the request."""
        batch: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for span in spans:
            try:
                encoded = _span_dict(span)
            except _Unusual:
                encoded = _only_span(otlp_json([span]))
            batch.setdefault(self._frame(span), []).append(encoded)
        for (head, tail), dicts in batch.items():
            self._add(head, tail, _dumps(dicts)[1:-1].encode("ascii"))

    def _frame(self, span: ReadableSpan) -> tuple[str, str]:
        """The text of the span's ``resourceSpans`` entry before and after its spans."""
        # Spans share a few Resource and scope objects: their text is computed once each
        # (the objects are held, so that their ids stay theirs).
        key = (id(span.resource), id(span.instrumentation_scope))
        known = self._frames.get(key)
        if known is not None:
            return known[0]
        if len(self._frames) >= self.MAX_GROUPS:
            self._frames.clear()
        resource_spans = otlp_json([span])["resourceSpans"][0]
        (scope_spans,) = resource_spans["scopeSpans"]
        scope_head, scope_tail = _around(scope_spans, "spans", ("[", "]"))
        frame = _around(resource_spans, "scopeSpans", ("[" + scope_head, scope_tail + "]"))
        self._frames[key] = (frame, span.resource, span.instrumentation_scope)
        return frame

    def _add(self, head: str, tail: str, text: bytes) -> None:
        group = self._groups.get((head, tail))
        if group is None:
            if len(self._groups) >= self.MAX_GROUPS:
                if self._loose is None:
                    self._loose = self._temporary()
                self._loose.write(b"," + head.encode("ascii") + text + tail.encode("ascii"))
                return
            group = self._groups[(head, tail)] = _Group(head, tail)
            if self._first is None:
                self._first = group
                self._out.write(b'{"resourceSpans":[' + head.encode("ascii") + text)
                return
        elif group is self._first:
            self._out.write(b"," + text)
            return
        if self._spool is None:
            self._spool = self._temporary()
        group.chunks.extend((self._spool.tell(), len(text)))
        self._spool.write(text)

    def finish(self) -> None:
        """Write the end of the request (``{}`` when no span was written)."""
        first = self._first
        if first is None:
            self._out.write(b"{}")
            return
        self._out.write(first.tail.encode("ascii"))
        for group in self._groups.values():
            if group is first:
                continue
            assert self._spool is not None  # a second group spooled its spans
            self._out.write(b"," + group.head.encode("ascii"))
            for i in range(0, len(group.chunks), 2):
                self._spool.seek(group.chunks[i])
                self._out.write(b"," if i else b"")
                self._out.write(self._spool.read(group.chunks[i + 1]))
            self._out.write(group.tail.encode("ascii"))
        if self._loose is not None:
            self._loose.seek(0)
            shutil.copyfileobj(self._loose, self._out)
        self._out.write(b"]}")
        self.close()

    def close(self) -> None:
        for spool in (self._spool, self._loose):
            if spool is not None:
                spool.close()
        self._spool = self._loose = None
