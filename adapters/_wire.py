"""What agentlog knows of each provider's wire format: the endpoints it records, read from
the JSON bodies that pass through the HTTP transport.

A ``WireRoute`` names one endpoint (``POST …/chat/completions``): the provider id of its
cache-key rules, how a response body gives usage and the serving fingerprint (``Meta``),
how a server-sent-event stream folds into the body a non-streamed call returns
(``Accumulator``), and how a stored body is served again as such a stream (``sse``). A
stream and a plain call of one request share one cache entry: the accumulated body.

Only public wire formats are read here (the providers' HTTP APIs), never an SDK's types,
so a route the SDKs add later (``parse()``, raw and streaming responses, a new helper) is
recorded without agentlog knowing it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Accumulator", "Meta", "WireRoute", "find_route", "sse_bytes", "sse_events"]

@dataclass
class Meta:
    """What a response body says about the call (for the record and the span)."""

    input_tokens: int = 0
    output_tokens: int = 0
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: Sequence[str] = ()
    fingerprint: str | None = None


class Accumulator:
    """Collects the items of a stream into the body a non-streamed call would return."""

    def add(self, item: dict[str, Any]) -> None:
        raise NotImplementedError

    def body(self) -> dict[str, Any]:
        raise NotImplementedError


def sse_bytes(events: list[tuple[str | None, dict[str, Any]]], done: bool) -> bytes:
    """Server-sent-event bytes of ``(event name or None, data)`` pairs."""
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()

# The events after which a stream has nothing more to say: OpenAI's ``data: [DONE]``, the
# Responses API's terminal events, Anthropic's ``message_stop``. An SDK stops reading there
# and closes the response, which is its end, not an early close.
_TERMINAL_TYPES = frozenset({"message_stop", "response.completed", "response.incomplete",
                             "response.failed"})
DONE: tuple[str | None, dict[str, Any]] = ("[DONE]", {})


def sse_events(data: bytes) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """The ``(event name, JSON data)`` pairs of complete server-sent events in ``data``
    (data that is not a JSON object is skipped; ``[DONE]`` is the pair ``DONE``)."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        name: str | None = None
        lines: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                lines.append(line[5:].removeprefix(" "))
        payload = "\n".join(lines)
        if payload == "[DONE]":
            yield DONE
            continue
        if not payload:
            continue
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield name, event


class SSEReader:
    """Splits a byte stream into complete events as chunks arrive (a chunk may end inside
    an event: the rest waits for the next one)."""

    def __init__(self, accumulator: Accumulator) -> None:
        self.accumulator = accumulator
        self._buffer = b""
        self.events = 0
        self.complete = False  # the stream's terminal event was read

    def feed(self, chunk: bytes) -> None:
        data = (self._buffer + chunk).replace(b"\r\n", b"\n")
        cut = data.rfind(b"\n\n")
        if cut < 0:
            self._buffer = data
            return
        self._buffer = data[cut + 2:]
        for name, event in sse_events(data[:cut + 2]):
            if name == DONE[0] or event.get("type") in _TERMINAL_TYPES:
                self.complete = True
            if name != DONE[0]:
                self.accumulator.add(event)
                self.events += 1

    def body(self) -> dict[str, Any]:
        if self._buffer.strip():  # a last event without its blank line (a stream cut short)
            self.feed(b"\n\n")
        return self.accumulator.body()


# --------------------------------------------------------------------------- chat


def _chat_meta(body: dict[str, Any]) -> Meta:
    usage = body.get("usage") or {}
    return Meta(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        response_model=body.get("model"),
        response_id=body.get("id"),
        finish_reasons=[str(c.get("finish_reason")) for c in body.get("choices") or ()
                        if c.get("finish_reason") is not None],
        fingerprint=body.get("system_fingerprint"),
    )


