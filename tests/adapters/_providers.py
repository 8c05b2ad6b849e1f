"""Fake openai/anthropic servers for ``httpx2.MockTransport``: the providers' real body shapes.

The bodies follow the providers' API references (Chat Completions with ``logprobs`` and
``top_logprobs``, the Responses API with ``include=["message.output_text.logprobs"]``,
Anthropic Messages) and their streaming formats (SSE ``data:`` chunks ending in ``[DONE]``
for Chat, named ``event:`` lines for Responses and Messages), including the error bodies of
401 (echoing the key, as a careless proxy would), 429 and 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx2

CANARY = "sk-canary-0d5f3c9e1b7a4e2f"

# An option-token distribution at the answer position: B is likely, A and C less, D unseen.
TOP = [("B", -0.25), ("A", -2.0), (" B", -3.5), ("C", -4.0), ("Hmm", -4.5)]


def _lp(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def chat_body(model: str = "gpt-4o-mini", content: str = "B", n: int = 1) -> dict[str, Any]:
    logprobs = {"content": [
        {**_lp(" answer", -0.01), "top_logprobs": [_lp(" answer", -0.01), _lp(":", -5.0)]},
        {**_lp("B", -0.25), "top_logprobs": [_lp(t, lp) for t, lp in TOP]},
    ], "refusal": None}
    return {
        "id": "chatcmpl-AbC123", "object": "chat.completion", "created": 1764547200,
        "model": f"{model}-2024-07-18", "system_fingerprint": "fp_44709d6fcb",
        "service_tier": "default",
        "choices": [{"index": i, "message": {"role": "assistant", "content": f" answer{content}",
                                             "refusal": None, "annotations": []},
                     "logprobs": logprobs, "finish_reason": "stop"} for i in range(n)],
        "usage": {"prompt_tokens": 31, "completion_tokens": 2, "total_tokens": 33,
                  "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0,
                                                "rejected_prediction_tokens": 0}},
    }


def chat_chunks(model: str = "gpt-4o-mini") -> list[dict[str, Any]]:
    body = chat_body(model)
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
            "model": body["model"], "system_fingerprint": body["system_fingerprint"],
            "service_tier": "default"}
    tokens = body["choices"][0]["logprobs"]["content"]
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "",
                                                          "refusal": None},
                                    "logprobs": None, "finish_reason": None}], "usage": None}]
    for tok in tokens:
        chunks.append({**head, "choices": [{"index": 0, "delta": {"content": tok["token"]},
                                            "logprobs": {"content": [tok], "refusal": None},
                                            "finish_reason": None}], "usage": None})
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": "stop"}], "usage": None})
    chunks.append({**head, "choices": [], "usage": body["usage"]})
    return chunks


def responses_body(model: str = "gpt-4.1-mini") -> dict[str, Any]:
    logprobs = [
        {**_lp(" answer", -0.01), "top_logprobs": [_lp(" answer", -0.01)]},
        {**_lp("B", -0.25), "top_logprobs": [_lp(t, lp) for t, lp in TOP]},
    ]
    return {
        "id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1764547200,
        "status": "completed", "error": None, "incomplete_details": None,
        "instructions": None, "max_output_tokens": None, "model": f"{model}-2025-04-14",
        "output": [{"id": "msg_67ccd2bf17f0", "type": "message", "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": " answerB", "annotations": [],
                                 "logprobs": logprobs}]}],
        "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
        "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 38},
        "user": None, "metadata": {},
    }


def responses_events(model: str = "gpt-4.1-mini") -> list[dict[str, Any]]:
    body = responses_body(model)
    item = body["output"][0]
    part = item["content"][0]
    start = {**body, "status": "in_progress", "output": [], "usage": None}
    seq = iter(range(100))
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start, "sequence_number": next(seq)},
        {"type": "response.in_progress", "response": start, "sequence_number": next(seq)},
        {"type": "response.output_item.added", "output_index": 0, "sequence_number": next(seq),
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
         "content_index": 0, "sequence_number": next(seq),
         "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}},
    ]
    for tok in part["logprobs"]:
        events.append({"type": "response.output_text.delta", "item_id": item["id"],
                       "output_index": 0, "content_index": 0, "delta": tok["token"],
                       "logprobs": [tok], "sequence_number": next(seq)})
    events += [
        {"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
         "content_index": 0, "text": part["text"], "logprobs": part["logprobs"],
         "sequence_number": next(seq)},
        {"type": "response.content_part.done", "item_id": item["id"], "output_index": 0,
         "content_index": 0, "part": part, "sequence_number": next(seq)},
        {"type": "response.output_item.done", "output_index": 0, "item": item,
         "sequence_number": next(seq)},
        {"type": "response.completed", "response": body, "sequence_number": next(seq)},
    ]
    return events


def message_body(model: str = "claude-opus-4-7") -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": model, "content": [{"type": "text", "text": "B"}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


def message_events(model: str = "claude-opus-4-7") -> list[dict[str, Any]]:
    body = message_body(model)
    start = {**body, "content": [], "stop_reason": None,
             "usage": {**body["usage"], "output_tokens": 1}}
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "B"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]


def _sse(events: list[dict[str, Any]], *, named: bool, done: bool) -> bytes:
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def _openai_error(status: int, key: str) -> dict[str, Any]:
    if status == 401:
        return {"error": {"message": f"Incorrect API key provided: {key}. You can find your "
                          "API key at https://platform.openai.com/account/api-keys.",
                          "type": "invalid_request_error", "param": None,
                          "code": "invalid_api_key"}}
    if status == 429:
        return {"error": {"message": "Rate limit reached for gpt-4o-mini in organization "
                          "org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.",
                          "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    return {"error": {"message": "The server had an error while processing your request. "
                      "Sorry about that!", "type": "server_error", "param": None,
                      "code": None}}


def _anthropic_error(status: int, key: str) -> dict[str, Any]:
    kind, message = {
        401: ("authentication_error", f"invalid x-api-key: {key}"),
        429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute "
                                  "rate limit"),
    }.get(status, ("api_error", "Internal server error"))
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}


ANSWER_JSON = '{"answer": "B", "confidence": 0.75}'


def _with_text(body: dict[str, Any], text: str) -> dict[str, Any]:
    """``body`` answering ``text`` (e.g. the JSON a structured-output request asks for)."""
    for choice in body.get("choices") or ():
        choice["message"]["content"] = text
    for item in body.get("output") or ():
        for part in item.get("content") or ():
            part["text"] = text
    for block in body.get("content") or ():
        if block.get("type") == "text":
            block["text"] = text
    return body


def _text_events(events: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """A Messages or Responses event stream whose text is ``text`` (one delta)."""
    out: list[dict[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "content_block_delta":
            event = {**event, "delta": {"type": "text_delta", "text": text}}
        elif kind == "response.output_text.delta":
            if out and out[-1]["type"] == kind:
                continue
            event = {**event, "delta": text, "logprobs": []}
        elif kind == "response.output_text.done":
            event = {**event, "text": text, "logprobs": []}
        elif kind in ("response.content_part.done", "response.output_item.done",
                      "response.completed"):
            event = json.loads(json.dumps(event))
            _with_text(event.get("response") or {"output": [event.get("item", {})]}, text)
            if "part" in event:
                event["part"]["text"] = text
        out.append(event)
    return out


class _Chunks(httpx2.SyncByteStream, httpx2.AsyncByteStream):  # type: ignore[misc]
    """A body delivered in small chunks as it is read (a real transport's, not read ahead)."""

    def __init__(self, data: bytes, size: int = 64) -> None:
        self.parts = [data[i:i + size] for i in range(0, len(data), size)]

    def __iter__(self) -> Any:
        yield from self.parts

    async def __aiter__(self) -> Any:
        for part in self.parts:
            yield part


class FakeProvider:
    """A MockTransport handler serving openai and anthropic endpoints; counts requests.

    ``fail`` maps a request number (1-based) to an HTTP status to answer with instead.
    ``text`` replaces the answer's text (chat, Responses and Messages, streamed or not);
    ``chunked`` delivers bodies in 64-byte chunks as they are read instead of whole.
    ``echo`` names request headers whose values a 401 quotes instead of the key (a careless
    proxy's ``Incorrect API key provided: hdr-..., Basic cHJv...``).
    """

    def __init__(self, fail: dict[int, int] | None = None,
                 on_request: Callable[[httpx2.Request], None] | None = None, *,
                 text: str | None = None, chunked: bool = False,
                 echo: tuple[str, ...] = ()) -> None:
        self.text = text
        self.echo = echo
        self.chunked = chunked
        self.fail = dict(fail or {})
        self.requests: list[httpx2.Request] = []
        self.bodies: list[dict[str, Any]] = []
        self.on_request = on_request
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return len(self.requests)

    def _key(self, request: httpx2.Request) -> str:
        if self.echo:
            return ", ".join(request.headers.get(name, "") for name in self.echo)
        auth = request.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") or request.headers.get("x-api-key", "")

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        response = self._answer(request)
        if not self.chunked:
            return response
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_Chunks(response.content))

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
        body = json.loads(request.content or b"{}")
        self.bodies.append(body)
        if self.on_request is not None:
            self.on_request(request)
        path = request.url.path
        anthropic = path.endswith("/v1/messages")
        status = self.fail.get(number)
        if status is not None:
            error = (_anthropic_error if anthropic else _openai_error)(status, self._key(request))
            return httpx2.Response(status, json=error)
        stream = bool(body.get("stream"))
        model = body.get("model", "m")
        sse = {"content-type": "text/event-stream"}
        text = self.text
        if path.endswith("/chat/completions"):
            if stream:
                chunks = chat_chunks(model)
                if text is not None:
                    chunks = [c for c in chunks if not any(
                        (ch.get("delta") or {}).get("content") for ch in c["choices"])]
                    chunks.insert(1, {**chunks[0], "choices": [{
                        "index": 0, "delta": {"content": text}, "logprobs": None,
                        "finish_reason": None}]})
                return httpx2.Response(200, headers=sse,
                                       content=_sse(chunks, named=False, done=True))
            reply = chat_body(model, n=int(body.get("n") or 1))
            return httpx2.Response(200, json=reply if text is None else _with_text(reply, text))
        if path.endswith("/responses"):
            if stream:
                events = responses_events(model)
                return httpx2.Response(200, headers=sse, content=_sse(
                    events if text is None else _text_events(events, text), named=True,
                    done=False))
            reply = responses_body(model)
            return httpx2.Response(200, json=reply if text is None else _with_text(reply, text))
        if anthropic:
            if stream:
                events = message_events(model)
                return httpx2.Response(200, headers=sse, content=_sse(
                    events if text is None else _text_events(events, text), named=True,
                    done=False))
            reply = message_body(model)
            return httpx2.Response(200, json=reply if text is None else _with_text(reply, text))
        return httpx2.Response(404, json={"error": {"message": f"no route {path}"}})


def openai_client(provider: FakeProvider, *, key: str = CANARY, is_async: bool = False) -> Any:
    import openai

    if is_async:
        return openai.AsyncOpenAI(api_key=key, max_retries=0, http_client=httpx2.AsyncClient(
            transport=httpx2.MockTransport(provider)))
    return openai.OpenAI(api_key=key, max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(provider)))


def anthropic_client(provider: FakeProvider, *, key: str = CANARY, is_async: bool = False,
                     **kwargs: Any) -> Any:
    import anthropic

    if is_async:
        return anthropic.AsyncAnthropic(api_key=key, max_retries=0, http_client=(
            httpx2.AsyncClient(transport=httpx2.MockTransport(provider))), **kwargs)
    return anthropic.Anthropic(api_key=key, max_retries=0, http_client=httpx2.Client(
        transport=httpx2.MockTransport(provider)), **kwargs)

