"""Record and cache the calls of an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client.

``wrap(client)`` returns the same client with ``chat.completions.create`` and
``responses.create`` recording every call as an ``LLMCall`` in the current window (request
without credentials, response, usage, latency, logprobs, ``system_fingerprint``), counted
into the window and emitted as a CLIENT span ``chat {model}``. Streams are passed through
unchanged and recorded when they end, fail, or are closed or dropped early.

The SDK's helpers built on ``create`` are recorded and cached with it:
``chat.completions.stream()`` and ``responses.stream()`` (they call the wrapped ``create``
with ``stream=True``) and ``with_raw_response.create`` (the caller gets the raw response
object; its parsed body is recorded), and ``chat.completions.parse()`` is wrapped on its
own (recorded is the wire body; a cache hit is parsed again with the call's
``response_format``). Not recorded: ``responses.parse()``, ``with_streaming_response``,
``with_raw_response.create(stream=True)`` and ``with_raw_response.parse()``, which are
passed to the SDK as they are.

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

from collections.abc import Mapping
from typing import Any, TypeVar

from ._recording import (
    Accumulator,
    Config,
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
        cache: an ``agentlog.replay.ModelCache`` every call goes through, or None.
        channel: the evaluation channel id these calls serve (part of the cache key);
            ``agentlog.adapters.call_options`` overrides it per call.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``; the cost
            of each call is counted into its window.
        capture_content: put message content on the spans (off by default).

    Raises:
        agentlog.MissingDependencyError: the ``openai`` package is not installed.
        TypeError: ``client`` is not an openai client.
    """
    sdk = require("openai", "openai")
    config, is_async = client_config(
        client, sdk.OpenAI, sdk.AsyncOpenAI, expected="openai.OpenAI or openai.AsyncOpenAI",
        secret_attrs=("api_key",), cache=cache, channel=channel, prices=prices,
        capture_content=capture_content)
    target: Any = client
    for resource, endpoint, path in ((target.chat.completions, _chat_endpoint(sdk),
                                      "chat/completions"),
                                     (target.responses, _responses_endpoint(sdk), "responses")):
        wrap_method(resource, "create", endpoint, config, client=client, is_async=is_async)
        _wrap_raw(resource, endpoint, path, client=client, is_async=is_async)
    _wrap_parse(target.chat.completions, sdk, config, client=client, is_async=is_async)
    wrap_copies(target, lambda copy: wrap(copy, cache=cache, channel=channel, prices=prices,
                                          capture_content=capture_content))
    return client


# --------------------------------------------------------------------------- raw responses


def _to_body(obj: Any) -> dict[str, Any]:
    """The JSON body of a response, also of a ``with_raw_response`` call's raw response.

    ``LegacyAPIResponse.parse()`` keeps what it parsed, so the caller's own ``.parse()``
    later returns the very object recorded here.
    """
    if hasattr(obj, "http_response") and callable(getattr(obj, "parse", None)):
        obj = obj.parse()
    return dump_body(obj)