def _merge(into: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Merge a streamed delta: strings concatenate, indexed lists merge by ``index``."""
    for key, value in delta.items():
        if value is None:
            into.setdefault(key, None)
            continue
        old = into.get(key)
        if isinstance(value, str) and isinstance(old, str) and key not in ("role", "type", "id"):
            into[key] = old + value
        elif isinstance(value, Mapping):
            if not isinstance(old, dict):
                old = into[key] = {}
            _merge(old, value)
        elif isinstance(value, list):
            if not isinstance(old, list):
                old = into[key] = []
            for item in value:
                if isinstance(item, Mapping) and "index" in item:
                    slot = next((x for x in old if isinstance(x, dict)
                                 and x.get("index") == item["index"]), None)
                    if slot is None:
                        old.append(slot := {})
                    _merge(slot, item)
                else:
                    old.append(item)
        else:
            into[key] = value


class _ChoicesAccumulator(Accumulator):
    """Chunks carrying ``choices`` by ``index`` (Chat, legacy Completions): the head fields
    kept, each choice's content, logprobs and finish reason merged."""

    HEAD: tuple[str, ...] = ("id", "created", "model", "system_fingerprint", "service_tier",
                             "usage")

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}

    def _slot(self, index: int) -> dict[str, Any]:
        raise NotImplementedError

    def _content(self, slot: dict[str, Any], choice: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def add(self, item: dict[str, Any]) -> None:
        for name in self.HEAD:
            if item.get(name) is not None:
                self.head[name] = item[name]
        for choice in item.get("choices") or ():
            index = int(choice.get("index", 0))
            slot = self.choices.get(index)
            if slot is None:
                slot = self.choices[index] = self._slot(index)
            self._content(slot, choice)
            if choice.get("logprobs") is not None:
                if slot["logprobs"] is None:
                    slot["logprobs"] = {}
                _merge(slot["logprobs"], choice["logprobs"])
            if choice.get("finish_reason") is not None:
                slot["finish_reason"] = choice["finish_reason"]


class _ChatAccumulator(_ChoicesAccumulator):
    def _slot(self, index: int) -> dict[str, Any]:
        return {"index": index, "message": {}, "logprobs": None, "finish_reason": None}

    def _content(self, slot: dict[str, Any], choice: Mapping[str, Any]) -> None:
        _merge(slot["message"], choice.get("delta") or {})

    def body(self) -> dict[str, Any]:
        choices = []
        for index in sorted(self.choices):
            choice = self.choices[index]
            message = choice["message"]
            message.setdefault("role", "assistant")
            message.setdefault("content", None)
            for call in message.get("tool_calls") or ():
                call.pop("index", None)
            choices.append(choice)
        return {"object": "chat.completion", **self.head, "choices": choices}


def _chat_chunks(body: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    head = {k: body[k] for k in ("id", "created", "model", "system_fingerprint", "service_tier")
            if body.get(k) is not None}
    chunks: list[tuple[str | None, dict[str, Any]]] = []
    for choice in body.get("choices") or ():
        delta = dict(choice.get("message") or {})
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call}
                                   for i, call in enumerate(delta["tool_calls"])]
        chunks.append((None, {**head, "object": "chat.completion.chunk", "choices": [{
            "index": choice.get("index", 0), "delta": delta,
            "logprobs": choice.get("logprobs"), "finish_reason": choice.get("finish_reason"),
        }]}))
    if body.get("usage") is not None:
        chunks.append((None, {**head, "object": "chat.completion.chunk", "choices": [],
                              "usage": body["usage"]}))
    return chunks


# --------------------------------------------------------------------------- responses


def _in_out_meta(body: dict[str, Any], reason: str) -> Meta:
    """Meta of a body with ``usage.input_tokens``/``output_tokens`` (Responses, Messages)
    and one finish reason in its field ``reason``."""
    usage = body.get("usage") or {}
    finish = body.get(reason)
    return Meta(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        response_model=body.get("model"),
        response_id=body.get("id"),
        finish_reasons=[str(finish)] if finish is not None else [],
    )


def _responses_meta(body: dict[str, Any]) -> Meta:
    return _in_out_meta(body, "status")


class _ResponsesAccumulator(Accumulator):
    """The final ``response`` of a Responses stream (its terminal event carries it whole)."""

    def __init__(self) -> None:
        self.response: dict[str, Any] | None = None
        self.text: dict[tuple[int, int], str] = {}

    def add(self, item: dict[str, Any]) -> None:
        event = item
        if isinstance(event.get("response"), Mapping):
            self.response = dict(event["response"])
        elif event.get("type") == "response.output_text.delta":
            where = (int(event.get("output_index", 0)), int(event.get("content_index", 0)))
            self.text[where] = self.text.get(where, "") + str(event.get("delta", ""))

    def body(self) -> dict[str, Any]:
        body = dict(self.response or {"object": "response", "output": []})
        if body.get("status") not in ("completed", "incomplete", "failed") and self.text:
            body["partial_text"] = ["".join(self.text[k]) for k in sorted(self.text)]
        return body


def _responses_events(body: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    seq = iter(range(1 << 30))
    start = {**body, "status": "in_progress", "output": []}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": start,
                              "sequence_number": next(seq)})]
    for o, item in enumerate(body.get("output") or ()):
        for c, part in enumerate(item.get("content") or ()):
            if part.get("type") != "output_text":
                continue
            common = {"item_id": item.get("id", ""), "output_index": o, "content_index": c}
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", **common, "delta": part.get("text", ""),
                "logprobs": part.get("logprobs") or [], "sequence_number": next(seq)}))
            events.append(("response.output_text.done", {
                "type": "response.output_text.done", **common, "text": part.get("text", ""),
                "logprobs": part.get("logprobs") or [], "sequence_number": next(seq)}))
    final = body.get("status") if body.get("status") in ("completed", "incomplete",
                                                          "failed") else "completed"
    events.append((f"response.{final}", {"type": f"response.{final}", "response": body,
                                         "sequence_number": next(seq)}))
    return events


# --------------------------------------------------------------------------- messages


def _messages_meta(body: dict[str, Any]) -> Meta:
    return _in_out_meta(body, "stop_reason")


