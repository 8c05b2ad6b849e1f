"""Record and cache the calls of an ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic``.

``wrap(client)`` returns the same client with ``messages.create`` recording every call (sync,
async, ``stream=True``) as an ``LLMCall`` in the current window and as one CLIENT span
``chat {model}``; with ``cache=ModelCache(...)`` calls go through the exact-input cache
(a streamed call is fetched whole and served as a stream of the same type).

The anthropic SDK emits its own CLIENT span per call (``anthropic.messages.create``). Two
spans for one call would double every count in a tracing backend, so ``wrap`` turns the
SDK's spans off on this client; pass ``sdk_spans=True`` to keep both.

Anthropic Messages return no logprobs: ``choice_probs`` on a Message raises
``NoLogprobsError`` rather than inventing a vector.

``messages.stream()`` (the SDK's stream helper) returns the SDK's own stream manager over
the wrapped ``create(stream=True)``: the same events, text stream and ``get_final_message()``;
the call is recorded when the stream ends or is closed (the final message), or, abandoned
unclosed, with what was received, marked as closed early; under a cache a hit replays the
stored message as a stream. With ``output_format=`` the class becomes the request's
``output_config`` format as the SDK makes it, and the manager parses the final message
into it (``get_final_message().parsed_output``).

``messages.parse(output_format=...)`` is recorded and cached with the wire body (the
``parsed_output`` the SDK derives from the text is left out; the class is keyed by its JSON
schema); a hit is parsed again into the caller's class by the SDK's own parser.

``messages.with_raw_response.create`` (the caller gets the raw ``APIResponse``; with
``stream=True`` its ``.parse()`` is the SDK's ``Stream``, recorded as it is consumed) and
``messages.with_streaming_response.create`` (recorded when the block exits, from the bytes
the caller read) are recorded and cached as in the openai adapter; a hit is a response
object serving the stored body.

Example:
    >>> import anthropic, httpx2
    >>> from agentlog.adapters import anthropic as anthropic_adapter
    >>> def handler(request):
    ...     return httpx2.Response(200, json={
    ...         "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    ...         "content": [{"type": "text", "text": "B"}], "stop_reason": "end_turn",
    ...         "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}})
    >>> http = httpx2.Client(transport=httpx2.MockTransport(handler))
    >>> client = anthropic_adapter.wrap(anthropic.Anthropic(api_key="sk-ant-x", http_client=http))
    >>> client.messages.create(model="claude-x", max_tokens=5, messages=[]).content[0].text
    'B'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from ._routes import Route, given, raw_body, wrap_parse, wrap_raw, wrap_streaming

__all__ = ["wrap"]

ClientT = TypeVar("ClientT")


def wrap(
    client: ClientT,
    *,
    cache: Any = None,
    channel: str | None = None,
    prices: Prices | None = None,
    capture_content: bool = False,
    sdk_spans: bool = False,
) -> ClientT:
    """Record (and, with ``cache``, serve from the exact-input cache) every Messages call.

    Args:
        client: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``; modified in place
            and returned.
        cache: an ``agentlog.replay.ModelCache`` every call goes through, the path of its
            SQLite file (opened as ``ModelCache(path)``, read-write), or None.
        channel: the evaluation channel id these calls serve (part of the cache key).
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``.
        capture_content: put message content on the spans (off by default).
        sdk_spans: keep the SDK's own ``anthropic.messages.create`` span besides ours.

    Raises:
        agentlog.MissingDependencyError: the ``anthropic`` package is not installed.
        TypeError: ``client`` is not an anthropic client, or ``cache`` is neither a
            ``ModelCache``, a path nor None.
        ValueError: ``cache`` is a path but not of a model cache (a folder, another file).
    """
    sdk = require("anthropic", "anthropic")
    config, is_async = client_config(
        client, sdk.Anthropic, sdk.AsyncAnthropic,
        expected="anthropic.Anthropic or anthropic.AsyncAnthropic",
        secret_attrs=("api_key", "auth_token"), cache=cache, channel=channel, prices=prices,
        capture_content=capture_content)
    if not sdk_spans:
        _disable_sdk_spans(client)
    target: Any = client
    messages = target.messages
    route = _route(sdk, _messages_endpoint(sdk))
    wrap_method(messages, "create", route.endpoint, config, client=client, is_async=is_async)
    if hasattr(messages, "parse"):
        wrap_parse(messages, route, config, client=client, is_async=is_async,
                   parsed_type=sdk.types.ParsedMessage)
    wrap_raw(messages, route, sdk, config, client=client, is_async=is_async)
    wrap_streaming(messages, route, sdk, config, client=client, is_async=is_async)
    _wrap_stream(messages, sdk, is_async=is_async)
    wrap_copies(target, lambda copy: wrap(copy, cache=config.cache, channel=channel,
                                          prices=prices, capture_content=capture_content,
                                          sdk_spans=sdk_spans))
    return client


# The telemetry headers the SDK's own helper sends (anthropic.lib._stainless_helpers).
_STREAM_HEADERS = {"x-stainless-helper-method": "stream", "x-stainless-stream-helper": "messages"}


def _wrap_stream(messages: Any, sdk: Any, *, is_async: bool) -> None:
    """``messages.stream(...)``: the SDK's stream manager around the wrapped ``create``.

    The SDK's helper posts the request itself (it never calls ``create``), so it is rebuilt
    here from the public parts it is made of: ``create(stream=True, ...)`` with the same
    keyword arguments, the helper's telemetry headers and, for ``output_format``, the
    ``output_config`` the SDK makes of it, handed to the SDK's ``MessageStreamManager``
    (which accumulates the events, and parses the final message, exactly as for its own
    request).
    """
    original = messages.stream
    original = getattr(original, "__agentlog_original__", original)
    streaming = sdk.lib.streaming
    not_given = sdk.NOT_GIVEN

    def arguments(kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        headers = {**_STREAM_HEADERS, **(kwargs.pop("extra_headers", None) or {})}
        output_format = kwargs.pop("output_format", not_given)
        if given(output_format) and output_format is not None:
            kwargs["output_config"] = _output_config(kwargs.get("output_config"),
                                                     output_format)
        else:
            output_format = not_given
        return {**kwargs, "stream": True, "extra_headers": headers}, output_format

    if is_async:
        def astream(**kwargs: Any) -> Any:
            request, output_format = arguments(kwargs)
            return streaming.AsyncMessageStreamManager(messages.create(**request),
                                                       output_format=output_format)

        wrapper: Any = astream
    else:
        def stream(**kwargs: Any) -> Any:
            request, output_format = arguments(kwargs)
            return streaming.MessageStreamManager(lambda: messages.create(**request),
                                                  output_format=output_format)

        wrapper = stream
    wrapper.__agentlog_original__ = original
    wrapper.__doc__ = original.__doc__
    messages.stream = wrapper


def _output_config(output_config: Any, output_format: Any) -> dict[str, Any]:
    """The ``output_config`` the SDK's ``stream()`` / ``parse()`` sends for ``output_format``.

    The SDK's own steps (``anthropic.resources.messages``): a JSON schema of the class,
    transformed to what the API accepts, merged into the caller's ``output_config``.
    """
    from anthropic._models import TypeAdapter  # type: ignore[attr-defined,import-not-found,unused-ignore]
    from anthropic.lib._parse._transform import (  # type: ignore[import-not-found,unused-ignore]
        cached_json_schema,
        transform_schema,
    )

    if isinstance(output_format, Mapping):
        raise TypeError("`output_format` must be a type; pass a schema dict as "
                        "`output_config={'format': ...}` instead")
    schema = transform_schema(cached_json_schema(TypeAdapter(output_format)))
    fmt = {"schema": schema, "type": "json_schema"}
    if isinstance(output_config, Mapping):
        return {**output_config, "format": fmt}
    return {"format": fmt}


def _route(sdk: Any, endpoint: Endpoint) -> Route:
    """The routes to a Messages call besides ``create``: ``parse()`` (its wire body
    recorded, a hit parsed by the SDK's parser), ``with_raw_response.create`` and
    ``with_streaming_response.create``."""
    from anthropic.lib._parse._response import (  # type: ignore[import-not-found,unused-ignore]
        parse_response,
    )

    def reparse(plain: Any, kwargs: Mapping[str, Any]) -> Any:
        output_format = kwargs.get("output_format", sdk.NOT_GIVEN)
        return parse_response(response=plain, output_format=output_format
                              if given(output_format) and output_format is not None
                              else sdk.NOT_GIVEN)

    return Route(endpoint=endpoint, parse_endpoint=endpoint, reparse=reparse,
                 path="v1/messages", cast_to=sdk.types.Message,
                 chunk_type=sdk.types.RawMessageStreamEvent,
                 stream_done=lambda data: b"message_stop" in data, sdk=sdk,
                 raw_class=_raw_response_class)


def _raw_response_class(is_async: bool) -> Any:
    from anthropic._response import (  # type: ignore[import-not-found,unused-ignore]
        APIResponse,
        AsyncAPIResponse,
    )

    return AsyncAPIResponse if is_async else APIResponse


def _disable_sdk_spans(client: Any) -> None:
    # The SDK reads its tracing option once, at construction; _set_open_telemetry is the
    # one place it sets it (its copy() uses it too), so this is how an existing client's
    # spans are turned off without replacing the client the caller holds.
    setter = getattr(client, "_set_open_telemetry", None)
    options = getattr(client, "open_telemetry", None)
    if setter is None or not isinstance(options, Mapping):
        return
    traces = dict(options.get("traces") or {})
    traces["enabled"] = False
    setter({**options, "traces": traces})


def _meta(body: dict[str, Any]) -> Meta:
    usage = body.get("usage") or {}
    reason = body.get("stop_reason")
    return Meta(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        response_model=body.get("model"),
        response_id=body.get("id"),
        finish_reasons=[str(reason)] if reason is not None else [],
    )


class _MessageAccumulator(Accumulator):
    """A Messages stream's events folded into the Message a non-streamed call returns."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        self.json: dict[int, str] = {}

    def add(self, item: Any) -> None:
        event = dump_body(item)
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


def _messages_endpoint(sdk: Any) -> Endpoint:
    Message, RawMessageStreamEvent = sdk.types.Message, sdk.types.RawMessageStreamEvent

    def replay(body: dict[str, Any], client: Any, is_async: bool) -> Any:
        return sse_stream(sdk, client, RawMessageStreamEvent,
                          sse_bytes(_message_events(body), False), is_async)

    return Endpoint(
        provider="anthropic.messages", operation="chat", to_body=raw_body(dump_body),
        from_body=lambda body: Message.construct(**body),
        meta=_meta, accumulator=lambda request: _MessageAccumulator(),
        replay_stream=replay,
    )
