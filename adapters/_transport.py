"""Model calls recorded and served at the HTTP seam: an ``httpx2``/``httpx`` transport.

Every httpx-based SDK (openai, anthropic, and the frameworks built on them or on httpx
itself) sends each request through one public seam, its HTTP client's transport. The
recording transport sits there, in front of the real one (``base``):

* A request to an endpoint agentlog knows (``_wire.ROUTES``: Chat Completions,
  Responses, Completions, Embeddings, Anthropic Messages; any OpenAI-compatible server)
  is keyed from its JSON body with the registered per-provider field lists
  (``request_key``), served from the exact-input cache when it holds it (the stored body
  as JSON, or replayed as the endpoint's server-sent-event stream when the request asked
  for a stream), and otherwise forwarded. The response passes through unchanged (a stream
  chunk by chunk) and is recorded as one ``LLMCall`` with its span when it ends, fails or
  is closed early; under a cache it is stored (errors never are).
* Any other request passes through untouched; where calls are recorded (in a run, under
  a cache, in ``observe_calls``) it is counted (``unrecorded``), with a warning once per
  endpoint inside a run, so a user sees what was not recorded. Outside all of those every
  request goes straight to ``base``.

The SDK parses a served response exactly as a live one: its types, ``parse()``, raw and
streaming responses all work without agentlog knowing them.

Examples:
    >>> import httpx2, openai
    >>> from agentlog.adapters import http_client
    >>> def handler(request):
    ...     return httpx2.Response(200, json={
    ...         "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    ...         "choices": [{"index": 0, "finish_reason": "stop",
    ...                      "message": {"role": "assistant", "content": "B"}}]})
    >>> client = openai.OpenAI(api_key="sk-test",
    ...                        http_client=http_client(base=httpx2.MockTransport(handler)))
    >>> client.chat.completions.create(model="m", messages=[]).choices[0].message.content
    'B'
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import json
import sys
import threading
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from types import ModuleType
from typing import Any, Literal

import agentlog as al
from agentlog import CacheMiss, InstrumentationWarning, ModelHTTPError, StreamClosedError

from ._client_secrets import request_secrets, stored_body
from ._observed import _observed
from ._recording import (
    CallOptions,
    Config,
    Prices,
    _deferred,
    _options,
    _override,
    _request_key,
    _unkeyed_miss,
    bypassed,
    require,
)
from ._wire import Meta, SSEReader, WireRoute, find_route

__all__ = ["async_http_client", "framework_traces_models", "http_client", "transport"]

# Set by a framework adapter around the model calls of its framework: True when the
# framework traces them itself (its own OpenTelemetry instrumentation is on), so the
# transport records them without agentlog's span and a backend shows each call once;
# False to emit agentlog's span whatever else traces them; None (default): ``al.llm_call``
# decides from the span current at the call ("auto").
_FRAMEWORK_TRACES: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "agentlog_framework_traces_models", default=None)


@contextlib.contextmanager
def framework_traces_models(on: bool | None = True) -> Iterator[None]:
    """Within the block (this context: its thread or task, and tasks it starts), model
    calls through agentlog's transport are recorded without agentlog's model span when
    ``on`` (the framework making them traces them itself), with it when False, and as
    ``al.llm_call(span="auto")`` decides when None."""
    token = _FRAMEWORK_TRACES.set(on)
    try:
        yield
    finally:
        _FRAMEWORK_TRACES.reset(token)

_NO_OPTIONS = CallOptions()
# Headers that describe the bytes on the wire, not the decoded body a rebuilt response
# carries (httpx decodes gzip/br as it reads).
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_MAX_ERROR_BODY = 64 * 1024  # bytes of an error response kept for its message


# --------------------------------------------------------------------------- one call


class _Call:
    """One recorded request in flight: its route, JSON body, cache key and clock; records
    itself exactly once (``record``)."""

    __slots__ = ("cache", "config", "key", "model", "once", "request", "route", "secrets",
                 "span", "stream", "t0")

    def __init__(self, route: WireRoute, config: Config, body: dict[str, Any], base_url: str,
                 query: dict[str, str], secrets: tuple[str, ...], cache: Any) -> None:
        self.route = route
        self.config = config
        self.cache = cache
        self.stream = body.get("stream") is True
        model = body.get("model")
        self.model = model if isinstance(model, str) else str(model)
        request = dict(body)
        request["base_url"] = base_url
        if query:
            request["extra_query"] = query
        self.request = request
        self.secrets = config.secrets + secrets
        # Whose span the call gets, as the context of the request says (a stream may be
        # recorded after the framework's block has ended).
        framework = _FRAMEWORK_TRACES.get()
        self.span: bool | Literal["auto"] = (
            False if config.spans is False else config.spans if framework is None
            else not framework)
        self.once = threading.Lock()
        options = _options.get() or _NO_OPTIONS
        channel = options.channel if options.channel is not None else config.channel
        self.key: Any = None
        try:
            self.key = _request_key()(route.provider, request, draw=options.draw,
                                      channel=channel)
        except ValueError as exc:
            warnings.warn(
                f"{route.provider}: this request has no cache key, so it is neither cached "
                f"nor replayable: {exc}", InstrumentationWarning, stacklevel=2)
        self.t0 = time.perf_counter_ns()

    @property
    def cached(self) -> bool:
        """Whether the cache serves this call (raises ``CacheMiss`` for a request without
        a key under a read-only cache)."""
        cache = self.cache
        if cache is None or cache.mode == "off":
            return False
        if self.key is None:
            if cache.mode == "read-only":
                raise _unkeyed_miss(self.route)
            return False
        return True

    def record(self, body: dict[str, Any] | None, *, status: str | None,
               error: BaseException | None = None) -> None:
        if not self.once.acquire(blocking=False):
            return  # a stream's end and its close both report: the first one counts
        seen = _observed.get()
        in_run = al.current_run() is not None
        if seen is None and not in_run:
            return
        latency = time.perf_counter_ns() - self.t0
        meta = Meta() if body is None else _meta(self.route, body)
        if seen is not None:
            seen.add(self.route.provider, self.model, meta.response_model, meta.fingerprint,
                     hit=status == "hit", failed=error is not None)
        if not in_run:
            return
        if status is None and self.cache is not None:
            status = "off"
        al.llm_call(
            self.route.provider, self.model,
            request=self.key.canonical if self.key is not None else self.request,
            response=body, operation=self.route.operation,
            input_tokens=meta.input_tokens, output_tokens=meta.output_tokens,
            latency_ns=latency, prices=self.config.prices, error=error,
            response_model=meta.response_model, response_id=meta.response_id,
            finish_reasons=meta.finish_reasons, fingerprint=meta.fingerprint,
            cache_key=None if self.key is None else self.key.digest,
            cache=status,  # type: ignore[arg-type]
            secrets=self.secrets, capture_content=self.config.capture_content,
            # The key's request already passed the scrubber's rules (its known secret
            # values and the run's redact hook are still applied).
            request_checked=self.key is not None and self.key.clean,
            span=self.span,
        )


def _meta(route: WireRoute, body: dict[str, Any]) -> Meta:
    try:
        return route.meta(body)
    except Exception:  # an unexpected body shape costs the usage numbers, never the call
        return Meta()


def _http_error(status: int, data: bytes) -> ModelHTTPError:
    """The recorded error of an HTTP error response: its status and the provider's message."""
    message = data[:_MAX_ERROR_BODY].decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(message)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    except ValueError:
        pass
    return ModelHTTPError(f"HTTP {status}: {message[:2000]}", status_code=status)