def _wrap_raw(resource: Any, endpoint: Endpoint, path: str, *, client: Any,
              is_async: bool) -> None:
    """``resource.with_raw_response.create`` recorded and cached like ``create``.

    The SDK builds ``with_raw_response`` (a cached property) once per resource around
    ``resource.create`` as it is then, so it is built again here, around the wrapped
    ``create``: the caller gets the raw response object of the HTTP call unchanged, and its
    parsed body is what is recorded and cached. A cache hit has no HTTP exchange: it is
    served as a raw response built from the stored body (status 200, JSON, no provider
    headers). ``stream=True`` through ``with_raw_response`` is passed to the SDK unrecorded.
    """
    resource.__dict__.pop("with_raw_response", None)
    raw = resource.with_raw_response
    sdk_create = raw.create
    wrapped = resource.create
    bare = wrapped.__wrapped__  # the SDK's create, for the unrecorded stream case
    unrecorded = type(raw)(_Bare(resource, bare)).create

    def as_raw(result: Any) -> Any:
        if hasattr(result, "http_response"):
            return result
        return _raw_response(result, endpoint, client, path)

    if is_async:
        async def acreate(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream"):
                return await unrecorded(*args, **kwargs)
            return as_raw(await sdk_create(*args, **kwargs))

        raw.create = acreate
    else:
        def create(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream"):
                return unrecorded(*args, **kwargs)
            return as_raw(sdk_create(*args, **kwargs))

        raw.create = create
    resource.__dict__["with_raw_response"] = raw


class _Bare:
    """A stand-in resource whose ``create`` is the SDK's own (for the raw-response class)."""

    def __init__(self, resource: Any, create: Any) -> None:
        self._resource = resource
        self.create = create

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


def _raw_response(parsed: Any, endpoint: Endpoint, client: Any, path: str) -> Any:
    """A ``LegacyAPIResponse`` serving a cached body, as the SDK builds one for a reply."""
    import httpx2  # type: ignore[import-not-found,unused-ignore]
    from openai._legacy_response import LegacyAPIResponse  # type: ignore[import-not-found,unused-ignore]
    from openai._models import FinalRequestOptions  # type: ignore[import-not-found,unused-ignore]

    body = dump_body(parsed)
    url = str(client.base_url).rstrip("/") + "/" + path
    reply = httpx2.Response(200, json=body, request=httpx2.Request("POST", url))
    return LegacyAPIResponse(raw=reply, cast_to=type(parsed), client=client, stream=False,
                             stream_cls=None, options=FinalRequestOptions.construct(
                                 method="post", url="/" + path))


# --------------------------------------------------------------------------- parse


def _unparsed_body(obj: Any) -> dict[str, Any]:
    """The body the server sent for a ``parse()`` call, without the SDK's parsed objects.

    ``message.parsed`` and ``function.parsed_arguments`` are derived from the content by
    the SDK (and are instances of the caller's classes): recorded and cached is the wire
    body, and a hit is parsed again with the caller's ``response_format``. They are left
    out of the dump itself (dumping them makes pydantic warn in the host: their declared
    type is a generic placeholder).
    """
    body: dict[str, Any] = obj.model_dump(mode="json", exclude_unset=True, warnings=False,
                                          exclude=_PARSED_FIELDS)
    return body


_PARSED_FIELDS: Any = {"choices": {"__all__": {"message": {
    "parsed": True, "tool_calls": {"__all__": {"function": {"parsed_arguments"}}}}}}}


def _wrap_parse(resource: Any, sdk: Any, config: Config, *, client: Any,
                is_async: bool) -> None:
    """``chat.completions.parse()`` recorded and cached as an ``openai.chat`` call.

    ``parse()`` posts the request itself (it never calls ``create``), so it is wrapped on its
    own; its ``response_format`` class is keyed by its JSON schema. A cache hit is a plain
    ``ChatCompletion`` of the stored body, turned into the ``ParsedChatCompletion`` the
    caller expects by the SDK's own parser, with the call's ``response_format`` and tools.
    """
    from openai.lib._parsing._completions import (  # type: ignore[import-not-found,unused-ignore]
        parse_chat_completion,
    )

    chat = _chat_endpoint(sdk)
    endpoint = Endpoint(provider=chat.provider, operation=chat.operation,
                        to_body=_unparsed_body, from_body=chat.from_body, meta=chat.meta,
                        accumulator=chat.accumulator, replay_stream=chat.replay_stream)
    wrap_method(resource, "parse", endpoint, config, client=client, is_async=is_async)
    inner = resource.parse
    parsed_type = sdk.types.chat.ParsedChatCompletion
    omit = sdk.omit

    def parsed(result: Any, kwargs: Mapping[str, Any]) -> Any:
        if isinstance(result, parsed_type):
            return result
        return parse_chat_completion(response_format=kwargs.get("response_format", omit),
                                     input_tools=kwargs.get("tools", omit),
                                     chat_completion=result)

    if is_async:
        async def aparse(*args: Any, **kwargs: Any) -> Any:
            return parsed(await inner(*args, **kwargs), kwargs)

        wrapper: Any = aparse
    else:
        def parse(*args: Any, **kwargs: Any) -> Any:
            return parsed(inner(*args, **kwargs), kwargs)

        wrapper = parse
    wrapper.__wrapped__ = inner.__wrapped__  # wrapping the client again replaces, not stacks
    wrapper.__agentlog_endpoint__ = endpoint
    wrapper.__doc__ = inner.__doc__
    resource.parse = wrapper


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
