"""Record and cache the calls of an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client.

``wrap(client)`` returns the same client with ``chat.completions.create`` and
``responses.create`` recording every call as an ``LLMCall`` in the current window (request
without credentials, response, usage, latency, logprobs, ``system_fingerprint``), counted
into the window and emitted as a CLIENT span ``chat {model}``. Streams are passed through
unchanged and recorded when they end, fail, or are closed or dropped early.

The SDK's other routes to a model call are recorded and cached with it (the same key, so
one cache entry serves them all), sync and async:

* ``chat.completions.stream()`` and ``responses.stream()`` call the wrapped ``create`` with
  ``stream=True``.
* ``chat.completions.parse()`` and ``responses.parse()``: recorded is the wire body
  (without the SDK's parsed objects); the format class is keyed by its JSON schema; a hit
  is parsed again into the caller's ``response_format`` / ``text_format`` class.
* ``with_raw_response.create`` and ``.parse``: the caller gets the raw response object;
  its parsed body is recorded. With ``stream=True`` its ``.parse()`` is the SDK's
  ``Stream``, recorded as it is consumed. A hit is a raw response built from the stored
  body (status 200, no provider headers).
* ``with_streaming_response.create`` (and chat's ``.parse``): the caller reads the body;
  the call is recorded when the block exits, from the bytes read (a body left unread to
  its end is recorded with what was read, marked ``StreamClosedError``). Under a cache the
  body is read whole when the block is entered; a hit is an ``APIResponse`` serving the
  stored body (``parse()``, ``read()``, ``json()``, ``iter_lines()``, ...).

With ``cache=ModelCache(...)`` every call goes through the exact-input cache. A streamed
call under a cache is fetched whole (the upstream stream is read to its end and stored as
its accumulated response), then served to the caller as a stream of the same type; a hit
replays one chunk per choice carrying the whole content and its logprobs.

Works against any OpenAI-compatible server (vLLM, llama.cpp) through ``base_url``.

Example:
    >>> import httpx2, openai
    >>> from agentlog.adapters import openai as openai_adapter
    >>> def handler(request):
    ...     return httpx2.Response(200, json={
    ...         "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    ...         "choices": [{"index": 0, "finish_reason": "stop",
    ...                      "message": {"role": "assistant", "content": "B"}}],
    ...         "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
    >>> client = openai_adapter.wrap(openai.OpenAI(
    ...     api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(handler))))
    >>> client.chat.completions.create(model="m", messages=[]).choices[0].message.content
    'B'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._recording import (
    Accumulator,
    Endpoint,
    Meta,
    Prices,
    client_config,
    dump_body,
    require,
    sse_bytes,
    sse_stream,
    wrap_copies,
    wrap_method,
)
from ._routes import Reparse, Route, given, raw_body, wrap_parse, wrap_raw, wrap_streaming

__all__ = ["wrap"]

ClientT = TypeVar("ClientT")


def wrap(
    client: ClientT,
    *,
    cache: Any = None,
    channel: str | None = None,
    prices: Prices | None = None,
    capture_content: bool = False,
) -> ClientT:
    """Record (and, with ``cache``, serve from the exact-input cache) every model call.

    Args:
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (or a subclass such as
            ``AzureOpenAI``); it is modified in place and returned.
        cache: an ``agentlog.replay.ModelCache`` every call goes through, the path of its
            SQLite file (opened as ``ModelCache(path)``, read-write), or None.
        channel: the evaluation channel id these calls serve (part of the cache key);
            ``agentlog.adapters.call_options`` overrides it per call.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``; the cost
            of each call is counted into its window.
        capture_content: put message content on the spans (off by default).

    Raises:
        agentlog.MissingDependencyError: the ``openai`` package is not installed.
        TypeError: ``client`` is not an openai client, or ``cache`` is neither a
            ``ModelCache``, a path nor None.
        ValueError: ``cache`` is a path but not of a model cache (a folder, another file).
    """
    sdk = require("openai", "openai")
    config, is_async = client_config(
        client, sdk.OpenAI, sdk.AsyncOpenAI, expected="openai.OpenAI or openai.AsyncOpenAI",
        secret_attrs=("api_key",), cache=cache, channel=channel, prices=prices,
        capture_content=capture_content)
    for where, route, parsed_type in _routes(sdk):
        resource: Any = client
        for name in where.split("."):
            resource = getattr(resource, name)
        wrap_method(resource, "create", route.endpoint, config, client=client,
                    is_async=is_async)
        wrap_parse(resource, route, config, client=client, is_async=is_async,
                   parsed_type=parsed_type)
        wrap_raw(resource, route, sdk, config, client=client, is_async=is_async)
        wrap_streaming(resource, route, sdk, config, client=client, is_async=is_async)
    wrap_copies(client, lambda copy: wrap(copy, cache=config.cache, channel=channel,
                                          prices=prices, capture_content=capture_content))
    return client


# --------------------------------------------------------------------------- parse


# The JSON body of a response, also of a ``with_raw_response`` call's raw response.
_to_body = raw_body(dump_body)


def _unparsed_body(obj: Any) -> dict[str, Any]:
    """The body the server sent for a ``parse()`` call, without the SDK's parsed objects.

    ``message.parsed`` and ``function.parsed_arguments`` (Chat), ``parsed`` of an output
    text and ``parsed_arguments`` of a function call (Responses) are derived from the
    content by the SDK (and are instances of the caller's classes): recorded and cached is
    the wire body, and a hit is parsed again with the caller's format class. They are left
    out of the dump itself (dumping them makes pydantic warn in the host: their declared
    type is a generic placeholder).
    """
    exclude = _PARSED_FIELDS if "choices" in type(obj).model_fields else _PARSED_OUTPUT
    body: dict[str, Any] = obj.model_dump(mode="json", exclude_unset=True, warnings=False,
                                          exclude=exclude)
    return body


_PARSED_FIELDS: Any = {"choices": {"__all__": {"message": {
    "parsed": True, "tool_calls": {"__all__": {"function": {"parsed_arguments"}}}}}}}
_PARSED_OUTPUT: Any = {"output": {"__all__": {"parsed_arguments": True,
                                              "content": {"__all__": {"parsed"}}}}}


def _chat_reparse(sdk: Any) -> Reparse:
    from openai.lib._parsing._completions import (  # type: ignore[import-not-found,unused-ignore]
        parse_chat_completion,
    )

    def reparse(plain: Any, kwargs: Mapping[str, Any]) -> Any:
        return parse_chat_completion(response_format=kwargs.get("response_format", sdk.omit),
                                     input_tools=kwargs.get("tools", sdk.omit),
                                     chat_completion=plain)

    return reparse


def _responses_reparse(sdk: Any) -> Reparse:
    """What ``responses.parse()`` makes of a ``Response``: the SDK's own steps, in order."""
    from openai.lib._parsing._responses import (  # type: ignore[import-not-found,unused-ignore]
        parse_response,
    )
    from openai.lib._response_resources import (  # type: ignore[attr-defined,import-not-found,unused-ignore]
        _make_tools,
        _output_text_parser,
        _type_to_text_format_param,
    )

    def reparse(plain: Any, kwargs: Mapping[str, Any]) -> Any:
        omit = sdk.omit
        text_format = kwargs.get("text_format", omit)
        text = kwargs.get("text", omit)
        if given(text_format):
            text = {**(text if isinstance(text, Mapping) else {}),
                    "format": _type_to_text_format_param(text_format)}
        extra_body, given_input = kwargs.get("extra_body"), kwargs.get("input", omit)
        output_format = _output_text_parser(
            input=extra_body.get("input", given_input) if isinstance(extra_body, Mapping)
            else given_input,
            text=text, text_format=text_format, parse_as=kwargs.get("parse_as", omit))
        return parse_response(input_tools=_make_tools(kwargs.get("tools", omit)),
                              text_format=output_format, response=plain)

    return reparse


def _route(sdk: Any, endpoint: Endpoint, *, path: str, reparse: Reparse, cast_to: Any,
           chunk_type: Any, stream_done: Callable[[bytes], bool]) -> Route:
    parse_endpoint = Endpoint(
        provider=endpoint.provider, operation=endpoint.operation,
        to_body=raw_body(_unparsed_body), from_body=endpoint.from_body, meta=endpoint.meta,
        accumulator=endpoint.accumulator, replay_stream=endpoint.replay_stream)
    return Route(endpoint=endpoint, parse_endpoint=parse_endpoint, reparse=reparse, path=path,
                 cast_to=cast_to, chunk_type=chunk_type, stream_done=stream_done, sdk=sdk,
                 raw_class=lambda is_async: _legacy_response_class())


def _legacy_response_class() -> Any:
    from openai._legacy_response import LegacyAPIResponse  # type: ignore[import-not-found,unused-ignore]

    return LegacyAPIResponse


# The terminal events of a Responses stream (a quote inside text content is escaped, so
# this pattern only matches an event's own type field).
_TERMINAL = re.compile(rb'"type"\s*:\s*"response\.(?:completed|incomplete|failed)"')


def _routes(sdk: Any) -> tuple[tuple[str, Route, Any], ...]:
    """``(resource attribute path, route, parsed class)`` of the chat and responses APIs."""
    chat, responses = sdk.types.chat, sdk.types.responses
    return (
        ("chat.completions", _route(sdk, _chat_endpoint(sdk), path="chat/completions",
                                    reparse=_chat_reparse(sdk), cast_to=chat.ChatCompletion,
                                    chunk_type=chat.ChatCompletionChunk,
                                    stream_done=lambda data: b"data: [DONE]" in data),
         chat.ParsedChatCompletion),
        ("responses", _route(sdk, _responses_endpoint(sdk), path="responses",
                             reparse=_responses_reparse(sdk), cast_to=responses.Response,
                             chunk_type=responses.ResponseStreamEvent,
                             stream_done=lambda data: _TERMINAL.search(data) is not None),
         responses.ParsedResponse),
    )


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


class _ChatAccumulator(Accumulator):
    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}

    def add(self, item: Any) -> None:
        chunk = dump_body(item)
        for name in ("id", "created", "model", "system_fingerprint", "service_tier", "usage"):
            if chunk.get(name) is not None:
                self.head[name] = chunk[name]
        for choice in chunk.get("choices") or ():
            slot = self.choices.setdefault(int(choice.get("index", 0)), {
                "index": int(choice.get("index", 0)), "message": {}, "logprobs": None,
                "finish_reason": None})
            _merge(slot["message"], choice.get("delta") or {})
            if choice.get("logprobs") is not None:
                if slot["logprobs"] is None:
                    slot["logprobs"] = {}
                _merge(slot["logprobs"], choice["logprobs"])
            if choice.get("finish_reason") is not None:
                slot["finish_reason"] = choice["finish_reason"]

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


