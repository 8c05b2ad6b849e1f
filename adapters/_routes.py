"""The SDKs' other routes to one model call: ``parse``, ``with_raw_response`` and
``with_streaming_response``, each recorded and cached like ``create`` (openai's
``chat.completions`` and ``responses``, anthropic's ``messages``).

The SDK builds these routes around the resource's bound methods (``with_raw_response`` and
``with_streaming_response`` are cached properties made once per resource), and ``parse``
posts its request itself. So each is rebuilt here from the SDK's own pieces: the caller gets
the SDK's objects (``ParsedResponse``, ``LegacyAPIResponse``, ``APIResponse``, ``Stream``;
the SDKs are generated from one template, so their response classes share one interface),
and a cache hit, which has no HTTP exchange, is served as the object the SDK would have
built from the stored body (status 200, JSON or server-sent events, no provider headers).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import agentlog as al
from agentlog import StreamClosedError

from ._client_secrets import stored_body
from ._recording import (
    Config,
    Endpoint,
    _adrain,
    _Call,
    _drain,
    _override,
    bypassed,
    wrap_method,
)

Reparse = Callable[[Any, Mapping[str, Any]], Any]  # (plain SDK object, call kwargs) -> parsed


@dataclass(frozen=True)
class Route:
    """One model endpoint of an SDK resource (openai ``chat.completions`` / ``responses``,
    anthropic ``messages``).

    Attributes:
        endpoint: the ``create`` endpoint.
        parse_endpoint: the ``parse`` endpoint (its body leaves the parsed objects out).
        reparse: turns the plain SDK object of a stored body into what ``parse()`` returns,
            with the call's ``response_format`` / ``text_format`` and tools.
        path: the URL path under the base URL, e.g. ``"chat/completions"``.
        cast_to: the SDK's response class (``ChatCompletion``, ``Response``).
        chunk_type: the class of a stream's items.
        stream_done: whether server-sent-event bytes hold the stream's terminal event (a
            caller reading a stream stops there: the bytes after it may stay unread).
        sdk: the SDK's package (``openai``, ``anthropic``), whose response and request
            option classes the routes build their hits from.
        raw_class: the class of the SDK's ``with_raw_response`` responses, by ``is_async``
            (openai: ``LegacyAPIResponse``; anthropic: ``APIResponse`` / ``AsyncAPIResponse``).
    """

    endpoint: Endpoint
    parse_endpoint: Endpoint
    reparse: Reparse
    path: str
    cast_to: Any
    chunk_type: Any
    stream_done: Callable[[bytes], bool]
    sdk: Any
    raw_class: Callable[[bool], Any]


def given(value: Any) -> bool:
    """Whether an SDK argument was given (not the SDKs' ``NotGiven`` / ``Omit`` sentinel)."""
    return type(value).__name__ not in ("NotGiven", "Omit")


def _is_raw(obj: Any) -> bool:
    if type(obj) is dict or hasattr(type(obj), "__pydantic_serializer__"):
        # A parsed body (a pydantic model): its missing-attribute lookup builds an error
        # (~3 µs a call), and it is never a raw response.
        return False
    return hasattr(obj, "http_response") and callable(getattr(obj, "parse", None))


def _bare(method: Any) -> Any:
    """The SDK's own method behind a wrapped one."""
    return getattr(method, "__wrapped__", method)


class _Bare:
    """A stand-in resource whose model methods are the SDK's own (for the SDK's route classes,
    which bind the resource's methods when they are built)."""

    def __init__(self, resource: Any, **methods: Any) -> None:
        self._resource = resource
        for name, method in methods.items():
            setattr(self, name, method)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


def _sdk_module(route: Route, name: str) -> Any:
    return importlib.import_module(f"{route.sdk.__name__}.{name}")


def _options(route: Route, post_parser: Any = None) -> Any:
    extra = {} if post_parser is None else {"post_parser": post_parser}
    return _sdk_module(route, "_models").FinalRequestOptions.construct(
        method="post", url="/" + route.path, **extra)


def _http(client: Any, route: Route, status: int, headers: Any, content: bytes) -> Any:
    import httpx2  # type: ignore[import-not-found,unused-ignore]

    url = str(client.base_url).rstrip("/") + "/" + route.path
    return httpx2.Response(status, headers=headers, content=content,
                           request=httpx2.Request("POST", url))


def _stream_cls(sdk: Any, route: Route, is_async: bool) -> Any:
    return (sdk.AsyncStream if is_async else sdk.Stream)[route.chunk_type]


def _body_bytes(route: Route, body: dict[str, Any], client: Any, *, stream: bool,
                is_async: bool) -> tuple[dict[str, str], bytes]:
    """The headers and bytes a server would have sent for ``body`` (a stored response)."""
    if not stream:
        return {"content-type": "application/json"}, json.dumps(body).encode()
    replayed = route.endpoint.replay_stream(body, client, is_async)
    return {"content-type": "text/event-stream"}, replayed.response.content


def _parser(route: Route, kwargs: Mapping[str, Any]) -> Callable[[Any], Any]:
    return lambda plain: route.reparse(plain, kwargs)


# --------------------------------------------------------------------------- parse


def wrap_parse(resource: Any, route: Route, config: Config, *, client: Any,
               is_async: bool, parsed_type: Any) -> None:
    """``resource.parse()`` recorded and cached (its own request; it never calls ``create``).

    Recorded and cached is the wire body; a cache hit is a plain SDK object of the stored
    body, turned into the ``parsed_type`` object the caller expects by the SDK's own parser
    with the call's format class and tools. A ``with_raw_response.parse`` call (the SDK's
    raw wrapper around this method) gets its raw response back untouched.
    """
    wrap_method(resource, "parse", route.parse_endpoint, config, client=client,
                is_async=is_async)
    inner = resource.parse

    def parsed(result: Any, kwargs: Mapping[str, Any]) -> Any:
        if isinstance(result, parsed_type) or _is_raw(result):
            return result
        return route.reparse(result, kwargs)

    if is_async:
        async def aparse(*args: Any, **kwargs: Any) -> Any:
            return parsed(await inner(*args, **kwargs), kwargs)

        wrapper: Any = aparse
    else:
        def parse(*args: Any, **kwargs: Any) -> Any:
            return parsed(inner(*args, **kwargs), kwargs)

        wrapper = parse
    wrapper.__wrapped__ = inner.__wrapped__  # wrapping the client again replaces, not stacks
    wrapper.__agentlog_endpoint__ = route.parse_endpoint
    wrapper.__doc__ = inner.__doc__
    resource.parse = wrapper


def raw_body(to_body: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """``to_body`` that also reads a ``with_raw_response`` call's raw response.

    ``LegacyAPIResponse.parse()`` keeps what it parsed, so the caller's own ``.parse()``
    later returns the very object recorded here.
    """
    def body(obj: Any) -> dict[str, Any]:
        if not _is_raw(obj):
            return to_body(obj)
        if inspect.iscoroutinefunction(obj.parse):
            # An async raw response (anthropic) parses in a coroutine; its body was read
            # whole (a raw, non-streamed call), and that wire JSON is the record.
            wire: dict[str, Any] = json.loads(obj.http_response.content)
            return wire
        return to_body(obj.parse())

    return body


# --------------------------------------------------------------------------- raw responses

# The SDK's raw response of the streamed call in flight, handed from the SDK call (inside
# the recording wrapper) back to the route, which returns it to the caller.
_raw_of_call: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "agentlog_raw_response", default=None)


def wrap_raw(resource: Any, route: Route, sdk: Any, config: Config, *, client: Any,
             is_async: bool) -> None:
    """``resource.with_raw_response.create`` / ``.parse`` recorded and cached.

    Built again around the wrapped ``create`` and ``parse`` (the SDK's raw wrapper adds its
    header and the wrapped method records the parsed body): the caller gets the raw
    response object of the HTTP call unchanged. With ``stream=True`` the raw response's
    ``.parse()`` is the SDK's ``Stream``, recorded as it is consumed (at its end, or when
    closed or dropped early); under a cache the stream is fetched whole and the raw
    response serves the stored body as a stream. A hit is a raw response built from the
    stored body.
    """
    resource.__dict__.pop("with_raw_response", None)
    raw = resource.with_raw_response
    sdk_create = raw.create
    sdk_parse: Any = getattr(raw, "parse", None)
    bare = type(raw)(_Bare(resource, create=_bare(resource.create),
                           parse=_bare(getattr(resource, "parse", None))))
    holder = SimpleNamespace()
    if is_async:
        async def open_stream(*args: Any, **kwargs: Any) -> Any:
            response = await bare.create(*args, **kwargs)
            stream = response.parse()
            if inspect.isawaitable(stream):  # anthropic's async raw response
                stream = await stream
            _keep_raw(response, stream)
            return stream

        holder.create = open_stream
    else:
        def open_stream_sync(*args: Any, **kwargs: Any) -> Any:
            response = bare.create(*args, **kwargs)
            stream = response.parse()
            _keep_raw(response, stream)
            return stream

        holder.create = open_stream_sync
    wrap_method(holder, "create", route.endpoint, config, client=client, is_async=is_async)
    streamed = holder.create

    def as_raw(result: Any) -> Any:
        if _is_raw(result):
            return result
        http = _http(client, route, 200, {"content-type": "application/json"},
                     json.dumps(route.endpoint.to_body(result)).encode())
        return _raw(route, client, http, is_async, stream=False)

    def as_raw_parsed(result: Any, kwargs: Mapping[str, Any]) -> Any:
        if _is_raw(result):
            return result
        body = route.parse_endpoint.to_body(result)
        http = _http(client, route, 200, {"content-type": "application/json"},
                     json.dumps(body).encode())
        return _raw(route, client, http, is_async, stream=False,
                    post_parser=_parser(route, kwargs))

    def as_raw_stream(stream: Any, kept: list[Any]) -> Any:
        if kept and kept[0][1] is stream:
            # Live: the raw response keeps what it parsed, so the caller's .parse() is the
            # recorded stream itself.
            return kept[0][0]
        # Under a cache the upstream stream was read whole; this one replays the body.
        status, headers = 200, {"content-type": "text/event-stream"}
        if kept:
            status = kept[0][0].status_code
            headers = {k: v for k, v in kept[0][0].headers.items()
                       if k.lower() not in _BODY_HEADERS}
        http = _http(client, route, status, headers, stream.response.content)
        return _raw(route, client, http, is_async, stream=True,
                    stream_cls=_stream_cls(sdk, route, is_async))

    if is_async:
        async def acreate(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream"):
                kept: list[Any] = []
                token = _raw_of_call.set(kept)
                try:
                    stream = await streamed(*args, **kwargs)
                finally:
                    _raw_of_call.reset(token)
                return as_raw_stream(stream, kept)
            return as_raw(await sdk_create(*args, **kwargs))

        async def aparse(*args: Any, **kwargs: Any) -> Any:
            return as_raw_parsed(await sdk_parse(*args, **kwargs), kwargs)

        raw.create = acreate
        if sdk_parse is not None:
            raw.parse = aparse
    else:
        def create(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream"):
                kept: list[Any] = []
                token = _raw_of_call.set(kept)
                try:
                    stream = streamed(*args, **kwargs)
                finally:
                    _raw_of_call.reset(token)
                return as_raw_stream(stream, kept)
            return as_raw(sdk_create(*args, **kwargs))

        def parse(*args: Any, **kwargs: Any) -> Any:
            return as_raw_parsed(sdk_parse(*args, **kwargs), kwargs)

        raw.create = create
        if sdk_parse is not None:
            raw.parse = parse
    resource.__dict__["with_raw_response"] = raw


def _keep_raw(response: Any, stream: Any) -> None:
    kept = _raw_of_call.get()
    if kept is not None:
        kept.append((response, stream))


# Headers that describe the bytes on the wire, not a body rebuilt from a stored response.
_BODY_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})


def _raw(route: Route, client: Any, http: Any, is_async: bool, *, stream: bool,
         stream_cls: Any = None, post_parser: Any = None) -> Any:
    """A raw response serving ``http``, as the SDK's ``with_raw_response`` builds one."""
    return route.raw_class(is_async)(raw=http, cast_to=route.cast_to, client=client,
                                     stream=stream, stream_cls=stream_cls,
                                     options=_options(route, post_parser))


# --------------------------------------------------------------------------- streaming responses


def wrap_streaming(resource: Any, route: Route, sdk: Any, config: Config, *, client: Any,
                   is_async: bool) -> None:
    """``resource.with_streaming_response.create`` (and ``.parse``) recorded and cached.

    The SDK's context manager makes the request when it is entered and the caller reads the
    body (``.parse()``, ``.read()``, ``.iter_lines()``, ...). Outside a cache the bytes are
    passed through as they are read, and the call is recorded when the block exits, from
    the bytes the caller read (a body left unread to its end is recorded with what was
    read, marked ``StreamClosedError``). Under a cache the body is read whole when the block
    is entered, stored, and handed to the caller already read; a hit is an ``APIResponse``
    serving the stored body (JSON, or server-sent events for ``stream=True``).
    """
    resource.__dict__.pop("with_streaming_response", None)
    streaming = resource.with_streaming_response
    methods = {"create": (route.endpoint, False)}
    if hasattr(streaming, "parse"):
        methods["parse"] = (route.parse_endpoint, True)
    bare = type(streaming)(_Bare(resource, **{
        name: _bare(getattr(resource, name)) for name in methods}))
    manager = _AsyncStreamingCall if is_async else _StreamingCall
    for name, (endpoint, parsed) in methods.items():
        call = _Streaming(route=route, endpoint=endpoint, parsed=parsed, sdk=sdk,
                          config=config, client=client, is_async=is_async,
                          sdk_manager=getattr(bare, name))

        def open_call(*args: Any, _call: _Streaming = call, **kwargs: Any) -> Any:
            return manager(_call, args, kwargs)

        setattr(streaming, name, open_call)
    resource.__dict__["with_streaming_response"] = streaming


@dataclass(frozen=True)
class _Streaming:
    route: Route
    endpoint: Endpoint
    parsed: bool  # the ``parse`` method: the SDK post-parses into the caller's class
    sdk: Any
    config: Config
    client: Any
    is_async: bool
    sdk_manager: Callable[..., Any]  # the SDK's with_streaming_response method, unwrapped

    def fresh(self, response: Any, http: Any) -> Any:
        """The SDK's response class over ``http``, as the SDK built ``response``."""
        return type(response)(raw=http, cast_to=response._cast_to, client=response._client,
                              stream=response._is_sse_stream,
                              stream_cls=response._stream_cls, options=response._options)

    def hit(self, body: dict[str, Any], kwargs: Mapping[str, Any]) -> Any:
        """An ``APIResponse`` serving a stored body (no HTTP exchange happened)."""
        responses = _sdk_module(self.route, "_response")
        stream = bool(kwargs.get("stream"))
        headers, content = _body_bytes(self.route, body, self.client, stream=stream,
                                       is_async=self.is_async)
        http = _http(self.client, self.route, 200, headers, content)
        cls = responses.AsyncAPIResponse if self.is_async else responses.APIResponse
        return cls(raw=http, cast_to=self.route.cast_to, client=self.client, stream=stream,
                   stream_cls=_stream_cls(self.sdk, self.route, self.is_async)
                   if stream else None,
                   options=_options(self.route,
                                    _parser(self.route, kwargs) if self.parsed else None))


def _read_http(response: Any, tee: Any) -> tuple[Any, bool] | None:
    """``(http, complete)``: the body the caller read, as a fresh ``httpx2.Response``."""
    import httpx2  # type: ignore[import-not-found,unused-ignore]

    original = response.http_response
    try:
        content = original.content  # read whole (or delivered whole by the transport)
    except httpx2.ResponseNotRead:
        content = None
    if content is not None:
        headers = {k: v for k, v in original.headers.items() if k.lower() not in _BODY_HEADERS}
        return httpx2.Response(original.status_code, headers=headers, content=content,
                               request=original.request), True
    if tee is None:
        return None
    # Raw bytes as they came: the original headers say how to decode them.
    return httpx2.Response(original.status_code, headers=original.headers,
                           content=b"".join(tee.parts), request=original.request), tee.done


def _complete(route: _Streaming, read: tuple[Any, bool] | None,
              kwargs: Mapping[str, Any]) -> bool:
    if read is None:
        return False
    if read[1]:
        return True
    if not kwargs.get("stream"):
        return False
    try:
        return route.route.stream_done(read[0].content)
    except Exception:  # undecodable bytes: not a complete stream
        return False


def _closed_early(tee: Any) -> StreamClosedError:
    read = 0 if tee is None else sum(len(p) for p in tee.parts)
    return StreamClosedError(f"the caller left the with_streaming_response block after reading "
                             f"{read} byte(s) of the body, before its end")


def _install_tee(response: Any, tee_cls: Any) -> Any:
    import httpx2  # type: ignore[import-not-found,unused-ignore]

    http = response.http_response
    try:
        _ = http.content  # already read (a transport may deliver the body whole)
    except httpx2.ResponseNotRead:
        tee = tee_cls(http.stream)
        http.stream = tee
        return tee
    return None


@functools.cache
def _tee_class(is_async: bool) -> Any:
    """A byte stream passing a response's bytes through as they are read, keeping them.

    A subclass of httpx2's byte-stream class, which httpx2 checks before reading.
    """
    import httpx2  # type: ignore[import-not-found,unused-ignore]

    if is_async:
        class AsyncTee(httpx2.AsyncByteStream):  # type: ignore[misc,unused-ignore]
            def __init__(self, inner: Any) -> None:
                self.inner, self.done = inner, False
                self.parts: list[bytes] = []

            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for part in self.inner:
                    self.parts.append(part)
                    yield part
                self.done = True

            async def aclose(self) -> None:
                await self.inner.aclose()

        return AsyncTee

    class Tee(httpx2.SyncByteStream):  # type: ignore[misc,unused-ignore]
        def __init__(self, inner: Any) -> None:
            self.inner, self.done = inner, False
            self.parts: list[bytes] = []

        def __iter__(self) -> Iterator[bytes]:
            for part in self.inner:
                self.parts.append(part)
                yield part
            self.done = True

        def close(self) -> None:
            self.inner.close()

    return Tee


def _begin(route: _Streaming, kwargs: dict[str, Any]) -> _Call | None:
    """The call in flight, or None: outside any run, without a cache and unobserved (the
    SDK's own)."""
    override = _override.get()
    cache = route.config.cache if override is None else override.cache
    if bypassed(cache):
        return None
    call = _Call(route.endpoint, route.config, kwargs, cache)
    try:
        _ = call.cached  # a read-only cache refuses a request without a key here
    except al.CacheMiss as exc:
        call.record(None, status="miss", error=exc)
        raise
    return call


def _served(route: _Streaming, call: _Call, served: Any, kept: list[Any],
            kwargs: Mapping[str, Any]) -> Any:
    """Record a call the cache served; the caller's response (the upstream one on a miss)."""
    call.record(served.response, status=served.status)
    return kept[0] if kept else route.hit(served.response, kwargs)


class _StreamingCall:
    """``with client....with_streaming_response.create(...) as response:``, recorded."""

    def __init__(self, route: _Streaming, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._route = route
        self._args = args
        self._kwargs = kwargs
        self._inner: Any = None  # the SDK's context manager
        self._response: Any = None
        self._call: _Call | None = None
        self._tee: Any = None

    def __enter__(self) -> Any:
        route, args, kwargs = self._route, self._args, self._kwargs
        call = _begin(route, kwargs)
        if call is None:
            self._inner = route.sdk_manager(*args, **kwargs)
            return self._inner.__enter__()
        if call.cached:
            kept: list[Any] = []

            def fetch() -> dict[str, Any]:
                with route.sdk_manager(*args, **kwargs) as response:
                    response.read()
                    kept.append(response)
                    return stored_body(_body(route, response, kwargs), call.config.secrets)

            try:
                served = call.cache.call(call.key, fetch)
            except BaseException as exc:
                call.record(None, status="miss", error=exc)
                raise
            self._response = _served(route, call, served, kept, kwargs)
            return self._response
        inner = route.sdk_manager(*args, **kwargs)
        try:
            response = inner.__enter__()
        except BaseException as exc:
            call.record(None, status=None, error=exc)
            raise
        self._inner, self._call, self._response = inner, call, response
        self._tee = _install_tee(response, _tee_class(False))
        return response

    def __exit__(self, *exc_info: Any) -> None:
        try:
            if self._inner is not None:
                self._inner.__exit__(*exc_info)
            elif self._response is not None:
                self._response.close()
        finally:
            if self._call is not None:
                _record_read(self._route, self._call, self._response, self._tee,
                             self._kwargs)


class _AsyncStreamingCall(_StreamingCall):
    """``async with client....with_streaming_response.create(...) as response:``."""

    async def __aenter__(self) -> Any:
        route, args, kwargs = self._route, self._args, self._kwargs
        call = _begin(route, kwargs)
        if call is None:
            self._inner = route.sdk_manager(*args, **kwargs)
            return await self._inner.__aenter__()
        if call.cached:
            kept: list[Any] = []

            async def afetch() -> dict[str, Any]:
                async with route.sdk_manager(*args, **kwargs) as response:
                    await response.read()
                    kept.append(response)
                    return stored_body(await _abody(route, response, kwargs),
                                       call.config.secrets)

            try:
                served = await call.cache.acall(call.key, afetch)
            except BaseException as exc:
                call.record(None, status="miss", error=exc)
                raise
            self._response = _served(route, call, served, kept, kwargs)
            return self._response
        inner = route.sdk_manager(*args, **kwargs)
        try:
            response = await inner.__aenter__()
        except BaseException as exc:
            call.record(None, status=None, error=exc)
            raise
        self._inner, self._call, self._response = inner, call, response
        self._tee = _install_tee(response, _tee_class(True))
        return response

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            if self._inner is not None:
                await self._inner.__aexit__(*exc_info)
            elif self._response is not None:
                await self._response.close()
        finally:
            if self._call is not None:
                await _arecord_read(self._route, self._call, self._response, self._tee,
                                    self._kwargs)


def _body(route: _Streaming, response: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a response read whole, parsed by the SDK as the caller's would be."""
    read = _read_http(response, None)
    assert read is not None
    parsed = route.fresh(response, read[0]).parse()
    if kwargs.get("stream"):
        return _drain(route.endpoint, kwargs, parsed)
    return route.endpoint.to_body(parsed)


async def _abody(route: _Streaming, response: Any, kwargs: Mapping[str, Any]
                 ) -> dict[str, Any]:
    read = _read_http(response, None)
    assert read is not None
    parsed = await route.fresh(response, read[0]).parse()
    if kwargs.get("stream"):
        return await _adrain(route.endpoint, kwargs, parsed)
    return route.endpoint.to_body(parsed)


def _record_read(route: _Streaming, call: _Call, response: Any, tee: Any,
                 kwargs: Mapping[str, Any]) -> None:
    """Record a live streaming-response call from what the caller read of its body."""
    read = _read_http(response, tee)
    body: dict[str, Any] | None = None
    complete = _complete(route, read, kwargs)
    try:
        if read is not None and (complete or kwargs.get("stream")):
            parsed = route.fresh(response, read[0]).parse()
            if kwargs.get("stream"):
                body = _accumulate(route, kwargs, parsed)
            else:
                body = route.endpoint.to_body(parsed)
    except Exception:  # a body cut short costs the record its body, never the caller
        body = None
    call.record(body, status=None, error=None if complete else _closed_early(tee))


async def _arecord_read(route: _Streaming, call: _Call, response: Any, tee: Any,
                        kwargs: Mapping[str, Any]) -> None:
    read = _read_http(response, tee)
    body: dict[str, Any] | None = None
    complete = _complete(route, read, kwargs)
    try:
        if read is not None and (complete or kwargs.get("stream")):
            parsed = await route.fresh(response, read[0]).parse()
            if kwargs.get("stream"):
                acc = route.endpoint.accumulator(kwargs)
                with contextlib.suppress(Exception):
                    async for item in parsed:
                        acc.add(item)
                body = acc.body()
            else:
                body = route.endpoint.to_body(parsed)
    except Exception:
        pass
    call.record(body, status=None, error=None if complete else _closed_early(tee))


def _accumulate(route: _Streaming, kwargs: Mapping[str, Any], stream: Any) -> dict[str, Any]:
    """The items of a (possibly cut-short) stream folded into a body."""
    acc = route.endpoint.accumulator(kwargs)
    with contextlib.suppress(Exception):  # cut short: what was read is the record
        for item in stream:
            acc.add(item)
    return acc.body()