class _MessageAccumulator(Accumulator):
    """A Messages stream's events folded into the Message a non-streamed call returns."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        self.json: dict[int, str] = {}

    def add(self, item: dict[str, Any]) -> None:
        event = item
        kind = event.get("type")
        if kind == "message_start":
            self.message = {**event.get("message", {}), "content": []}
        elif kind == "content_block_start":
            self.message["content"].append(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            index = int(event.get("index", 0))
            blocks = self.message["content"]
            if not 0 <= index < len(blocks):
                return
            block, delta = blocks[index], event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                self.json[index] = self.json.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature")
        elif kind == "content_block_stop":
            index = int(event.get("index", 0))
            if index in self.json and 0 <= index < len(self.message["content"]):
                try:
                    self.message["content"][index]["input"] = json.loads(self.json[index] or "{}")
                except ValueError:
                    self.message["content"][index]["input"] = self.json[index]
        elif kind == "message_delta":
            self.message.update({k: v for k, v in (event.get("delta") or {}).items()})
            usage = dict(self.message.get("usage") or {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            self.message["usage"] = usage

    def body(self) -> dict[str, Any]:
        return self.message


def _message_events(body: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(body.get("content") or ()):
        btype = block.get("type")
        if btype == "text":
            first, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
        elif btype == "tool_use":
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input"))}
        elif btype == "thinking":
            first = {**block, "thinking": ""}
            delta = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        else:
            first, delta = block, None
        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": first}))
        if delta is not None:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": body.get("stop_reason"),
                  "stop_sequence": body.get("stop_sequence")},
        "usage": {"output_tokens": (body.get("usage") or {}).get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --------------------------------------------------------------------------- completions


class _CompletionAccumulator(_ChoicesAccumulator):
    """A legacy Completions stream: each choice's ``text`` concatenated."""

    HEAD = ("id", "created", "model", "system_fingerprint", "usage")

    def _slot(self, index: int) -> dict[str, Any]:
        return {"index": index, "text": "", "logprobs": None, "finish_reason": None}

    def _content(self, slot: dict[str, Any], choice: Mapping[str, Any]) -> None:
        slot["text"] += str(choice.get("text") or "")

    def body(self) -> dict[str, Any]:
        return {"object": "text_completion", **self.head,
                "choices": [self.choices[i] for i in sorted(self.choices)]}


def _completion_chunks(body: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    head = {k: body[k] for k in ("id", "created", "model", "system_fingerprint")
            if body.get(k) is not None}
    chunks: list[tuple[str | None, dict[str, Any]]] = [
        (None, {**head, "object": "text_completion", "choices": [choice]})
        for choice in body.get("choices") or ()]
    if body.get("usage") is not None:
        chunks.append((None, {**head, "object": "text_completion", "choices": [],
                              "usage": body["usage"]}))
    return chunks


def _embeddings_meta(body: dict[str, Any]) -> Meta:
    usage = body.get("usage") or {}
    return Meta(input_tokens=int(usage.get("prompt_tokens") or 0),
                response_model=body.get("model"))


class _NoStream(Accumulator):
    """An endpoint without a stream form: the last event is the body."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def add(self, item: dict[str, Any]) -> None:
        self.last = item

    def body(self) -> dict[str, Any]:
        return self.last


# --------------------------------------------------------------------------- routes


@dataclass(frozen=True)
class WireRoute:
    """One provider endpoint that agentlog records and serves.

    Attributes:
        provider: the provider id of its cache-key rules (``"openai.chat"``).
        operation: the GenAI operation name (``"chat"``, ``"embeddings"``).
        path: the path the endpoint ends with (``"/chat/completions"``).
        meta: usage, model, id, finish reasons and fingerprint of a response body.
        accumulator: a fresh accumulator of the endpoint's stream events.
        events: a stored body as the stream events a live stream would carry.
        done: whether the replayed stream ends with ``data: [DONE]``.
    """

    provider: str
    operation: str
    path: str
    meta: Callable[[dict[str, Any]], Meta]
    accumulator: Callable[[], Accumulator]
    events: Callable[[dict[str, Any]], list[tuple[str | None, dict[str, Any]]]]
    done: bool = False

    def sse(self, body: dict[str, Any]) -> bytes:
        """``body`` served again as this endpoint's stream."""
        return sse_bytes(self.events(body), self.done)


# Longest path first: "/chat/completions" before "/completions".
ROUTES: tuple[WireRoute, ...] = (
    WireRoute("openai.chat", "chat", "/chat/completions", _chat_meta, _ChatAccumulator,
              _chat_chunks, done=True),
    WireRoute("openai.responses", "chat", "/responses", _responses_meta,
              _ResponsesAccumulator, _responses_events),
    WireRoute("openai.completions", "text_completion", "/completions", _chat_meta,
              _CompletionAccumulator, _completion_chunks, done=True),
    WireRoute("openai.embeddings", "embeddings", "/embeddings", _embeddings_meta, _NoStream,
              lambda body: [(None, body)]),
    WireRoute("anthropic.messages", "chat", "/v1/messages", _messages_meta,
              _MessageAccumulator, _message_events),
)


def find_route(method: str, path: str) -> WireRoute | None:
    """The route of a request (``POST`` and a path ending with a route's), or None."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    for route in ROUTES:
        if path.endswith(route.path):
            return route
    return None