def _chat_endpoint(sdk: Any) -> Endpoint:
    chat_types = sdk.types.chat
    ChatCompletion, ChatCompletionChunk = chat_types.ChatCompletion, chat_types.ChatCompletionChunk

    def replay(body: dict[str, Any], client: Any, is_async: bool) -> Any:
        return sse_stream(sdk, client, ChatCompletionChunk, sse_bytes(_chat_chunks(body), True),
                          is_async)

    return Endpoint(
        provider="openai.chat", operation="chat", to_body=_to_body,
        from_body=lambda body: ChatCompletion.construct(**body),
        meta=_chat_meta, accumulator=lambda request: _ChatAccumulator(),
        replay_stream=replay,
    )


# --------------------------------------------------------------------------- responses


def _responses_meta(body: dict[str, Any]) -> Meta:
    usage = body.get("usage") or {}
    status = body.get("status")
    return Meta(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        response_model=body.get("model"),
        response_id=body.get("id"),
        finish_reasons=[str(status)] if status is not None else [],
    )


class _ResponsesAccumulator(Accumulator):
    """The final ``response`` of a Responses stream (its terminal event carries it whole)."""

    def __init__(self) -> None:
        self.response: dict[str, Any] | None = None
        self.text: dict[tuple[int, int], str] = {}

    def add(self, item: Any) -> None:
        event = dump_body(item)
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


def _responses_endpoint(sdk: Any) -> Endpoint:
    Response = sdk.types.responses.Response
    ResponseStreamEvent = sdk.types.responses.ResponseStreamEvent

    def replay(body: dict[str, Any], client: Any, is_async: bool) -> Any:
        return sse_stream(sdk, client, ResponseStreamEvent,
                          sse_bytes(_responses_events(body), False), is_async)

    return Endpoint(
        provider="openai.responses", operation="chat", to_body=_to_body,
        from_body=lambda body: Response.construct(**body),
        meta=_responses_meta, accumulator=lambda request: _ResponsesAccumulator(),
        replay_stream=replay,
    )