def _json_body(data: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _is_sse(headers: Any) -> bool:
    return "text/event-stream" in str(headers.get("content-type", ""))


def _decoded_headers(headers: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _WIRE_HEADERS]


class _Failed(Exception):
    """Raised inside a cache fetch so that an error response is not stored."""

    def __init__(self, status: int, headers: Any, data: bytes) -> None:
        super().__init__(status)
        self.status, self.headers, self.data = status, headers, data


class _Unreadable(_Failed):
    """Raised inside a cache fetch: a 200 response whose body is not the endpoint's JSON
    (not stored either; recorded without a body instead of with an error)."""


def _fetched_body(call: _Call, status: int, headers: Any, data: bytes) -> dict[str, Any]:
    """The body a cache stores of a whole response read by a fetch (a stream accumulated)."""
    if status >= 400:
        raise _Failed(status, headers, data)
    if _is_sse(headers):
        reader = SSEReader(call.route.accumulator())
        reader.feed(data)
        body: dict[str, Any] | None = reader.body()
    else:
        body = _json_body(data)
    if body is None:
        raise _Unreadable(status, headers, data)
    return stored_body(body, call.secrets)


def _served_content(call: _Call, body: dict[str, Any]) -> tuple[bytes, str]:
    """A stored body as the bytes a live response would carry, and their content type."""
    if call.stream:
        return call.route.sse(body), "text/event-stream"
    return json.dumps(body).encode(), "application/json"


class _Recording:
    """A live stream's recording: events folded as chunks pass, recorded once at its end,
    on its error, or when the caller closes or drops it."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.reader = SSEReader(call.route.accumulator())
        self.context = contextvars.copy_context()

    def feed(self, chunk: bytes) -> None:
        # A malformed event costs the record its content, never the call.
        with contextlib.suppress(Exception):
            self.reader.feed(chunk)

    def finish(self, error: BaseException | None = None) -> None:
        if self.call.once.locked():
            return
        try:
            body: dict[str, Any] | None = self.reader.body()
        except Exception:
            body = None
        self.call.record(body, status=None, error=error)

    def closed_early(self) -> None:
        if self.reader.complete:  # an SDK closes the response after the terminal event
            self.finish()
            return
        self.finish(StreamClosedError(
            f"the caller closed the stream after {self.reader.events} event(s), before its "
            "end"))

    def dropped(self) -> None:
        # Runs inside the garbage collector, possibly while this thread holds a lock that
        # recording takes: hand the work to agentlog's finaliser thread instead.
        if not self.call.once.locked():
            _deferred().put(lambda: self.context.run(self.closed_early))


def _miss_error(exc: CacheMiss, route: WireRoute) -> CacheMiss:
    """``exc`` as an error the caller's SDK passes through as it is.

    The anthropic SDK turns any exception its HTTP client raises into a retried
    ``APIConnectionError``, unless it is one of its own (``AnthropicError``, public): a
    miss must reach the caller as ``CacheMiss`` at once, so under that SDK it is raised as
    both.
    """
    sdk_error = _sdk_error(route)
    if sdk_error is None:
        return exc
    cls = _miss_classes.get(sdk_error)
    if cls is None:
        cls = _miss_classes[sdk_error] = type("CacheMiss", (CacheMiss, sdk_error), {
            "__module__": __name__, "__qualname__": "CacheMiss"})
    out: CacheMiss = cls(str(exc), key=exc.key, differences=exc.differences)
    return out


_miss_classes: dict[type[BaseException], type[CacheMiss]] = {}


def _sdk_error(route: WireRoute) -> type[BaseException] | None:
    module = sys.modules.get(route.provider.partition(".")[0])
    error = getattr(module, "AnthropicError", None) if module is not None else None
    return error if isinstance(error, type) and issubclass(error, BaseException) else None


# --------------------------------------------------------------------------- transports


class _Seam:
    """What the sync and async transports share: the configuration and what passed
    through unrecorded."""

    def __init__(self, lib: ModuleType, base: Any, config: Config, owns_base: bool) -> None:
        self._lib = lib
        self._base = base
        self._owns_base = owns_base  # made here (the default transport): closed here too
        self._config = config
        self._lock = threading.Lock()
        self.unrecorded: collections.Counter[str] = collections.Counter()
        self._warned: set[str] = set()  # endpoints named in a warning (once, in a run)

    def _start(self, request: Any) -> tuple[_Call | None, Any]:
        """``(call, cache)`` of a request: a call when it is recorded, else None."""
        override = _override.get()  # the one lookup an unset override costs
        cache = self._config.cache if override is None else override.cache
        if bypassed(cache):  # no cache, no run, nobody observing: straight through
            return None, cache
        route = find_route(request.method, request.url.path)
        if route is None:
            self._unrecorded(request)
            return None, cache
        try:
            content = request.content
        except Exception:  # a streamed request body: not a JSON model request
            content = b""
        body = _json_body(content) if content else None
        if body is None:
            self._unrecorded(request)
            return None, cache
        url = str(request.url.copy_with(query=None))
        base_url = url[:len(url) - len(route.path)] + "/" if url.endswith(route.path) else url
        query = dict(request.url.params.multi_items()) if request.url.query else {}
        secrets = request_secrets(request.headers, str(request.url))
        return _Call(route, self._config, body, base_url, query, secrets, cache), cache

    def _unrecorded(self, request: Any) -> None:
        where = f"{request.method} {request.url.path}"
        in_run = al.current_run() is not None
        with self._lock:
            if len(self.unrecorded) < 256 or where in self.unrecorded:
                self.unrecorded[where] += 1
            first = in_run and where not in self._warned and len(self._warned) < 256
            if first:
                self._warned.add(where)
        if first:
            warnings.warn(
                f"{where} passed through agentlog's transport unrecorded: it is not a model "
                "endpoint agentlog knows (Chat Completions, Responses, Completions, "
                "Embeddings, Anthropic Messages); the transport's `unrecorded` counts such "
                "requests", InstrumentationWarning, stacklevel=2)

    def _response(self, status: int, headers: Any, content: bytes, request: Any) -> Any:
        return self._lib.Response(status, headers=headers, content=content, request=request)

    def _served(self, call: _Call, served: Any, kept: list[tuple[int, Any, bytes]],
                request: Any) -> Any:
        call.record(served.response, status=served.status)
        if kept:  # this caller fetched it: the bytes as the server sent them
            status, headers, data = kept[0]
            return self._response(status, _decoded_headers(headers), data, request)
        content, kind = _served_content(call, served.response)
        return self._response(200, {"content-type": kind}, content, request)

    def _fetch_failed(self, call: _Call, exc: BaseException, request: Any) -> Any:
        """The response of a fetch the cache did not store (an error, an unreadable body),
        recorded as such; other exceptions are recorded and raised."""
        if isinstance(exc, _Failed):
            if isinstance(exc, _Unreadable):
                _warn_unreadable(call)
                call.record(None, status="miss")
            else:
                call.record(None, status="miss", error=_http_error(exc.status, exc.data))
            return self._response(exc.status, _decoded_headers(exc.headers), exc.data, request)
        call.record(None, status="miss", error=exc)
        if isinstance(exc, CacheMiss):
            raise _miss_error(exc, call.route) from None
        raise exc

    def _finished(self, call: _Call, response: Any, data: bytes, request: Any) -> Any:
        """A whole live response (not a stream): recorded, returned with the same bytes."""
        status = response.status_code
        if status >= 400:
            call.record(None, status=None, error=_http_error(status, data))
        else:
            body = _json_body(data)
            if body is None:
                _warn_unreadable(call)
            call.record(body, status=None)
        return self._response(status, _decoded_headers(response.headers), data, request)


def _warn_unreadable(call: _Call) -> None:
    warnings.warn(
        f"{call.route.provider}: the response body is not the endpoint's JSON; the call "
        "returned and is recorded without its body (and not cached)",
        InstrumentationWarning, stacklevel=2)


def _sync_class(lib: ModuleType) -> type:
    class RecordingTransport(_Seam, lib.BaseTransport):  # type: ignore[misc,name-defined]
        """A sync transport that records and serves model calls (``transport``)."""

        def _send(self, request: Any) -> Any:
            base = self._base
            if hasattr(base, "handle_request"):
                return base.handle_request(request)
            return base.send(request, stream=True)  # an httpx Client

        def handle_request(self, request: Any) -> Any:
            call, cache = self._start(request)
            if call is None:
                return self._send(request)
            try:
                cached = call.cached
            except CacheMiss as exc:
                return self._fetch_failed(call, exc, request)
            if cached:
                kept: list[tuple[int, Any, bytes]] = []

                def fetch() -> dict[str, Any]:
                    response = self._send(request)
                    try:
                        data = response.read()
                    finally:
                        response.close()
                    body = _fetched_body(call, response.status_code, response.headers, data)
                    kept.append((response.status_code, response.headers, data))
                    return body

                try:
                    served = cache.call(call.key, fetch)
                except BaseException as exc:
                    return self._fetch_failed(call, exc, request)
                return self._served(call, served, kept, request)
            try:
                response = self._send(request)
            except BaseException as exc:
                call.record(None, status=None, error=exc)
                raise
            if response.status_code < 400 and _is_sse(response.headers):
                return self._lib.Response(
                    response.status_code, headers=_decoded_headers(response.headers),
                    stream=_sync_stream(self._lib, response, _Recording(call)),
                    request=request, extensions=response.extensions)
            try:
                data = response.read()
            except BaseException as exc:
                call.record(None, status=None, error=exc)
                raise
            finally:
                response.close()
            return self._finished(call, response, data, request)

        def close(self) -> None:
            if self._owns_base:  # a caller's transport or client stays theirs to close
                self._base.close()

        def __del__(self) -> None:
            # As the SDKs' own HTTP clients do: a client a framework never closes must
            # not leave its pooled sockets open.
            if getattr(self, "_owns_base", False):
                with contextlib.suppress(Exception):
                    self._base.close()

    return RecordingTransport


def _async_class(lib: ModuleType) -> type:
    class AsyncRecordingTransport(_Seam, lib.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        """An async transport that records and serves model calls (``transport``)."""

        async def _send(self, request: Any) -> Any:
            base = self._base
            if hasattr(base, "handle_async_request"):
                return await base.handle_async_request(request)
            return await base.send(request, stream=True)  # an httpx AsyncClient

        async def handle_async_request(self, request: Any) -> Any:
            call, cache = self._start(request)
            if call is None:
                return await self._send(request)
            try:
                cached = call.cached
            except CacheMiss as exc:
                return self._fetch_failed(call, exc, request)
            if cached:
                kept: list[tuple[int, Any, bytes]] = []

                async def afetch() -> dict[str, Any]:
                    response = await self._send(request)
                    try:
                        data = await response.aread()
                    finally:
                        await response.aclose()
                    body = _fetched_body(call, response.status_code, response.headers, data)
                    kept.append((response.status_code, response.headers, data))
                    return body

                try:
                    served = await cache.acall(call.key, afetch)
                except BaseException as exc:
                    return self._fetch_failed(call, exc, request)
                return self._served(call, served, kept, request)
            try:
                response = await self._send(request)
            except BaseException as exc:
                call.record(None, status=None, error=exc)
                raise
            if response.status_code < 400 and _is_sse(response.headers):
                return self._lib.Response(
                    response.status_code, headers=_decoded_headers(response.headers),
                    stream=_async_stream(self._lib, response, _Recording(call)),
                    request=request, extensions=response.extensions)
            try:
                data = await response.aread()
            except BaseException as exc:
                call.record(None, status=None, error=exc)
                raise
            finally:
                await response.aclose()
            return self._finished(call, response, data, request)

        async def aclose(self) -> None:
            if self._owns_base:  # a caller's transport or client stays theirs to close
                await self._base.aclose()

    return AsyncRecordingTransport


def _sync_stream(lib: ModuleType, response: Any, recording: _Recording) -> Any:
    class Tee(lib.SyncByteStream):  # type: ignore[misc,name-defined]
        read = False

        def __iter__(self) -> Iterator[bytes]:
            if self.read:  # an SDK draining a stream it read: nothing is left
                return
            self.read = True
            try:
                for chunk in response.iter_bytes():
                    recording.feed(chunk)
                    yield chunk
            except GeneratorExit:
                raise  # dropped or closed: close() and the finaliser record it
            except BaseException as exc:
                recording.finish(exc)
                raise
            recording.finish()

        def close(self) -> None:
            try:
                response.close()
            finally:
                recording.closed_early()

    tee = Tee()
    weakref.finalize(tee, recording.dropped)
    return tee


def _async_stream(lib: ModuleType, response: Any, recording: _Recording) -> Any:
    class Tee(lib.AsyncByteStream):  # type: ignore[misc,name-defined]
        read = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self.read:  # an SDK draining a stream it read: nothing is left
                return
            self.read = True
            try:
                async for chunk in response.aiter_bytes():
                    recording.feed(chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                recording.finish(exc)
                raise
            recording.finish()

        async def aclose(self) -> None:
            try:
                await response.aclose()
            finally:
                recording.closed_early()

    tee = Tee()
    weakref.finalize(tee, recording.dropped)
    return tee


_classes: dict[tuple[str, bool], type] = {}
_classes_lock = threading.Lock()


def _transport_class(lib: ModuleType, is_async: bool) -> type:
    with _classes_lock:
        cls = _classes.get((lib.__name__, is_async))
        if cls is None:
            cls = _classes[(lib.__name__, is_async)] = (
                _async_class(lib) if is_async else _sync_class(lib))
        return cls


def _library(base: Any, lib: str | None) -> ModuleType:
    """The HTTP library (``httpx2`` or ``httpx``) of ``base``, or the one named."""
    if lib is None and base is not None:
        lib = type(base).__module__.partition(".")[0]
        if lib not in ("httpx2", "httpx"):
            lib = "httpx2"
    name = lib or "httpx2"
    if name not in ("httpx2", "httpx"):
        raise ValueError(f"`http` must be 'httpx2' or 'httpx'; found {name!r}")
    module: ModuleType = require(name, "openai")
    return module


def transport(*, cache: Any = None, channel: str | None = None, base: Any = None,
              prices: Prices | None = None, capture_content: bool = False,
              secrets: Sequence[str] = (), is_async: bool | None = None,
              http: str | None = None, spans: bool | Literal["auto"] = "auto") -> Any:
    """An HTTP transport that records (and, with ``cache``, serves) model calls.

    Args:
        cache: an ``agentlog.replay.ModelCache``, the path of its SQLite file, or None.
        channel: the evaluation channel these calls serve (part of the cache key);
            ``call_options`` overrides it per call.
        base: the transport or HTTP client requests are forwarded to: an
            ``httpx2``/``httpx`` transport (``HTTPTransport``, ``MockTransport``) or
            client (its ``send``), which stays the caller's to close; None: the
            library's default ``HTTPTransport``, closed with this transport.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``.
        capture_content: put message content on the spans.
        secrets: credential values to remove from records and cached bodies besides the
            ones each request's headers carry.
        is_async: an async transport; default: as ``base`` is (sync for a base that does
            both, such as ``MockTransport``, or for none).
        http: ``"httpx2"`` or ``"httpx"``; default: ``base``'s library, else ``httpx2``.
        spans: agentlog's span of each model call (when a TracerProvider is configured):
            ``"auto"`` (default) emits it unless the call is made inside another
            instrumentation's span of a model call (an OpenInference instrumentor, the
            SDK's or framework's own spans), so each call is one span in the backend and
            its tokens count once; True always (both spans), False never. A framework
            adapter that knows its framework traces a call decides for it
            (``framework_traces_models``).

    Returns:
        A ``BaseTransport`` (or ``AsyncBaseTransport``) of that library; its
        ``unrecorded`` counts the requests that passed through unrecorded, by endpoint.

    Raises:
        TypeError, ValueError: a bad ``cache`` or ``http``.
        agentlog.MissingDependencyError: the HTTP library is not installed.
    """
    module = _library(base, http)
    if is_async is None:
        # MockTransport serves both: a base that can do both is taken as sync.
        is_async = base is not None and (isinstance(base, module.AsyncClient) or (
            hasattr(base, "handle_async_request") and not hasattr(base, "handle_request")))
    owns_base = base is None
    if base is None:
        base = module.AsyncHTTPTransport() if is_async else module.HTTPTransport()
    config = Config(cache=cache, channel=channel, prices=prices,
                    capture_content=capture_content, secrets=tuple(secrets), spans=spans)
    return _transport_class(module, is_async)(module, base, config, owns_base)


def http_client(*, cache: Any = None, channel: str | None = None, base: Any = None,
                prices: Prices | None = None, capture_content: bool = False,
                http: str | None = None, spans: bool | Literal["auto"] = "auto",
                **client_kwargs: Any) -> Any:
    """An ``httpx2.Client`` (or ``httpx.Client``) whose transport records model calls:
    pass it to any SDK or framework that takes an HTTP client
    (``openai.OpenAI(http_client=...)``, ``ChatOpenAI(http_client=...)``).

    The arguments are ``transport``'s; ``client_kwargs`` go to the client (``timeout``,
    ``headers``, ...).
    """
    t = transport(cache=cache, channel=channel, base=base, prices=prices,
                  capture_content=capture_content, is_async=False, http=http, spans=spans)
    return t._lib.Client(transport=t, **client_kwargs)


def async_http_client(*, cache: Any = None, channel: str | None = None, base: Any = None,
                      prices: Prices | None = None, capture_content: bool = False,
                      http: str | None = None, spans: bool | Literal["auto"] = "auto",
                      **client_kwargs: Any) -> Any:
    """The async twin of ``http_client``: an ``httpx2.AsyncClient``."""
    t = transport(cache=cache, channel=channel, base=base, prices=prices,
                  capture_content=capture_content, is_async=True, http=http, spans=spans)
    return t._lib.AsyncClient(transport=t, **client_kwargs)


# --------------------------------------------------------------------------- SDK clients


def wrap_client(client: Any, *, sync_cls: Any, async_cls: Any, expected: str,
                secret_attrs: Sequence[str], cache: Any, channel: str | None,
                prices: Prices | None, capture_content: bool,
                spans: bool | Literal["auto"] = "auto", **options: Any) -> Any:
    """A copy of an SDK client whose HTTP client records: ``client.with_options(
    http_client=...)`` with a recording transport in front of the client's own HTTP client.

    The SDK keeps its HTTP client in ``client._client``: the one attribute read here,
    because no public accessor exists; requests go on through it (its transport, proxies
    and event hooks), so a client built with its own ``http_client`` keeps it. Wrapping a
    wrapped client replaces the recording configuration; it never records twice.
    """
    if isinstance(client, async_cls):
        is_async = True
    elif isinstance(client, sync_cls):
        is_async = False
    else:
        raise TypeError(f"`client` must be an {expected}; found {type(client).__qualname__}")
    from ._client_secrets import client_secrets

    config_cache = Config(cache=cache).cache  # a path is opened once, here
    inner = getattr(client, "_client", None)
    inner = _recording_of.get(inner, inner) if inner is not None else None
    t = transport(cache=config_cache, channel=channel, base=inner, prices=prices,
                  capture_content=capture_content, is_async=is_async,
                  secrets=client_secrets(client, secret_attrs), spans=spans)
    lib = t._lib
    kwargs = {} if inner is None else {"timeout": inner.timeout}
    http = (lib.AsyncClient if is_async else lib.Client)(transport=t, **kwargs)
    _recording_of[http] = inner
    copy: Any = client
    return copy.with_options(http_client=http, **options)


# Our HTTP client -> the client it forwards to: a wrapped client's HTTP client is ours;
# wrapping it again forwards to the one behind it instead. Weak: gone with our client.
_recording_of: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
